"""End to end with real processes: `mkt jobs run` killed with SIGKILL in the middle of a send,
then run again, mails every recipient and at most `concurrency` of them twice (CONTRACT section 7)."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.smtp_server import SmtpServer

pytestmark = pytest.mark.slow
RECIPIENTS = 120
CONCURRENCY = 5
HTML = "<p>Hi {{contact.first_name}} <a href='https://example.org/x'>x</a> <a href='{{unsubscribe_url}}'>u</a></p>"


def mkt(db: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), *args, "--json"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout) if out.stdout.strip() else None


def _slow(server: SmtpServer, seconds: float) -> None:
    """Each message takes `seconds` to be accepted, so that a kill lands mid-send."""
    handler = server.controller.handler
    accept = handler.handle_DATA

    async def slowly(*args: Any) -> str:
        await asyncio.sleep(seconds)
        return await accept(*args)
    handler.handle_DATA = slowly


def _prepare(tmp_path: Path, *, schedule: bool = True, html: str = HTML) -> tuple[Path, str]:
    db = tmp_path / "send.db"
    mkt(db, "init", "--name", "Kill test")
    csv = tmp_path / "people.csv"
    csv.write_text("email,first_name\n" + "".join(f"p{i:03}@example.org,P{i}\n" for i in range(RECIPIENTS)))
    mkt(db, "contacts", "import", str(csv))
    domain = mkt(db, "domains", "add", "example.com")
    with sqlite3.connect(db) as conn:  # DNS is not the subject here (tests/test_*domains* check it)
        conn.execute("UPDATE dns_records SET verified = 1")
        conn.execute("UPDATE domains SET verified = 1")
    sender = mkt(db, "senders", "add", "--domain-id", str(domain["id"]), "--local-part", "news",
                 "--display-name", "News")
    campaign = mkt(db, "campaigns", "create", "--name", "Killed")
    mkt(db, "campaigns", "configure", campaign["id"], "--sender-id", str(sender["id"]), "--subject-a", "Hello there",
        "--audience-type", "ENTIRE_AUDIENCE")
    page = tmp_path / "body.html"
    page.write_text(html)
    mkt(db, "campaigns", "html", "set", campaign["id"], "A", str(page))
    if schedule:
        mkt(db, "campaigns", "schedule", campaign["id"], "--now")
    return db, campaign["id"]


def test_sigkill_mid_send_then_restart(tmp_path: Path) -> None:
    db, campaign_id = _prepare(tmp_path)
    with SmtpServer() as server:
        _slow(server, 0.01)
        env = {"MKT_SMTP_URL": server.url, "MKT_SEND_CONCURRENCY": str(CONCURRENCY)}
        runner = subprocess.Popen([sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run",
                                   "--lease-seconds", "2"], env={**os.environ, **env},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(server.messages) < RECIPIENTS // 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        killed_at = len(server.messages)
        assert 0 < killed_at < RECIPIENTS, "the kill must land mid-send"
        time.sleep(2.5)  # the dead runner's lease expires
        mkt(db, "jobs", "run", env=env)
    received = collections.Counter(m.rcpt_tos[0] for m in server.messages)
    assert set(received) == {f"p{i:03}@example.org" for i in range(RECIPIENTS)}
    twice = [address for address, n in received.items() if n > 1]
    # only the messages handed over and not recorded when the runner died: the rounds in
    # flight hold `concurrency` of them between them
    assert len(twice) <= CONCURRENCY, twice
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENT"
        assert conn.execute("SELECT count(*) FROM email_messages WHERE status = 'delivered'").fetchone()[0] == RECIPIENTS
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_mkt_serve_sends_tracks_and_unsubscribes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole loop through a real `mkt serve`: its worker sends, its tracking paths answer."""
    import email
    import re
    from email import policy

    import httpx

    from tests.conftest import Server

    db, campaign_id = _prepare(tmp_path, schedule=False)
    key = mkt(db, "keys", "create", "--name", "e2e")["key"]
    with SmtpServer() as smtp:
        monkeypatch.setenv("MKT_SMTP_URL", smtp.url)
        server = Server(db, "--smtp-url", smtp.url)
        try:
            mkt(db, "workspace", "update", "--tracking-url", server.base)
            headers = {"Authorization": f"Bearer {key}"}
            scheduled = httpx.post(f"{server.base}/v1/campaigns/{campaign_id}/schedule", headers=headers,
                                   json={"schedule_type": "NOW"})
            assert scheduled.json() == {"error": None, "data": {"id": campaign_id, "status": "QUEUED"}}
            deadline = time.monotonic() + 60
            status = None
            while time.monotonic() < deadline:
                status = httpx.get(f"{server.base}/v1/campaigns/{campaign_id}", headers=headers).json()["data"]
                if status["status"] == "SENT":
                    break
                time.sleep(0.2)
            assert status is not None and status["status"] == "SENT", status
            assert status["progress"]["delivered"] == RECIPIENTS
            message = email.message_from_bytes(smtp.messages[0].raw, policy=policy.default)
            html = message.get_body(("html",)).get_content()
            pixel = re.search(r'src="([^"]+/t/o/[^"]+)"', html).group(1)
            link = re.search(r'href="([^"]+/t/c/[^"]+)"', html).group(1)
            assert httpx.get(pixel).headers["content-type"] == "image/gif"
            assert httpx.get(link, follow_redirects=False).headers["location"] == "https://example.org/x"
            unsubscribe = message["List-Unsubscribe"].strip("<>")
            assert httpx.post(unsubscribe, content=b"List-Unsubscribe=One-Click").status_code == 200
            stats = httpx.get(f"{server.base}/v1/campaigns/{campaign_id}/statistics", headers=headers).json()["data"]
            assert {k: stats["aggregate"][k] for k in ("delivered", "opened", "clicked", "unsubscribed")} == \
                {"delivered": RECIPIENTS, "opened": 1, "clicked": 1, "unsubscribed": 1}
        finally:
            assert server.stop() == 0


def test_the_view_online_link_of_a_received_message_shows_that_message(tmp_path: Path) -> None:
    """Sent by `mkt serve`'s worker through a real SMTP server; the link in each received
    message, fetched from the same server, answers that recipient's message."""
    import email
    import re
    from email import policy

    import httpx

    from tests.conftest import Server

    html = ("<p>Hi {{contact.first_name}} <a href='https://example.org/x'>x</a>"
            " <a href='{{view_online_url}}'>View online</a> <a href='{{unsubscribe_url}}'>u</a></p>")
    db, campaign_id = _prepare(tmp_path, schedule=False, html=html)
    key = mkt(db, "keys", "create", "--name", "e2e")["key"]
    with SmtpServer() as smtp:
        server = Server(db, "--smtp-url", smtp.url)
        try:
            mkt(db, "workspace", "update", "--tracking-url", server.base + "/mkt")  # a base with a path
            headers = {"Authorization": f"Bearer {key}"}
            httpx.post(f"{server.base}/v1/campaigns/{campaign_id}/schedule", headers=headers,
                       json={"schedule_type": "NOW"}).raise_for_status()
            deadline = time.monotonic() + 60
            while len(smtp.messages) < RECIPIENTS and time.monotonic() < deadline:
                time.sleep(0.1)
            received = {m.rcpt_tos[0]: email.message_from_bytes(m.raw, policy=policy.default)
                        for m in smtp.messages}
            for address, name in (("p007@example.org", "P7"), ("p101@example.org", "P101")):
                part = received[address].get_body(("html",)).get_content().replace("\r\n", "\n")
                url = re.search(r'href="([^"]+/t/v/[^"]+)"', part).group(1)
                assert url.startswith(server.base + "/mkt/t/v/")
                page = httpx.get(url)  # no key: the link as the recipient's browser follows it
                assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
                assert page.text == part and f"Hi {name} " in page.text
                click = re.search(r'href="([^"]+/t/c/[^"]+)"', page.text).group(1)
                assert httpx.get(click, follow_redirects=False).headers["location"] == "https://example.org/x"
            forged = url[:-2] + ("AA" if not url.endswith("AA") else "BB")
            assert httpx.get(forged).status_code == 404
        finally:
            assert server.stop() == 0

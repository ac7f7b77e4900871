"""A revocation takes effect within a second for every message not yet handed over (issue 38
item 4; docs/privacy.md "Revoking consent by text"), with two workers sending, on both engines.

A workspace of 5,000 contacts (an address and a US number each) gets an email campaign (to the
outbox folder) and then an SMS campaign (to a Twilio stand-in), each to all 5,000, sent by
`mkt serve`'s worker and a `mkt jobs run --forever` (MKT_SEND_WORKERS=2: the send job and one
helper). In the middle of each send, contacts revoke through `mkt serve`: a one-click
unsubscribe (the List-Unsubscribe URL of an earlier email they got) or a STOP reply (Twilio's
signed inbound webhook). Targets: one whose message is claimed and not yet handed over at that
instant, when there is one (a network batch takes seconds: the hand-off's RevocationWatch), and
one still waiting in line (the claim's own check).

Asserted, for each target: no message of the campaign reached the transport (an .eml file's
modification time) or the stand-in (its arrival time) later than 1 s after the revocation's
answer; the messages not handed over are cancelled; each STOP earned exactly one confirmation
text; both campaigns finished.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import factories
from tests.conftest import Server, free_port

pytestmark = pytest.mark.slow

RECIPIENTS = 5000
SID, TOKEN = factories.TWILIO_SID, factories.TWILIO_TOKEN
REPO = Path(__file__).resolve().parents[2]
GRACE = 1.0  # seconds after the revocation's answer
SMS_TEXT = "Big sale today, 20% off everything. Reply STOP to opt out."



def _world(conn: Any, standin: str) -> dict[str, Any]:
    """5,000 contacts; every 250th also tagged `early` (the welcome email's audience); SMS ready."""
    from marketing_cli.kernel import clock
    from marketing_cli.kernel.ids import new_id
    from marketing_cli.services.account import billing
    from marketing_cli.services.sms import ledger, providers
    from marketing_cli.storage.db import transaction

    ws = factories.workspace(conn)["id"]
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        billing.set_allowance(conn, ws, resource, RECIPIENTS * 4)
    factories.field(conn, ws, "phone_number", label="Phone")
    early = factories.tag(conn, ws, "early")
    now = clock.now()
    rows = [(new_id(), ws, f"u{i:04d}@example{i % 7}.org", f"+1212555{i:04d}", "SUBSCRIBED", "{}", now, now)
            for i in range(RECIPIENTS)]
    with transaction(conn):
        conn.executemany("INSERT INTO contacts (id, workspace_id, email, phone, status, data, created_at, updated_at)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO contact_tags (contact_id, tag_id) VALUES (?, ?)",
                         [(rows[i][0], early) for i in range(0, RECIPIENTS, 250)])
    ledger.set_sender_id(conn, ws, "SHOP")
    ledger.add_balance(conn, ws, "10000")
    providers.set_provider(conn, ws, "twilio", account_sid=SID, auth_token=TOKEN, base_url=standin)
    return {"ws": ws, "early": early}


def _email_campaign(conn: Any, ws: int, subject: str, audience: dict[str, Any]) -> str:
    """A ready campaign (the workspace's one sender, made once) to `audience`, its domain verified."""
    from marketing_cli.services.email import campaigns, variant_html
    from marketing_cli.storage.db import transaction

    made = factories.campaign(conn, ws, subject)
    sender = factories.campaign_sender(conn, ws) if not conn.execute(
        "SELECT 1 FROM sender_identities LIMIT 1").fetchone() else conn.execute(
        "SELECT id FROM sender_identities ORDER BY id LIMIT 1").fetchone()[0]
    campaigns.configure_campaign(conn, ws, made["id"], {"sender": {"sender_identity_id": sender}, "audience": audience,
                                                        "variants": [{"type": "A", "subject": subject}]})
    variant_html.set_variant_html(conn, ws, made["id"], "A", {"html": factories.UNSUBSCRIBE_HTML})
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (ws,))
    return made["id"]


def _outbox() -> dict[Path, tuple[str, str, str, float]]:
    """Every .eml file: (To, Subject, List-Unsubscribe, modification time)."""
    out = {}
    for path in Path(os.environ["MKT_OUTBOX"]).glob("*.eml"):
        with open(path, "rb") as f:
            head = email.parser.BytesHeaderParser().parse(f)
        out[path] = (head["To"], head["Subject"], head["List-Unsubscribe"] or "", path.stat().st_mtime)
    return out


def _wait(what: str, check: Any, seconds: float = 240) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"waited {seconds} s for {what}")


def _targets(conn: Any, table: str, campaign_id: str, pending: str, candidates: set[str]) -> list[str]:
    """Two contacts of `candidates` (None: any) whose message is not handed over yet: one claimed
    now (if any), one still waiting in line (the last)."""
    claimed = [r[0] for r in conn.execute(f"SELECT contact_id FROM {table} WHERE campaign_id = ? AND status = 'sending'"
                                          " ORDER BY id DESC", (campaign_id,))]
    waiting = [r[0] for r in conn.execute(f"SELECT contact_id FROM {table} WHERE campaign_id = ? AND status = ?"
                                          " ORDER BY id DESC", (campaign_id, pending))]
    pick = [c for c in claimed if c in candidates][:1]
    pick += [c for c in waiting if c in candidates and c not in pick][:1]
    return pick


def test_a_revocation_stops_every_message_not_yet_handed_over_within_a_second(
        conn: Any, db_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli import jobs
    from marketing_cli.services.email import schedule as email_schedule
    from marketing_cli.services.sms import schedule as sms_schedule
    from marketing_cli.services.sms import webhooks
    from marketing_cli.storage.db import transaction

    port = free_port()
    standin = subprocess.Popen([sys.executable, str(REPO / "bench" / "twilio_standin.py"), str(port), SID, TOKEN],
                               cwd=REPO)
    stand_url = f"http://127.0.0.1:{port}"
    server = worker = None
    try:
        _wait("the stand-in", lambda: _answers(stand_url + "/log") is not None, 30)
        world = _world(conn, stand_url)
        ws = world["ws"]
        # The welcome email to every 250th contact: their List-Unsubscribe URLs, for later.
        welcome = _email_campaign(conn, ws, "Welcome", {"type": "TAGS", "include_tag_ids": [world["early"]]})
        email_schedule.schedule_campaign(conn, ws, welcome, {"schedule_type": "NOW"})
        assert jobs.run_due(conn)["failed"] == 0
        unsubscribe = {to: url.strip("<>") for to, subject, url, _ in _outbox().values() if subject == "Welcome"}
        assert len(unsubscribe) == RECIPIENTS // 250
        env = {"MKT_SEND_WORKERS": "2", "MKT_SMS_BATCH_SIZE": "1000", "MKT_JOB_LEASE_SECONDS": "30"}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        server = Server(db_path)
        with transaction(conn):  # the tracking base: this server (the inbound webhook's signature is checked on it)
            conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (server.base, ws))
        worker = subprocess.Popen([sys.executable, "-m", "marketing_cli", "--db", str(db_path), "jobs", "run",
                                   "--forever", "--interval", "0.2"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, cwd=REPO)

        # --- email: one-click unsubscribes in the middle of the send -------------------------------
        big = _email_campaign(conn, ws, "Big sale", {"type": "ENTIRE_AUDIENCE"})
        email_schedule.schedule_campaign(conn, ws, big, {"schedule_type": "NOW"})
        delivered = lambda: conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ?"  # noqa: E731
                                         " AND status = 'delivered'", (big,)).fetchone()[0]
        _wait("a third of the emails", lambda: delivered() >= RECIPIENTS // 3)
        early_ids = {r[0]: r[1] for r in conn.execute("SELECT id, email FROM contacts WHERE id IN (SELECT contact_id"
                                                       " FROM contact_tags WHERE tag_id = ?)", (world["early"],))}
        targets = _targets(conn, "email_messages", big, "queued", set(early_ids))
        assert targets, "the send ended before a target could be picked"
        answered: dict[str, float] = {}
        for contact_id in targets:
            url = unsubscribe[early_ids[contact_id]]
            path = url[url.index("/t/u/"):]
            response = httpx.post(server.base + path, data={"List-Unsubscribe": "One-Click"}, timeout=10)
            answered[early_ids[contact_id]] = time.time()
            assert response.status_code == 200, response.text
        _wait("the email campaign to finish", lambda: conn.execute(
            "SELECT status FROM campaigns WHERE id = ?", (big,)).fetchone()[0] == "SENT")
        files = [(to, mtime) for to, subject, _, mtime in _outbox().values() if subject == "Big sale"]
        for address, at in answered.items():
            late = [mtime - at for to, mtime in files if to == address and mtime > at + GRACE]
            assert late == [], f"{address}: handed over {late} s after the unsubscribe was answered"
        states = dict(conn.execute("SELECT email, status FROM email_messages WHERE campaign_id = ? AND email IN"
                                   f" ({', '.join('?' * len(answered))})", (big, *answered)).fetchall())
        assert "cancelled" in states.values(), states  # (the one waiting in line, at least)
        assert len(files) == RECIPIENTS - list(states.values()).count("cancelled")

        # --- SMS: STOP replies in the middle of the send -------------------------------------------
        sms = factories.sms_campaign(conn, ws, "Big sale", message=SMS_TEXT)
        sms_schedule.schedule_campaign(conn, ws, sms["id"], {"schedule_type": "NOW"})
        _wait("a third of the texts", lambda: len(_answers(stand_url + "/log") or ()) >= RECIPIENTS // 3)
        everyone = {r[0]: r[1] for r in conn.execute("SELECT id, phone FROM contacts WHERE workspace_id = ?", (ws,))}
        targets = _targets(conn, "sms_messages", sms["id"], "pending", set(everyone))
        answered = {}
        for contact_id in targets:
            params = {"From": everyone[contact_id], "To": "+15005550006", "Body": "Stop please", "AccountSid": SID,
                      "MessageSid": "SM" + "2" * 32}
            signature = webhooks.signature(TOKEN, server.base + webhooks.INBOUND_PATH, params)
            response = httpx.post(server.base + webhooks.INBOUND_PATH, data=params,
                                  headers={"X-Twilio-Signature": signature}, timeout=10)
            answered[everyone[contact_id]] = time.time()
            assert response.status_code == 200, response.text
        _wait("the SMS campaign to finish", lambda: conn.execute(
            "SELECT status FROM sms_campaigns WHERE id = ?", (sms["id"],)).fetchone()[0] == "COMPLETED")
        _wait("the confirmations", lambda: sum(
            "unsubscribed" in body for _, body, _ in _answers(stand_url + "/log") or ()) >= len(answered), 60)
        log = _answers(stand_url + "/log")
        for number, at in answered.items():
            late = [when - at for to, body, when in log if to == number and body == SMS_TEXT and when > at + GRACE]
            assert late == [], f"{number}: texted {late} s after the STOP was answered"
            assert sum(to == number and "unsubscribed" in body for to, body, _ in log) == 1  # one confirmation
        states = dict(conn.execute("SELECT phone, status FROM sms_messages WHERE campaign_id = ? AND phone IN"
                                   f" ({', '.join('?' * len(answered))})", (sms["id"], *answered)).fetchall())
        assert "cancelled" in states.values(), states
        sent = [to for to, body, _ in log if body == SMS_TEXT]
        assert len(sent) == len(set(sent)) == RECIPIENTS - list(states.values()).count("cancelled")
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        if server is not None:
            server.stop()
        standin.terminate()
        standin.wait(10)


def _answers(url: str) -> Any:
    try:
        response = httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None

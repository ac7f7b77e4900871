"""Sending an email campaign end to end against a local SMTP sink, beside a bare smtplib loop.

mkt: a campaign with merge tags in the body, tracking on (rewritten links, the open pixel)
and DKIM signing, scheduled NOW and sent by one `mkt jobs run` process (preprocess: the
audience frozen; send: render, sign, SMTP with the default concurrency) to an aiosmtpd
sink running in its own process. Baseline, in the same run: `smtplib.SMTP.sendmail` of
pre-built 3 KB messages over one connection to the same sink.

Rows: messages per second (target >= 500 msg/s and >= 0.4x the bare loop), and the
sender's peak RSS at 10% of the audience against the full audience (flat: <= 1.5x).
"""

from __future__ import annotations

import os
import smtplib
import sqlite3
import subprocess
import sys
import tempfile
import time
from email import policy
from email.message import EmailMessage
from pathlib import Path

from common import REPO, row, run_measured, smtp_sink

BODY = ("<html><head><style>@media (max-width:600px){.c{width:100%!important}}</style></head><body>"
        "<table class='c' width='600' align='center' cellpadding='0' cellspacing='0'>"
        + "".join(f"<tr><td style='padding:8px;font-family:Arial'>Hello {{{{contact.first_name|there}}}}, paragraph {i}"
                  f" of our newsletter with <a href='https://shop.example.org/item/{i}'>item {i}</a> and some words "
                  "to make the message the size of a real one.</td></tr>" for i in range(12))
        + "<tr><td><a href='{{unsubscribe_url}}'>Unsubscribe</a></td></tr></table></body></html>")


def _sink() -> tuple[subprocess.Popen, int]:
    return smtp_sink([sys.executable, "-m", "aiosmtpd", "-n", "-c", "aiosmtpd.handlers.Sink", "-l", "127.0.0.1:{port}"])


def _bare_loop(port: int, count: int) -> float:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "news@example.com", "u@example.org", "Hello"
    line = "words of a newsletter paragraph, " * 2
    message.set_content((line + "\n") * 22)
    message.add_alternative("<p>" + (line + "\n") * 22 + "</p>", subtype="html")
    raw = message.as_bytes(policy=policy.SMTP)
    with smtplib.SMTP("127.0.0.1", port) as smtp:
        started = time.perf_counter()
        for i in range(count):
            smtp.sendmail("news@example.com", [f"u{i}@example.org"], raw)
        return count / (time.perf_counter() - started)


def _mkt(db: Path, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), *args], cwd=REPO,
                         capture_output=True, text=True, env={**os.environ, **(env or {})})
    if out.returncode != 0:
        raise RuntimeError(f"mkt {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def _prepare(folder: Path, count: int) -> tuple[Path, str]:
    """A database with `count` subscribed contacts and a ready campaign; returns (db, campaign id)."""
    import json

    db = folder / f"send-{count}.db"
    _mkt(db, "init", "--name", "Bench")
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        _mkt(db, "billing", "allowance", "set", resource, str(count * 2))
    csv = folder / f"contacts-{count}.csv"
    csv.write_text("email,first_name\n" + "".join(f"user{i}@example{i % 50}.org,Name{i}\n" for i in range(count)))
    _mkt(db, "contacts", "import", str(csv))
    domain = json.loads(_mkt(db, "domains", "add", "example.com", "--json"))
    with sqlite3.connect(db) as conn:  # the DNS records are taken as published (no DNS in a benchmark)
        conn.execute("UPDATE domains SET verified = 1")
        conn.execute("UPDATE dns_records SET verified = 1")
    sender = json.loads(_mkt(db, "senders", "add", "--domain-id", str(domain["id"]), "--local-part", "news",
                             "--display-name", "News", "--json"))
    campaign = json.loads(_mkt(db, "campaigns", "create", "--name", "Bench", "--json"))
    _mkt(db, "campaigns", "configure", campaign["id"], "--sender-id", str(sender["id"]), "--subject-a",
         "Hello {{contact.first_name}}", "--audience-type", "ENTIRE_AUDIENCE")
    html = folder / "body.html"
    html.write_text(BODY)
    _mkt(db, "campaigns", "html", "set", campaign["id"], "A", str(html))
    _mkt(db, "campaigns", "schedule", campaign["id"], "--now")
    return db, campaign["id"]


def _send(db: Path, port: int) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of one `mkt jobs run` that freezes and sends the campaign."""
    env = {**os.environ, "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    return run_measured([sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run"], env=env)


def run(quick: bool) -> list[dict]:
    count = 2_000 if quick else 100_000
    sink, port = _sink()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            small_db, _ = _prepare(folder, count // 10)
            big_db, campaign_id = _prepare(folder, count)
            bare = _bare_loop(port, min(count, 20_000))
            _, small_rss = _send(small_db, port)
            seconds, big_rss = _send(big_db, port)
            with sqlite3.connect(big_db) as conn:
                delivered = conn.execute("SELECT count(*) FROM email_messages WHERE status = 'delivered'").fetchone()[0]
            if delivered != count:
                raise RuntimeError(f"only {delivered} of {count} messages were delivered")
    finally:
        sink.terminate()
        sink.wait(10)
    rate = count / seconds
    return [
        row(f"email send, {count:,} recipients (DKIM, tracking, merge tags)", rate, "msg/s",
            "bare smtplib loop, pre-built 3 KB", bare, rate / bare, ">= 500 msg/s and >= 0.4x",
            rate >= 500 and rate / bare >= 0.4),
        row(f"email send peak RSS, {count:,} recipients", big_rss / 1024, "MiB",
            f"{count // 10:,} recipients", small_rss / 1024, big_rss / small_rss, "<= 1.5x (flat)",
            big_rss / small_rss <= 1.5),
    ]


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)

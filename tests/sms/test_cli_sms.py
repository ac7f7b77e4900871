"""`mkt sms ...`: --json prints the API's data, errors exit 1 with the API's message, usage
errors exit 2; and a `mkt jobs run` killed with SIGKILL mid-expansion never charges twice."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests import factories as f

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ready(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"], balance=None, sender=None)
    f.sms_contacts(conn, workspace["id"], ["+14155550101", "+447400123456"], first_name="Ann")
    return workspace["id"]


def test_a_campaign_end_to_end_from_the_cli(cli: Any, cli_json: Any, client: Any, auth: dict[str, str],
                                            ready: int) -> None:
    assert cli_json("sms", "sender-id", "set", "ACME") == {"sms_sender_id": "ACME"}
    assert cli_json("sms", "sender-id", "show") == {"sms_sender_id": "ACME"}
    assert cli_json("sms", "balance", "show") == {"balance": "0.00"}
    assert cli_json("sms", "balance", "add", "20") == {"balance": "20.00"}
    c = cli_json("sms", "create", "Autumn sale")
    assert c["status"] == "DRAFT" and c["workspace_id"] == ready
    updated = cli_json("sms", "update", c["id"], "--message", f.SMS_TEXT, "--audience", '{"type": "ENTIRE_AUDIENCE"}')
    assert updated == client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()["data"]
    assert cli_json("sms", "show", c["id"]) == updated
    assert cli_json("sms", "list") == client.get("/v1/sms-campaigns", headers=auth).json()["data"]
    assert cli_json("sms", "schedule", c["id"], "--now") == {"id": c["id"], "status": "QUEUED"}
    assert cli_json("jobs", "run") == {"processed": 1, "failed": 0}
    stats = cli_json("sms", "stats", c["id"])
    assert stats == client.get(f"/v1/sms-campaigns/{c['id']}/statistics", headers=auth).json()["data"]
    assert stats["aggregate"]["sent"] == 2 and stats["total_cost"] == "0.0483"
    assert cli_json("sms", "balance", "show") == {"balance": "19.9517"}
    history = cli_json("sms", "balance", "history")
    assert [h["kind"] for h in history] == ["charge", "top_up"] and history[0]["amount"] == "-0.0483"
    outbox = cli_json("sms", "outbox")
    assert {o["to"] for o in outbox} == {"+14155550101", "+447400123456"}
    assert outbox[0]["from"] == "ACME" and outbox[0]["body"].startswith("Hi Ann,")
    human = cli("sms", "stats", c["id"])
    assert human.exit_code == 0 and "sent" in human.stdout and "$0.05" in human.stdout
    # People read cents; --json (above) keeps every digit.
    assert cli("sms", "balance", "show").stdout.strip() == "SMS balance: $19.95"
    shown = cli("sms", "balance", "history").stdout
    assert "-0.05" in shown and "19.95" in shown and "0.0483" not in shown and "19.9517" not in shown
    assert cli_json("sms", "archive", c["id"]) == {"id": c["id"], "status": "ARCHIVED"}


def test_human_output(cli: Any, ready: int) -> None:
    result = cli("sms", "quote", "Hello 😀", "--to", "+14155550100")
    assert result.exit_code == 0 and "UCS-2" in result.stdout and "$0.00830" in result.stdout
    result = cli("sms", "review", "WIN BIG TODAY NOW!!! bit.ly/x")
    assert result.exit_code == 0 and "FLAGGED" in result.stdout and "repeated_punctuation" in result.stdout
    created = cli("sms", "create", "Promo")
    assert created.exit_code == 0 and "DRAFT" in created.stdout
    assert "Promo" in cli("sms", "list").stdout
    assert cli("sms", "balance", "add", "5").stdout.strip() == "SMS balance: $5.00"


def test_quote_and_review_json(cli_json: Any, client: Any, auth: dict[str, str], ready: int) -> None:
    quote = cli_json("sms", "quote", "x" * 161, "--to", "+447400123456")
    assert quote == client.post("/v1/sms/quote", json={"message": "x" * 161, "to": "+447400123456"},
                                headers=auth).json()["data"]
    assert quote["segments"] == 2 and quote["price"] == "0.08000"
    review = cli_json("sms", "review", "See you soon.")
    assert review == {"flagged": False, "score": 1, "threshold": 5, "rules": [
        {"rule": "missing_opt_out", "description": "No opt-out wording in a first message", "score": 1,
         "detail": "no 'Reply STOP' or similar wording"}]}
    assert cli_json("sms", "review", "See you soon.", "--not-first")["rules"] == []


def test_errors_exit_1_with_the_api_message_and_write_nothing(cli: Any, cli_json: Any, ready: int,
                                                              conn: sqlite3.Connection) -> None:
    result = cli("sms", "create", " ")
    assert result.exit_code == 1 and "Please provide a name for this campaign." in result.stderr
    result = cli("sms", "show", "nothex")
    assert result.exit_code == 1 and "We could not find the campaign you are looking for." in result.stderr
    c = cli_json("sms", "create", "Sale")
    result = cli("sms", "schedule", c["id"], "--at", "2020-01-01T00:00:00Z")
    assert result.exit_code == 1 and "Scheduled date must be in the future." in result.stderr
    result = cli("sms", "schedule", c["id"], "--now")
    assert result.exit_code == 1 and "Please provide a message for this campaign before scheduling." in result.stderr
    result = cli("sms", "list", "--status", "SENT")
    assert result.exit_code == 1 and "Invalid status 'SENT'." in result.stderr
    result = cli("sms", "balance", "add", "0")
    assert result.exit_code == 1 and "'0' is not an amount" in result.stderr
    result = cli("sms", "sender-id", "set", "WAY TOO LONG ID")
    assert result.exit_code == 1 and "is not a valid SMS sender ID" in result.stderr
    result = cli("sms", "cancel", c["id"])
    assert result.exit_code == 1 and "Only queued campaigns can be cancelled." in result.stderr
    assert cli_json("sms", "balance", "show") == {"balance": "0.00"}
    assert cli_json("sms", "sender-id", "show") == {"sms_sender_id": None}


@pytest.mark.parametrize(("message", "expected"), [
    ("Hi {{first_name}}", "The merge tag {{first_name}} is not a merge tag of this workspace."),
    ("Bye {{unsubscribe_url}}", "The merge tag {{unsubscribe_url}} cannot be used in an SMS"),
])
def test_tags_sms_cannot_send_are_refused_by_update_and_schedule(cli: Any, cli_json: Any, ready: int,
                                                                  conn: sqlite3.Connection, message: str,
                                                                  expected: str) -> None:
    c = cli_json("sms", "create", "Sale")
    result = cli("sms", "update", c["id"], "--message", message, "--audience", '{"type": "ENTIRE_AUDIENCE"}')
    assert result.exit_code == 1 and expected in result.stderr
    assert cli_json("sms", "show", c["id"]) == c  # nothing written
    conn.execute("UPDATE sms_campaigns SET message = ?, audience = '[{\"type\": \"ENTIRE_AUDIENCE\"}]' WHERE id = ?",
                 (message, c["id"]))  # stored before the check
    result = cli("sms", "schedule", c["id"], "--now")
    assert result.exit_code == 1 and expected in result.stderr
    assert cli_json("sms", "show", c["id"])["status"] == "DRAFT"


def test_usage_errors_exit_2(cli: Any, cli_json: Any, ready: int) -> None:
    c = cli_json("sms", "create", "Sale")
    assert cli("sms", "schedule", c["id"]).exit_code == 2
    assert cli("sms", "schedule", c["id"], "--now", "--at", "2030-01-01T00:00:00Z").exit_code == 2
    assert cli("sms", "update", c["id"]).exit_code == 2
    result = cli("sms", "update", c["id"], "--audience", "{nope")
    assert result.exit_code == 2 and "--audience is not valid JSON" in result.stderr


def _run_jobs(db: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run", "--json"],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_killed_expansion_never_charges_a_recipient_twice(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                            db_path: Path) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws, balance="100")
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(200)] + [f"+4474001{i:05d}" for i in range(50)]
                   + [f"+9198765{i:05d}" for i in range(10)], first_name="Ann")
    from marketing_cli.services.sms import schedule

    c = f.sms_campaign(conn, ws)
    schedule.schedule_campaign(conn, ws, c["id"], {"schedule_type": "NOW"})
    env = {"MKT_SMS_BATCH_SIZE": "10", "MKT_SMS_BATCH_PAUSE": "0.05"}
    proc = _run_jobs(db_path, env)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            charges = conn.execute("SELECT COUNT(*) FROM sms_ledger WHERE kind = 'charge'").fetchone()[0]
            if charges >= 4:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    written = conn.execute("SELECT COUNT(*) FROM sms_messages").fetchone()[0]
    assert 0 < written < 260, "the kill must land mid-expansion"
    assert conn.execute("SELECT status FROM sms_campaigns").fetchone()[0] == "QUEUED"
    # The dead runner's lease lapses (after 300 s in real life): another runner takes the job.
    conn.execute("UPDATE jobs SET lease_expires_at = '2000-01-01T00:00:00.000Z' WHERE status = 'running'")
    proc = _run_jobs(db_path, {"MKT_SMS_BATCH_SIZE": "10"})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"processed": 1, "failed": 0}
    assert conn.execute("SELECT status FROM sms_campaigns").fetchone()[0] == "COMPLETED"
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT contact_id) FROM sms_messages").fetchone()[:] == (260, 260)
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT message_id) FROM sms_outbox").fetchone()[:] == (250, 250)
    charged = sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE kind = 'charge'")),
                  Decimal(0))
    units = conn.execute("SELECT SUM(price_units) FROM sms_messages WHERE status = 'sent'").fetchone()[0]
    expected = Decimal("0.00830") * 200 + Decimal("0.04000") * 50
    assert -charged == Decimal(units).scaleb(-5) == expected
    assert conn.execute("SELECT COUNT(*) FROM sms_ledger WHERE kind = 'charge'").fetchone()[0] == \
        conn.execute("SELECT COUNT(DISTINCT batch) FROM sms_messages WHERE status = 'sent'").fetchone()[0]


def test_schedule_warns_when_the_message_has_no_opt_out_wording(cli: Any, conn: sqlite3.Connection,
                                                                 ready: int) -> None:
    from marketing_cli.services.sms import review

    f.sms_ready(conn, ready)
    bare = f.sms_campaign(conn, ready, "Bare", message="Hi {{contact.first_name}}, the sale starts today.")
    result = cli("sms", "schedule", bare["id"], "--now")
    assert result.exit_code == 0 and review.NO_OPT_OUT in result.stderr
    polite = f.sms_campaign(conn, ready, "Polite")  # "... Reply STOP to opt out."
    result = cli("sms", "schedule", polite["id"], "--now")
    assert result.exit_code == 0 and "opting out" not in result.stderr
    quiet = f.sms_campaign(conn, ready, "Scripted", message="Hi, the sale starts today.")
    assert cli("sms", "schedule", quiet["id"], "--now", "--json").stderr == ""  # --json: stdout and nothing else

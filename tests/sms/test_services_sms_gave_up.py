"""No SMS campaign stays QUEUED forever: when its `sms.expand` job fails for good, the job's
gave-up hook cancels it with the reason in `status_detail` and refunds what was never handed
to a provider, so its reservation ends too."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.contacts.fields import update_field
from marketing_cli.services.sms import campaigns, ledger, providers, schedule
from tests import factories as f

US = [f"+1415555{i:04d}" for i in range(101, 106)]
SID = "AC" + "0" * 32


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    f.sms_contacts(conn, workspace["id"], US, first_name="Ann")
    return workspace["id"]


def queued(conn: sqlite3.Connection, ws: int, message: str = f.SMS_TEXT) -> dict[str, Any]:
    campaign = f.sms_campaign(conn, ws, message=message)
    assert schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})["status"] == "QUEUED"
    assert ledger.reserved(conn, ws) > 0
    return campaign


def assert_stopped_and_refunded(conn: sqlite3.Connection, ws: int, campaign_id: str, reason: str) -> None:
    view = campaigns.get_campaign(conn, ws, campaign_id)
    assert view["status"] == "CANCELLED"
    assert view["status_detail"] == campaigns.JOB_FAILED.format(error=reason)
    assert conn.execute("SELECT status FROM jobs").fetchone()[0] == "failed"
    assert conn.execute("SELECT COUNT(*) FROM sms_messages WHERE campaign_id = ? AND status = 'pending'",
                        (campaign_id,)).fetchone()[0] == 0
    assert ledger.reserved(conn, ws) == 0
    assert ledger.balance(conn, ws) == Decimal(50)  # every charge refunded: nothing reached a provider
    assert [h["balance_after"] for h in ledger.ledger_history(conn, ws)][0] == "50.00"


def test_a_bad_rate_that_reaches_the_job_cancels_the_campaign_and_refunds_it(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch, client: Any, auth: dict[str, str],
        cli_json: Any) -> None:
    providers.set_provider(conn, ws, "twilio", account_sid=SID, auth_token="token", base_url="http://127.0.0.1:9")
    campaign = queued(conn, ws)
    monkeypatch.setenv("MKT_SMS_RATE", "fast")  # set after `mkt jobs run` checked its environment
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    reason = ("MKT_SMS_RATE must be a number of messages per second from 0 (unlimited) to 100,000, not 'fast'.")
    assert_stopped_and_refunded(conn, ws, campaign["id"], reason)
    assert conn.execute("SELECT COUNT(*) FROM sms_messages WHERE status = 'cancelled'").fetchone()[0] == 5
    refund = ledger.ledger_history(conn, ws, campaign_id=campaign["id"])[0]
    assert (refund["kind"], refund["amount"]) == ("refund", "0.0415")
    assert refund["reason"] == "Campaign 'Autumn sale' stopped (its job failed): 5 messages never handed to a provider"
    shown = client.get(f"/v1/sms-campaigns/{campaign['id']}", headers=auth).json()["data"]
    assert (shown["status"], shown["status_detail"]) == ("CANCELLED", campaigns.JOB_FAILED.format(error=reason))
    assert cli_json("sms", "show", campaign["id"]) == shown
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}  # nothing left to run


def test_the_last_failed_attempt_cancels_a_half_expanded_campaign(conn: sqlite3.Connection, ws: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    campaign = queued(conn, ws)
    conn.execute("UPDATE jobs SET max_attempts = 1")  # this attempt is the last
    real, calls = jobs.heartbeat, {"n": 0}

    def die_after_the_second_batch(c: sqlite3.Connection) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk full")
        real(c)

    monkeypatch.setattr(jobs, "heartbeat", die_after_the_second_batch)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    assert conn.execute("SELECT COUNT(*) FROM sms_messages WHERE status = 'cancelled'").fetchone()[0] == 4
    assert_stopped_and_refunded(conn, ws, campaign["id"], "RuntimeError: disk full.")
    assert campaigns.get_campaign(conn, ws, campaign["id"])["statistics"]["sent"] == 0


def test_a_merge_tag_gone_before_the_expansion_cancels_the_campaign(conn: sqlite3.Connection, ws: int) -> None:
    """A field renamed between scheduling and expansion: the job refuses to send the tag raw."""
    city = f.field(conn, ws, "city", "TEXT")
    campaign = queued(conn, ws, "Sale in {{contact.city|town}} today. Reply STOP to opt out.")
    update_field(conn, ws, city, {"label": "Town", "merge_tag": "town", "type": "TEXT"})
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    assert_stopped_and_refunded(conn, ws, campaign["id"],
                                "The merge tag {{contact.city}} is not a contact field of this workspace.")
    assert conn.execute("SELECT COUNT(*) FROM sms_messages").fetchone()[0] == 0


def test_the_hook_leaves_a_campaign_that_is_no_longer_queued(conn: sqlite3.Connection, ws: int) -> None:
    from marketing_cli.services.sms import expansion

    campaign = queued(conn, ws)
    campaigns.cancel_campaign(conn, ws, campaign["id"])
    expansion.expand_gave_up(conn, {"campaign_id": campaign["id"]}, "late")
    assert campaigns.get_campaign(conn, ws, campaign["id"])["status_detail"] is None

"""An email send skips the contacts who revoked since it was prepared (issue 38 item 4): the
claim reads each claimed row's contact status in its own statement and cancels the messages
of contacts who unsubscribed or complained, never handing them over (services/delivery/claim.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.account import billing
from marketing_cli.services.delivery import claim
from marketing_cli.services.email import preparation
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.storage.db import transaction
from tests import factories


@pytest.fixture
def prepared(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A campaign to 30 contacts, its messages written (queued), none handed over yet."""
    from marketing_cli.services.email import dns_check, domains

    monkeypatch.setattr(dns_check, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])
    ws = workspace["id"]
    for i in range(30):
        factories.contact(conn, ws, f"u{i:02d}@example.org")
    campaign = factories.ready_campaign(conn, ws, html=factories.UNSUBSCRIBE_HTML)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": campaign["id"]})
    first = conn.execute("SELECT contact_id, email FROM email_messages WHERE campaign_id = ? ORDER BY id LIMIT 2",
                         (campaign["id"],)).fetchall()
    return {"ws": ws, "id": campaign["id"], "first": first}


def _revoke(conn: sqlite3.Connection, contact_id: str, status: str) -> None:
    with transaction(conn):
        conn.execute("UPDATE contacts SET status = ? WHERE id = ?", (status, contact_id))


def test_a_round_of_revoked_contacts_only_claims_again(conn: sqlite3.Connection, prepared: dict[str, Any]) -> None:
    (one, one_email), (two, two_email) = prepared["first"]
    _revoke(conn, one, "UNSUBSCRIBED")
    _revoke(conn, two, "COMPLAINED")
    [claimed] = claim._claim(conn, prepared["id"], 1, claim=jobs.current_run(), workspace_id=prepared["ws"])
    assert claimed["email"] not in (one_email, two_email) and claimed["contact_status"] == "SUBSCRIBED"
    dropped = conn.execute("SELECT email, status, failure_reason, reserved_hour FROM email_messages"
                           " WHERE contact_id IN (?, ?) AND campaign_id = ? ORDER BY id", (one, two, prepared["id"]))
    assert [tuple(r) for r in dropped] == [(one_email, "cancelled", claim.REVOKED, None),
                                           (two_email, "cancelled", claim.REVOKED, None)]


def test_the_send_finishes_without_them_and_their_allowance_is_not_used(conn: sqlite3.Connection,
                                                                         prepared: dict[str, Any]) -> None:
    (one, _), (two, _) = prepared["first"]
    _revoke(conn, one, "UNSUBSCRIBED")
    _revoke(conn, two, "COMPLAINED")
    assert jobs.run_due(conn)["failed"] == 0
    row = conn.execute("SELECT status, status_detail FROM campaigns WHERE id = ?", (prepared["id"],)).fetchone()
    assert (row["status"], row["status_detail"]) == ("SENT", None)  # cancelled is not failed
    counts = dict(conn.execute("SELECT status, count(*) FROM email_messages WHERE campaign_id = ? GROUP BY status",
                               (prepared["id"],)).fetchall())
    assert counts == {"delivered": 28, "cancelled": 2}
    used, held = conn.execute("SELECT used, held FROM usage_counters WHERE workspace_id = ? AND resource ="
                              " 'hourly_emails' AND period = ?", (prepared["ws"],
                                                                  billing.period_of("hourly_emails"))).fetchone()
    assert (used, held) == (28, 0)

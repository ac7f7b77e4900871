"""The send's hot statements on many workers (issue 22, item 7): a round's claim and its record
read the round's messages through the primary key, never a scan of every message (PostgreSQL
planned `id IN (SELECT ... FROM json_each(?))` as one: 17 ms a round at 20,000 messages), and
the record writes its deliveries as one batch, exactly as the one-by-one path did."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.delivery import claim, record
from marketing_cli.services.email import preparation, stats
from marketing_cli.services.email import schedule as email_schedule
from tests import factories
from tests.engines import Recording, reads_by_key


@pytest.fixture
def sending(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    from marketing_cli.services.email import dns_check, domains

    monkeypatch.setattr(dns_check, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])
    ws = workspace["id"]
    for i in range(30):
        factories.contact(conn, ws, f"u{i}@example{i % 3}.org", first_name=f"N{i}")
    campaign = factories.ready_campaign(conn, ws, html='<p>Hi</p><p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>')
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": campaign["id"]})
    return campaign["id"]


def test_a_rounds_claim_and_fencing_read_its_ids_through_the_primary_key(conn: Any, sending: str) -> None:
    recording = Recording(conn)
    current = jobs.current_run()
    rows = claim._claim(recording, sending, 10, claim=current)
    assert len(rows) == 10
    ids = [r["id"] for r in rows]
    assert set(record._owned(recording, current.token, ids)) == set(ids)  # (each with its reserved hour)
    by_id = [(sql, params) for sql, params in recording.seen if "WHERE id IN (" in sql]
    assert [sql.split()[0] for sql, _ in by_id] == ["UPDATE", "SELECT"], recording.seen
    for sql, params in by_id:
        reads_by_key(conn, sql, params, "email_messages")


def test_a_batch_of_deliveries_counts_each_message_once_with_its_message_id(conn: Any, sending: str) -> None:
    ids = [r[0] for r in conn.execute("SELECT id FROM email_messages ORDER BY id LIMIT 4")]
    first = conn.execute("SELECT total_delivered FROM contacts WHERE id = (SELECT contact_id FROM email_messages"
                         " WHERE id = ?)", (ids[0],)).fetchone()[0]
    assert stats.record_deliveries(conn, [ids[0], *ids, 999_999], smtp_ids={ids[0]: "<a@x>", ids[1]: "<b@x>"}) == 4
    assert stats.record_deliveries(conn, ids) == 0  # delivered already: nothing counts twice
    got = conn.execute("SELECT id, status, smtp_message_id FROM email_messages WHERE id IN (?, ?, ?, ?) ORDER BY id",
                       ids).fetchall()
    assert [(r[1], r[2]) for r in got] == [("delivered", "<a@x>"), ("delivered", "<b@x>"), ("delivered", None),
                                           ("delivered", None)]
    assert conn.execute("SELECT total_delivered FROM contacts WHERE id = (SELECT contact_id FROM email_messages"
                        " WHERE id = ?)", (ids[0],)).fetchone()[0] == first + 1
    assert conn.execute("SELECT delivered FROM email_campaign_counters WHERE campaign_id = ?",
                        (sending,)).fetchone()[0] == 4


def test_a_round_in_steady_state_costs_ten_statements(conn: Any, sending: str, workspace: dict[str, Any]) -> None:
    """A round of 10 between two looks for expired claims (`expired=False`): the claim reads
    the campaign's status, the queued messages, and the monthly_emails and hourly_emails
    allowances in the RETURNING of the upsert that locks their counter rows (one statement
    for both), then reserves and claims; the record fences the round's rows, writes the
    contacts' counts and the deliveries (one statement each), settles the month and the hour.
    Ten statements
    but the transactions' BEGIN and COMMIT: one more is a cost for every round of every send
    (it was thirteen: the expired claims looked for on every round, the allowance read with
    every resource's, and the send loop's read of the campaign's status after each record).
    The provider lanes cost nothing more while no relay pushes back: a worker reads their rows
    at most every shaping.FRESH seconds, not in a steady round."""
    from types import SimpleNamespace

    from marketing_cli.services.delivery import shaping

    current, ws = jobs.current_run(), workspace["id"]
    shaper = shaping.Shaper(ws)
    assert shaper.states(conn) == {}  # (read before the round: a steady round reuses the reading)
    recording = Recording(conn)
    rows, spent = claim.claim_round(recording, sending, 10, claim=current, workspace_id=ws, expired=False,
                                    shaper=shaper)
    assert len(rows) == 10 and spent is None
    run = SimpleNamespace(claim=current, campaign_id=sending, outbox=None, smtp_id=lambda m: f"<{m['id']}@x>",
                          shaper=shaper, answered=0)
    answers = [(m["id"], None, False) for m in rows]
    assert record.record_round(recording, run, {m["id"]: m for m in rows}, answers, ws) == 0
    statements = [" ".join(sql.split()[:3]) for sql, _ in recording.seen
                  if not sql.lstrip().upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))]
    assert len(statements) == 10, statements
    assert conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ? AND status = 'delivered'",
                        (sending,)).fetchone()[0] == 10

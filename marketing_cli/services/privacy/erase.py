"""Deleting a contact erases it (CONTRACT section 10; docs/privacy.md "Erasing a person").

    DELETE /v1/contacts/{id}[?suppress=true]   mkt contacts delete ID [--suppress]
    mkt contacts erase ID|EMAIL|PHONE          (always suppresses)

One transaction takes the person out of every table, table by table as schema.sql has them:

- deleted: the contact (its field values, phone, email, time zone), its tags, its events
  (their payloads hold field values and custom event properties; found by reading the log
  before the transaction, `person_events`), its flow enrollments with
  their step runs and webhook calls (their bodies hold the contact), its segment-trigger state,
  its A/B hold-out rows, the test emails sent to its address, and the rows of PERSON_ROWS;
- stripped, not deleted (statistics read them): its email and SMS messages, their clicks
  (hand_offs.py): not yet handed over, they are dropped; one a worker is handing over right now
  is waited for after the commit, so nothing goes to the person once the erase has answered;
- moved to counts: a flow's statistics count enrollments and step runs, so the person's are
  added to automation_erased / automation_erased_runs before they go (an enrollment still
  running counts as exited, 'contact erased'); campaign counters, hours and breakdowns are
  aggregates already and do not change.

Opens and clicks keep no IP address or User-Agent (only a device type, an OS family and a
country, on the stripped click rows). With suppression, the keyed hashes of the email address
and phone number go on the suppression list (services/contacts/suppressions.py) in the same
transaction. tests/contacts/test_erase_table_walk.py walks every table and text column of the
schema after an erase and fails when a table that holds the person is not covered here.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.services.contacts import suppressions
from marketing_cli.services.contacts.records import CONTACT_ID_INVALID
from marketing_cli.services.privacy import hand_offs
from marketing_cli.services.privacy.person import contact_id_of
from marketing_cli.storage import dialect
from marketing_cli.storage.db import marks, read_snapshot, transaction

NOT_FOUND = "Not found."
SUPPRESS_INVALID = "The query parameter 'suppress' must be true or false."
ERASED_EXIT = "contact erased"  # the exit reason an erased person's running enrollments are counted with
EVENT_CHUNK = 500  # event ids per DELETE

# Rows of the person deleted outright, one statement each (parameters :ws, :contact, :email,
# :phone). A table that a later schema step adds to hold the person is one line here; a line
# whose table the database does not have (yet) is passed over.
PERSON_ROWS: tuple[tuple[str, str], ...] = (
    ("email_ab_holdout", "DELETE FROM email_ab_holdout WHERE campaign_id IN"
                         " (SELECT id FROM campaigns WHERE workspace_id = :ws) AND contact_id = :contact"),
    ("test_email_sends", "DELETE FROM test_email_sends WHERE workspace_id = :ws AND lower(recipient) = :email"),
    ("contact_consents", "DELETE FROM contact_consents WHERE contact_id = :contact"),
    ("sms_replies", "DELETE FROM sms_replies WHERE workspace_id = :ws AND (contact_id = :contact OR phone = :phone)"),
    ("automation_segment_state", "DELETE FROM automation_segment_state WHERE contact_id = :contact"),
    ("contact_tags", "DELETE FROM contact_tags WHERE contact_id = :contact"),
)

# A flow's statistics (services/automations/stats.py) count enrollments and step runs: the
# person's are added to these counts before they are deleted.
_FOLD_ENROLLMENTS = """
INSERT INTO automation_erased (automation_id, status, exit_reason, goal_reached, count)
SELECT automation_id, status, reason, goal, count(*) FROM (
    SELECT automation_id,
           CASE WHEN status IN ('active', 'paused') THEN 'exited' ELSE status END AS status,
           CASE WHEN status IN ('active', 'paused') THEN :erased ELSE coalesce(exit_reason, '') END AS reason,
           CASE WHEN goal_reached_at IS NULL THEN 0 ELSE 1 END AS goal
    FROM automation_enrollments WHERE contact_id = :contact) AS e
WHERE true GROUP BY automation_id, status, reason, goal
ON CONFLICT (automation_id, status, exit_reason, goal_reached)
DO UPDATE SET count = automation_erased.count + excluded.count"""
_FOLD_RUNS = """
INSERT INTO automation_erased_runs (automation_id, version_id, step_id, outcome, detail, count)
SELECT automation_id, version_id, step_id, outcome, detail, count(*) FROM (
    SELECT r.automation_id, r.version_id, r.step_id, r.outcome,
           CASE WHEN r.outcome IN ('skipped', 'deferred') THEN coalesce(r.detail, '') ELSE '' END AS detail
    FROM automation_step_runs r JOIN automation_enrollments e ON e.id = r.enrollment_id
    WHERE e.contact_id = :contact) AS x
WHERE true GROUP BY automation_id, version_id, step_id, outcome, detail
ON CONFLICT (version_id, step_id, outcome, detail)
DO UPDATE SET count = automation_erased_runs.count + excluded.count"""
_ENROLLED = "SELECT id FROM automation_enrollments WHERE contact_id = :contact"


def _flag(value: Any) -> bool:
    """`suppress` as a query string or the CLI gives it: true/false (1/0, yes/no), or a bool."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise MktError(400, SUPPRESS_INVALID)


def delete_contact(conn: sqlite3.Connection, workspace_id: int, contact_id: Any,
                   suppress: Any = False) -> dict[str, Any]:
    """DELETE /v1/contacts/{id}: erase the contact; `suppress` keeps its hashes on the suppression
    list. {"id", "deleted": true}; 404 `Not found.` for a contact that is not (or no longer) here."""
    contact_id = parse_hex_id(contact_id, CONTACT_ID_INVALID)
    return erase_contact(conn, workspace_id, contact_id, suppress=_flag(suppress))


def erase_person(conn: sqlite3.Connection, workspace_id: int, who: Any) -> dict[str, Any]:
    """`mkt contacts erase ID|EMAIL|PHONE`: erase the contact and suppress it."""
    return erase_contact(conn, workspace_id, contact_id_of(conn, workspace_id, who), suppress=True)


def person_events(conn: sqlite3.Connection, workspace_id: int, contact_id: str) -> tuple[list[int], int]:
    """The ids of the person's events and the last id of the log read, found before the erase's
    write transaction. Events have no index by contact (it would cost every event appended 35%
    more to spare a rare erase a read of the log: bench/bench_erase.py), so the workspace's log is
    read, here, in a read snapshot that holds no lock: other writers go on meanwhile (at 1,000,000
    events the read takes about 0.3 s, the write transaction about 1 ms). The
    transaction then deletes these by id and reads only the log's tail (ids after `last`: writers
    take ids in the order they commit, one at a time) for events appended since."""
    with read_snapshot(conn):
        last = conn.execute("SELECT coalesce(max(id), 0) FROM contact_events WHERE workspace_id = ?",
                            (workspace_id,)).fetchone()[0]
        ids = [r[0] for r in conn.execute("SELECT id FROM contact_events WHERE workspace_id = ? AND id <= ?"
                                          " AND contact_id = ?", (workspace_id, last, contact_id))]
    return ids, last


def _delete_events(conn: sqlite3.Connection, workspace_id: int, contact_id: str, found: tuple[list[int], int]) -> None:
    ids, last = found
    for start in range(0, len(ids), EVENT_CHUNK):
        chunk = ids[start:start + EVENT_CHUNK]
        conn.execute(f"DELETE FROM contact_events WHERE id IN ({marks(chunk)})", chunk)
    conn.execute("DELETE FROM contact_events WHERE workspace_id = ? AND id > ? AND contact_id = ?",
                 (workspace_id, last, contact_id))


def erase_contact(conn: sqlite3.Connection, workspace_id: int, contact_id: str, *, suppress: bool) -> dict[str, Any]:
    """The erase itself (see the module docstring); returns once nothing more can go to the person."""
    found = person_events(conn, workspace_id, contact_id)
    with transaction(conn):
        row = conn.execute("SELECT id, email, phone FROM contacts WHERE id = ? AND workspace_id = ?"
                           f"{dialect.for_update(conn)}", (contact_id, workspace_id)).fetchone()
        if row is None:
            raise MktError(404, NOT_FOUND)
        params = {"ws": workspace_id, "contact": row["id"], "email": row["email"], "phone": row["phone"],
                  "erased": ERASED_EXIT}
        email_held = hand_offs.erase_email(conn, workspace_id, row["id"], row["email"])
        sms_held = hand_offs.erase_sms(conn, workspace_id, row["id"])
        _erase_enrollments(conn, params)
        _delete_events(conn, workspace_id, row["id"], found)
        tables = dialect.table_names(conn)
        for table, sql in PERSON_ROWS:
            if table in tables:
                conn.execute(sql, params)
        conn.execute("DELETE FROM contacts WHERE id = ?", (row["id"],))
        if suppress:
            suppressions.suppress(conn, workspace_id, row["email"], row["phone"], suppressions.ERASED)
    hand_offs.wait_for_hand_offs(conn, workspace_id, email_held, sms_held)
    return {"id": row["id"], "deleted": True}


def _erase_enrollments(conn: sqlite3.Connection, params: dict[str, Any]) -> None:
    """The person's flow enrollments, step runs and webhook calls: counted, then deleted."""
    if conn.execute(_ENROLLED + " LIMIT 1", params).fetchone() is None:
        return
    conn.execute(_FOLD_ENROLLMENTS, params)
    conn.execute(_FOLD_RUNS, params)
    conn.execute(f"DELETE FROM automation_webhooks WHERE enrollment_id IN ({_ENROLLED})", params)
    conn.execute(f"DELETE FROM automation_step_runs WHERE enrollment_id IN ({_ENROLLED})", params)
    conn.execute("DELETE FROM automation_enrollments WHERE contact_id = :contact", params)

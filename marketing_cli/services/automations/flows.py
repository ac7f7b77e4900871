"""Flows: create, update the draft, publish a version, pause, resume, archive, read.

    DRAFT --publish--> ACTIVE --pause--> PAUSED --resume--> ACTIVE
      any of the three --archive--> ARCHIVED (final: its contacts exit, reason "archived")

Publishing stores an immutable version (validate.py) and makes it the one new entries
take; contacts already in the flow stay on the version they entered with, so deleting a
step in a new version never touches them. Publishing a DRAFT flow starts it (ACTIVE).

The `automations` plan allowance counts ACTIVE flows: its usage counter moves in the
transaction that starts, pauses, resumes or archives a flow, and starting one more than
the plan allows is the usual 400 "Billing limit error". Pausing holds every contact where
it is (its enrollments leave the due index) and stops new entries; resuming goes on.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.services.account import billing
from marketing_cli.services.automations import validate
from marketing_cli.services.automations.format import ANNIVERSARY, SEGMENT_KINDS, TRIGGER_EVENTS, check_document
from marketing_cli.services.delivery import sender_gate
from marketing_cli.storage.db import transaction

NOT_FOUND = "We could not find the automation you are looking for."
BILLING_LIMIT = "Billing limit error"
STATUSES = ("DRAFT", "ACTIVE", "PAUSED", "ARCHIVED")
ARCHIVED = "This automation is archived; archived automations cannot be changed."


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def automation_row(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> sqlite3.Row:
    automation_id = parse_int_id(automation_id, NOT_FOUND, 404)
    row = conn.execute("SELECT * FROM automations WHERE id = ? AND workspace_id = ?",
                       (automation_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row


def version_row(conn: sqlite3.Connection, automation_id: int, version: int) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM automation_versions WHERE automation_id = ? AND version = ?",
                        (automation_id, version)).fetchone()


def summary_view(row: sqlite3.Row) -> dict[str, Any]:
    draft = json.loads(row["draft"])
    return {
        "id": row["id"],
        "name": row["name"],
        "status": row["status"],
        "current_version": row["current_version"],
        "reentry": draft.get("reentry", "once"),
        "triggers": [t["type"] for t in draft.get("triggers", [])],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def automation_view(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    counts = dict.fromkeys(("active", "paused", "completed", "exited"), 0)
    for r in conn.execute("SELECT status, count(*) FROM automation_enrollments WHERE automation_id = ? GROUP BY status",
                          (row["id"],)):
        counts[r[0]] = r[1]
    versions = [{"version": r["version"], "published_at": r["published_at"]} for r in conn.execute(
        "SELECT version, published_at FROM automation_versions WHERE automation_id = ? ORDER BY version", (row["id"],))]
    return {**summary_view(row), "flow": json.loads(row["draft"]), "versions": versions, "enrollments": counts,
            "webhook_secret": row["webhook_secret"]}


def create_automation(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/automations: a DRAFT flow holding the document (its shape checked)."""
    flow = check_document(body)
    now = clock.now()
    with transaction(conn):
        automation_id = conn.execute(
            "INSERT INTO automations (workspace_id, name, status, draft, webhook_secret, created_at, updated_at)"
            " VALUES (?, ?, 'DRAFT', ?, ?, ?, ?)",
            (workspace_id, flow["name"], _dump(body), secrets.token_hex(32), now, now)).lastrowid
        return automation_view(conn, automation_row(conn, workspace_id, automation_id))


def update_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, body: Any) -> dict[str, Any]:
    """PUT /v1/automations/:id: replace the draft; contacts in the flow see it once it is published."""
    flow = check_document(body)
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        if row["status"] == "ARCHIVED":
            raise MktError(409, ARCHIVED)
        conn.execute("UPDATE automations SET name = ?, draft = ?, updated_at = ? WHERE id = ?",
                     (flow["name"], _dump(body), clock.now(), row["id"]))
        return automation_view(conn, automation_row(conn, workspace_id, row["id"]))


def list_automations(conn: sqlite3.Connection, workspace_id: int, status: Any = None) -> list[dict[str, Any]]:
    """GET /v1/automations: the workspace's flows, oldest first (optionally of one status)."""
    if status not in (None, ""):
        if not isinstance(status, str) or status.strip().upper() not in STATUSES:
            raise MktError(400, f"The status '{status}' is not valid. Valid statuses are: {', '.join(STATUSES)}.")
        rows = conn.execute("SELECT * FROM automations WHERE workspace_id = ? AND status = ? ORDER BY id",
                            (workspace_id, status.strip().upper()))
    else:
        rows = conn.execute("SELECT * FROM automations WHERE workspace_id = ? ORDER BY id", (workspace_id,))
    return [summary_view(r) for r in rows]


def get_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> dict[str, Any]:
    return automation_view(conn, automation_row(conn, workspace_id, automation_id))


def get_version(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, version: Any) -> dict[str, Any]:
    """GET /v1/automations/:id/versions/:version: the published (resolved) flow."""
    row = automation_row(conn, workspace_id, automation_id)
    number = parse_int_id(version, "We could not find that version of the automation.", 404)
    found = version_row(conn, row["id"], number)
    if found is None:
        raise MktError(404, "We could not find that version of the automation.")
    return {"automation_id": row["id"], "version": found["version"], "published_at": found["published_at"],
            "flow": json.loads(found["flow"])}


# --- the lifecycle ----------------------------------------------------------------------

def _take_allowance(conn: sqlite3.Connection, workspace_id: int) -> None:
    if billing.remaining(conn, workspace_id, "automations") < 1:
        raise MktError(400, BILLING_LIMIT)
    billing.bump_usage(conn, workspace_id, "automations", 1)


def _write_triggers(conn: sqlite3.Connection, row: sqlite3.Row, version_id: int, flow: dict[str, Any]) -> None:
    """The active version's triggers, flat (manual has no event: it is not listed)."""
    kinds = {**TRIGGER_EVENTS, **SEGMENT_KINDS, "date_anniversary": ANNIVERSARY}
    conn.execute("DELETE FROM automation_triggers WHERE automation_id = ?", (row["id"],))
    conn.executemany(
        "INSERT INTO automation_triggers (automation_id, version_id, workspace_id, position, event_type, matcher)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(row["id"], version_id, row["workspace_id"], i, kinds[t["type"]], _dump(t))
         for i, t in enumerate(flow["triggers"]) if t["type"] in kinds])
    _start_segment_state(conn, row, flow)
    # The first active flow of a workspace starts reading the log from now: older events
    # (and events while no flow was active) enroll nobody. Backfill is explicit.
    conn.execute("INSERT INTO automation_cursors (workspace_id, last_event_id) SELECT ?, coalesce(max(id), 0)"
                 " FROM contact_events WHERE workspace_id = ? ON CONFLICT (workspace_id) DO NOTHING",
                 (row["workspace_id"], row["workspace_id"]))


def _start_segment_state(conn: sqlite3.Connection, row: sqlite3.Row, flow: dict[str, Any]) -> None:
    """Who is in each segment a trigger watches, as of now: only a later change enters or leaves."""
    from marketing_cli.services.contacts.segment_filters import member_query

    conn.execute("DELETE FROM automation_segment_state WHERE automation_id = ?", (row["id"],))
    for segment_id in {t["segment_id"] for t in flow["triggers"] if t["type"] in SEGMENT_KINDS}:
        filters = conn.execute("SELECT filters FROM segments WHERE id = ?", (segment_id,)).fetchone()[0]
        query = member_query(conn, row["workspace_id"], json.loads(filters))
        conn.execute(f"INSERT INTO automation_segment_state (automation_id, segment_id, contact_id)"
                     f" SELECT ?, ?, id FROM ({query.sql}) AS members", [row["id"], segment_id, *query.params])


def _current_version(conn: sqlite3.Connection, row: sqlite3.Row) -> sqlite3.Row:
    return version_row(conn, row["id"], row["current_version"])


def publish_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> dict[str, Any]:
    """POST /v1/automations/:id/publish: validate the draft, store it as the next version. A draft
    or active flow becomes (stays) active: the senders of its email steps must pass the
    compliance gate (services/delivery/sender_gate.py; DNS looked up before the transaction)."""
    row = automation_row(conn, workspace_id, automation_id)
    if row["status"] in ("DRAFT", "ACTIVE"):
        sender_gate.require_flow_senders(conn, workspace_id, row["draft"])
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        if row["status"] == "ARCHIVED":
            raise MktError(409, ARCHIVED)
        flow = validate.resolve(conn, workspace_id, check_document(json.loads(row["draft"])))
        number = (row["current_version"] or 0) + 1
        now = clock.now()
        version_id = conn.execute(
            "INSERT INTO automation_versions (automation_id, version, flow, published_at) VALUES (?, ?, ?, ?)",
            (row["id"], number, _dump(flow), now)).lastrowid
        status = row["status"]
        if status == "DRAFT":
            _take_allowance(conn, workspace_id)
            status = "ACTIVE"
        if status == "ACTIVE":
            _write_triggers(conn, row, version_id, flow)
        conn.execute("UPDATE automations SET status = ?, current_version = ?, updated_at = ? WHERE id = ?",
                     (status, number, now, row["id"]))
        return automation_view(conn, automation_row(conn, workspace_id, row["id"]))


def pause_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> dict[str, Any]:
    """POST /v1/automations/:id/pause: no new entries; every contact in it is held where it is."""
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        if row["status"] != "ACTIVE":
            raise MktError(409, "Only active automations can be paused.")
        conn.execute("DELETE FROM automation_triggers WHERE automation_id = ?", (row["id"],))
        conn.execute("UPDATE automation_enrollments SET status = 'paused', updated_at = ?"
                     " WHERE automation_id = ? AND status = 'active'", (clock.now(), row["id"]))
        billing.bump_usage(conn, workspace_id, "automations", -1)
        conn.execute("UPDATE automations SET status = 'PAUSED', updated_at = ? WHERE id = ?", (clock.now(), row["id"]))
        return automation_view(conn, automation_row(conn, workspace_id, row["id"]))


def resume_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> dict[str, Any]:
    """POST /v1/automations/:id/resume: entries again; held contacts go on (overdue steps run now).
    The senders of its email steps must pass the compliance gate, as on publish."""
    row = automation_row(conn, workspace_id, automation_id)
    if row["status"] == "PAUSED" and row["current_version"]:
        sender_gate.require_flow_senders(conn, workspace_id, _current_version(conn, row)["flow"])
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        if row["status"] != "PAUSED":
            raise MktError(409, "Only paused automations can be resumed.")
        _take_allowance(conn, workspace_id)
        version = _current_version(conn, row)
        _write_triggers(conn, row, version["id"], json.loads(version["flow"]))
        conn.execute("UPDATE automation_enrollments SET status = 'active', updated_at = ?"
                     " WHERE automation_id = ? AND status = 'paused'", (clock.now(), row["id"]))
        conn.execute("UPDATE automations SET status = 'ACTIVE', updated_at = ? WHERE id = ?", (clock.now(), row["id"]))
        return automation_view(conn, automation_row(conn, workspace_id, row["id"]))


def archive_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> dict[str, Any]:
    """POST /v1/automations/:id/archive: final; every contact still in it exits (reason "archived")."""
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        if row["status"] == "ARCHIVED":
            raise MktError(409, ARCHIVED)
        now = clock.now()
        conn.execute("DELETE FROM automation_triggers WHERE automation_id = ?", (row["id"],))
        conn.execute("UPDATE automation_enrollments SET status = 'exited', exit_reason = 'archived', step_id = NULL,"
                     " next_run_at = NULL, waiting = 0, updated_at = ? WHERE automation_id = ?"
                     " AND status IN ('active', 'paused')", (now, row["id"]))
        if row["status"] == "ACTIVE":
            billing.bump_usage(conn, workspace_id, "automations", -1)
        conn.execute("UPDATE automations SET status = 'ARCHIVED', updated_at = ? WHERE id = ?", (now, row["id"]))
        return automation_view(conn, automation_row(conn, workspace_id, row["id"]))

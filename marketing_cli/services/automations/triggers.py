"""Triggers: the event log read through a per-workspace cursor, turned into enrollments.

`read_events` takes the next EVENT_BATCH events of a workspace after its cursor and, in
ONE transaction with the cursor's move:

1. enrolls contacts: one INSERT ... SELECT joins the batch with the triggers of the
   workspace's ACTIVE flows (automation_triggers, written at publish), each trigger kind
   matched in SQL (MATCH below); one enrollment per (flow, contact) per batch, the
   earliest matching event its entry;
2. ends goals: an enrolled contact with a later event matching its version's goal exits,
   counted as a conversion (and as `goal_reached` at the step where it was);
3. ends waits: a contact in a wait-for-event step with a later matching event goes on.

A crash before the COMMIT leaves the cursor where it was and writes no enrollment: the
batch is read again. Enrollment is unique on (flow, contact, entry key): 'once' for the
default policy, 'event:<event id>' for every_time and cooldown, so an event read twice
enrolls once. Every policy lets a contact in again only when it is not in the flow
now; cooldown also waits `cooldown` after its last entry.

Imports fire no events (services/contacts/batches.py), so they enroll nobody. `backfill`
enrolls existing contacts (all, or a segment's) on purpose: the faces show its count first.
"""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.services.automations.flows import automation_row, version_row
from marketing_cli.storage import dialect
from marketing_cli.storage.db import transaction

log = logging.getLogger("mkt.automations")

EVENT_BATCH = 5_000
RUN_JOB = "automations.run"  # runner.py's job; queued when contacts enter by hand or backfill
CONTACT_NOT_FOUND = "We couldn't find a contact with that ID."
NOT_ACTIVE = "Only active automations take contacts in."
NO_MANUAL = "This automation has no manual trigger: add {\"type\": \"manual\"} to its triggers and publish it."
ALREADY_IN = "The contact is already in this automation."
ONCE_ONLY = "The contact already went through this automation, and its re-entry policy is once."
COOLING_DOWN = "The contact entered this automation less than its cooldown ago."


def match_sql(matcher: str) -> str:
    """A boolean SQL expression: event `e` matches the matcher JSON in the expression `matcher`
    (a trigger's, a goal's or a wait's: tag and field by id, custom events by name and properties).
    Values are compared as SQLite's json_extract compares them, on both engines: `{v}` is
    dialect.automations_comparable's function, put in by _engine_sql."""
    m, v = matcher, "{v}"
    return f"""(CASE e.type
        WHEN 'TAG_ADDED' THEN json_extract(e.payload, '$.tag_id') = json_extract({m}, '$.tag_id')
        WHEN 'TAG_REMOVED' THEN json_extract(e.payload, '$.tag_id') = json_extract({m}, '$.tag_id')
        WHEN 'FIELD_UPDATED' THEN json_extract(e.payload, '$.field_id') = json_extract({m}, '$.field_id')
            AND (json_type({m}, '$.from') IS NULL OR {v}(e.payload, '$.old') IS {v}({m}, '$.from'))
            AND (json_type({m}, '$.to') IS NULL OR {v}(e.payload, '$.new') IS {v}({m}, '$.to'))
        WHEN 'CUSTOM_EVENT' THEN json_extract(e.payload, '$.event_name') = json_extract({m}, '$.name')
            AND NOT EXISTS (SELECT 1 FROM json_each({m}, '$.properties') p
                            WHERE {v}(e.payload, '$.properties.' || json_quote(p.key))
                                  IS NOT {v}({m}, '$.properties.' || json_quote(p.key)))
        ELSE TRUE END)"""


# The workspace's ACTIVE triggers, each read ONCE per batch (a materialized CTE): its version's
# re-entry policy, start and cooldown and its matcher's members as columns, so the per-event
# work is comparing columns, never parsing the version (which holds every step's HTML) or the
# matcher again for each event.
_TRIGGERS = """WITH t AS MATERIALIZED (
    SELECT tr.automation_id, tr.version_id, tr.event_type,
           json_extract(v.flow, '$.reentry') AS reentry, json_extract(v.flow, '$.start') AS start,
           json_extract(v.flow, '$.cooldown_seconds') AS cooldown,
           json_extract(tr.matcher, '$.tag_id') AS tag_id, json_extract(tr.matcher, '$.field_id') AS field_id,
           json_type(tr.matcher, '$.from') IS NOT NULL AS has_from, {v}(tr.matcher, '$.from') AS from_v,
           json_type(tr.matcher, '$.to') IS NOT NULL AS has_to, {v}(tr.matcher, '$.to') AS to_v,
           json_extract(tr.matcher, '$.name') AS name,
           CASE WHEN json_type(tr.matcher, '$.properties') = 'object'
                 AND json_extract(tr.matcher, '$.properties') != '{}' THEN tr.matcher END AS props
    FROM automation_triggers tr JOIN automation_versions v ON v.id = tr.version_id
    WHERE tr.workspace_id = :ws)
"""

# match_sql for the columns of _TRIGGERS' `t` (the same rules).
_MATCH_COLUMNS = """(CASE e.type
        WHEN 'TAG_ADDED' THEN json_extract(e.payload, '$.tag_id') = t.tag_id
        WHEN 'TAG_REMOVED' THEN json_extract(e.payload, '$.tag_id') = t.tag_id
        WHEN 'FIELD_UPDATED' THEN json_extract(e.payload, '$.field_id') = t.field_id
            AND (NOT t.has_from OR {v}(e.payload, '$.old') IS t.from_v)
            AND (NOT t.has_to OR {v}(e.payload, '$.new') IS t.to_v)
        WHEN 'CUSTOM_EVENT' THEN json_extract(e.payload, '$.event_name') = t.name
            AND (t.props IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(t.props, '$.properties') p
                 WHERE {v}(e.payload, '$.properties.' || json_quote(p.key))
                       IS NOT {v}(t.props, '$.properties.' || json_quote(p.key))))
        ELSE TRUE END)"""

_ENROLL = f"""
INSERT INTO automation_enrollments (automation_id, version_id, workspace_id, contact_id, entry_key, entry_event_id,
                                    status, step_id, seq, next_run_at, entered_at, updated_at)
{_TRIGGERS}
SELECT t.automation_id, t.version_id, :ws, e.contact_id,
       CASE t.reentry WHEN 'once' THEN 'once' ELSE 'event:' || min(e.id) END,
       min(e.id), 'active', t.start, 0, :now, :now, :now
FROM contact_events e
JOIN t ON t.event_type = e.type
JOIN contacts c ON c.id = e.contact_id
WHERE e.workspace_id = :ws AND e.id > :after AND e.id <= :upto AND {_MATCH_COLUMNS}
  AND NOT EXISTS (SELECT 1 FROM automation_enrollments x
                  WHERE x.contact_id = e.contact_id AND x.automation_id = t.automation_id
                    AND (x.status IN ('active', 'paused')
                         OR (t.reentry = 'cooldown'
                             AND x.entered_at > {{cooldown_start}})))
GROUP BY t.automation_id, t.version_id, t.reentry, t.start, e.contact_id
ON CONFLICT (automation_id, contact_id, entry_key) DO NOTHING
"""



def _engine_sql(conn: Any, sql: str) -> str:
    """A statement of this module in the engine's SQL: its `{v}` the function that compares values
    (dialect.automations_comparable), its `{cooldown_start}` a trigger's `cooldown` seconds before now."""
    return sql.replace("{v}", dialect.automations_comparable(conn)).replace(
        "{cooldown_start}", dialect.automations_seconds_before(conn, ":now", "t.cooldown"))


_GOAL_REACHED = f"""
    SELECT x.id FROM contact_events e
    JOIN automation_enrollments x ON x.contact_id = e.contact_id AND x.status IN ('active', 'paused')
    JOIN automation_versions v ON v.id = x.version_id
    WHERE e.workspace_id = :ws AND e.id > :after AND e.id <= :upto AND e.id > x.entry_event_id
      AND e.type = json_extract(v.flow, '$.goal.event_type') AND {match_sql("json_extract(v.flow, '$.goal')")}"""

# The step where each converting contact was gets a step run 'goal_reached' (its seq is the
# next one, not run yet), so the per-step statistics show where the goal took contacts out.
_GOAL_RUNS = f"""
INSERT INTO automation_step_runs (enrollment_id, seq, automation_id, version_id, step_id, outcome, ran_at)
SELECT x.id, x.seq, x.automation_id, x.version_id, x.step_id, 'goal_reached', :now FROM automation_enrollments x
WHERE x.id IN ({_GOAL_REACHED}) AND x.step_id IS NOT NULL
ON CONFLICT (enrollment_id, seq) DO NOTHING
"""

_GOALS = f"""
UPDATE automation_enrollments SET status = 'exited', exit_reason = 'goal', goal_reached_at = :now, step_id = NULL,
       seq = seq + 1, next_run_at = NULL, waiting = 0, updated_at = :now
WHERE id IN ({_GOAL_REACHED})
"""

_WAITS = f"""
UPDATE automation_enrollments SET waiting = 0, step_id = wait_next, next_run_at = :now, wait_event_type = NULL,
       wait_matcher = NULL, wait_from_event_id = NULL, wait_next = NULL, wait_timeout_next = NULL, updated_at = :now
WHERE id IN (
    SELECT x.id FROM contact_events e
    JOIN automation_enrollments x ON x.contact_id = e.contact_id AND x.wait_event_type = e.type AND x.waiting = 1
    WHERE e.workspace_id = :ws AND e.id > :after AND e.id <= :upto AND e.id > x.wait_from_event_id
      AND x.status IN ('active', 'paused') AND {match_sql('x.wait_matcher')})
"""


def read_events(conn: sqlite3.Connection, workspace_id: int, batch: int = EVENT_BATCH) -> dict[str, int]:
    """One batch of the workspace's log after its cursor: enrollments, goals and waits, and
    the cursor moved, in one transaction. {"events", "enrolled", "goals", "waits"}."""
    with transaction(conn):
        cursor = conn.execute("SELECT last_event_id FROM automation_cursors WHERE workspace_id = ?",
                              (workspace_id,)).fetchone()
        if cursor is None:
            return {"events": 0, "enrolled": 0, "goals": 0, "waits": 0}
        after = cursor[0]
        row = conn.execute("SELECT count(*), max(id) FROM (SELECT id FROM contact_events WHERE workspace_id = ?"
                           " AND id > ? ORDER BY id LIMIT ?) AS batch", (workspace_id, after, batch)).fetchone()
        if not row[0]:
            return {"events": 0, "enrolled": 0, "goals": 0, "waits": 0}
        return _read(conn, workspace_id, after, row[1], row[0])


def _read(conn: sqlite3.Connection, workspace_id: int, after: int, upto: int, events: int) -> dict[str, int]:
    """The events after `after` up to `upto` (the cursor's next ones), read, and the cursor moved to `upto`."""
    params = {"ws": workspace_id, "after": after, "upto": upto, "now": clock.now()}
    enrolled = conn.execute(_engine_sql(conn, _ENROLL), params).rowcount + _segment_changes(conn, params)
    conn.execute(_engine_sql(conn, _GOAL_RUNS), params)
    goals = conn.execute(_engine_sql(conn, _GOALS), params).rowcount
    waits = conn.execute(_engine_sql(conn, _WAITS), params).rowcount
    conn.execute("UPDATE automation_cursors SET last_event_id = ? WHERE workspace_id = ?", (upto, workspace_id))
    return {"events": events, "enrolled": enrolled, "goals": goals, "waits": waits}


def read_until(conn: sqlite3.Connection, workspace_id: int, event_id: int,
               batch: int = EVENT_BATCH) -> dict[str, int]:
    """The workspace's log read as `read_events` reads it, batch after batch, up to and
    including `event_id` (no further), inside the caller's transaction: how a change that
    appended events (a bulk tag) has the flows they trigger take their contacts in at once,
    by the very statements the cursor runs later for any other change. Nothing when the
    workspace has no cursor (no flow was ever published) or the cursor is already past it."""
    total = {"events": 0, "enrolled": 0, "goals": 0, "waits": 0}
    with transaction(conn):
        while True:
            cursor = conn.execute("SELECT last_event_id FROM automation_cursors WHERE workspace_id = ?",
                                  (workspace_id,)).fetchone()
            if cursor is None or cursor[0] >= event_id:
                return total
            row = conn.execute("SELECT count(*), max(id) FROM (SELECT id FROM contact_events WHERE workspace_id = ?"
                               " AND id > ? AND id <= ? ORDER BY id LIMIT ?) AS batch",
                               (workspace_id, cursor[0], event_id, batch)).fetchone()
            if not row[0]:
                return total
            for key, value in _read(conn, workspace_id, cursor[0], row[1], row[0]).items():
                total[key] += value


def _segment_changes(conn: sqlite3.Connection, p: dict[str, Any]) -> int:
    """Segment triggers, decided for the contacts with events in the batch by each segment's
    compiled filters (never by rebuilding the segment): entered = members now and not in the
    flow's state, left = in the state and members no more. The state moves with them."""
    from marketing_cli.services.contacts.segment_filters import member_query

    watched: dict[tuple[int, int], dict[str, Any]] = {}
    for t in conn.execute("SELECT t.automation_id, t.version_id, t.event_type, t.matcher, v.flow FROM automation_triggers t"
                          " JOIN automation_versions v ON v.id = t.version_id WHERE t.workspace_id = ?"
                          " AND t.event_type IN ('SEGMENT_ENTERED', 'SEGMENT_LEFT')", (p["ws"],)):
        key = (t["automation_id"], json.loads(t["matcher"])["segment_id"])
        entry = watched.setdefault(key, {"version_id": t["version_id"], "flow": json.loads(t["flow"]), "kinds": set()})
        entry["kinds"].add(t["event_type"])
    enrolled = 0
    for (automation_id, segment_id), entry in watched.items():
        row = conn.execute("SELECT filters FROM segments WHERE id = ?", (segment_id,)).fetchone()
        if row is None:
            continue  # deleted since publishing: nobody enters or leaves it
        try:
            query = member_query(conn, p["ws"], json.loads(row["filters"]))
        except MktError:  # a field or tag of its filters was deleted: it cannot be evaluated
            continue
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS mkt_segment_now (contact_id TEXT PRIMARY KEY)")
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS mkt_segment_moved (contact_id TEXT PRIMARY KEY, kind TEXT)")
        conn.execute("DELETE FROM temp.mkt_segment_now")
        conn.execute("DELETE FROM temp.mkt_segment_moved")
        conn.execute(f"INSERT INTO temp.mkt_segment_now SELECT id FROM ({query.sql} AND c.id IN (SELECT contact_id"
                     f" FROM contact_events WHERE workspace_id = ? AND id > ? AND id <= ?)) AS members",
                     [*query.params, p["ws"], p["after"], p["upto"]])
        state = "automation_id = ? AND segment_id = ?"
        conn.execute(f"INSERT INTO temp.mkt_segment_moved SELECT contact_id, 'SEGMENT_ENTERED' FROM temp.mkt_segment_now"
                     f" n WHERE NOT EXISTS (SELECT 1 FROM automation_segment_state s WHERE {state}"
                     f" AND s.contact_id = n.contact_id)", (automation_id, segment_id))
        conn.execute(f"INSERT INTO temp.mkt_segment_moved SELECT DISTINCT s.contact_id, 'SEGMENT_LEFT'"
                     f" FROM automation_segment_state s JOIN contact_events e ON e.contact_id = s.contact_id"
                     f" WHERE {state} AND e.workspace_id = ? AND e.id > ? AND e.id <= ?"
                     f" AND s.contact_id NOT IN (SELECT contact_id FROM temp.mkt_segment_now)",
                     (automation_id, segment_id, p["ws"], p["after"], p["upto"]))
        conn.execute("INSERT INTO automation_segment_state (automation_id, segment_id, contact_id) SELECT ?, ?,"
                     " contact_id FROM temp.mkt_segment_moved WHERE kind = 'SEGMENT_ENTERED'", (automation_id, segment_id))
        conn.execute(f"DELETE FROM automation_segment_state WHERE {state} AND contact_id IN (SELECT contact_id"
                     f" FROM temp.mkt_segment_moved WHERE kind = 'SEGMENT_LEFT')", (automation_id, segment_id))
        flow = entry["flow"]
        key = "'once'" if flow["reentry"] == "once" else f"'segment:{int(p['upto'])}'"
        enrolled += conn.execute(
            "INSERT INTO automation_enrollments (automation_id, version_id, workspace_id, contact_id, entry_key,"
            " entry_event_id, status, step_id, seq, next_run_at, entered_at, updated_at)"
            f" SELECT ?, ?, ?, m.contact_id, {key}, ?, 'active', ?, 0, ?, ?, ? FROM temp.mkt_segment_moved m"
            " WHERE m.kind IN (SELECT value FROM json_each(?)) AND NOT EXISTS (SELECT 1 FROM automation_enrollments x"
            " WHERE x.contact_id = m.contact_id AND x.automation_id = ? AND x.status IN ('active', 'paused'))"
            " ON CONFLICT (automation_id, contact_id, entry_key) DO NOTHING",
            (automation_id, entry["version_id"], p["ws"], p["upto"], flow["start"], p["now"], p["now"], p["now"],
             json.dumps(sorted(entry["kinds"])), automation_id)).rowcount
    return enrolled


def read_all_events(conn: sqlite3.Connection) -> dict[str, int]:
    """Every workspace's log up to its end, batch by batch."""
    total = {"events": 0, "enrolled": 0, "goals": 0, "waits": 0}
    for (workspace_id,) in conn.execute("SELECT workspace_id FROM automation_cursors ORDER BY workspace_id").fetchall():
        while True:
            try:
                done = read_events(conn, workspace_id)
            except Exception:  # noqa: BLE001 - one workspace's failure must not stop the others'
                log.exception("reading the event log of workspace %s failed; its cursor stays", workspace_id)
                break
            for key in total:
                total[key] += done[key]
            if done["events"] < EVENT_BATCH:
                break
    return total


# --- by hand -----------------------------------------------------------------------------

def enrollment_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "automation_id": row["automation_id"],
        "version": row["version"],
        "contact_id": row["contact_id"],
        "status": row["status"],
        "step_id": row["step_id"],
        "next_run_at": row["next_run_at"],
        "waiting_for_event": bool(row["waiting"]),
        "exit_reason": row["exit_reason"],
        "goal_reached_at": row["goal_reached_at"],
        "entered_at": row["entered_at"],
    }


_ENROLLMENT = ("SELECT x.*, v.version FROM automation_enrollments x JOIN automation_versions v ON v.id = x.version_id"
               " WHERE x.id = ?")


def _active_version(conn: sqlite3.Connection, row: sqlite3.Row) -> tuple[sqlite3.Row, dict[str, Any]]:
    if row["status"] != "ACTIVE":
        raise MktError(409, NOT_ACTIVE)
    version = version_row(conn, row["id"], row["current_version"])
    return version, json.loads(version["flow"])


def _newest_event(conn: sqlite3.Connection, workspace_id: int) -> int:
    return conn.execute("SELECT coalesce(max(id), 0) FROM contact_events WHERE workspace_id = ?",
                        (workspace_id,)).fetchone()[0]


def queue_run(conn: sqlite3.Connection) -> None:
    """Queue the automations pass now (in the caller's transaction), so a contact added by hand
    starts at once rather than at the scheduler's next tick."""
    from marketing_cli import jobs

    jobs.enqueue(conn, RUN_JOB, {}, dedupe_key=RUN_JOB)


def enroll_contact(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/automations/:id/enrollments {"contact_id", "entry_key"?}: a contact added by hand.

    `entry_key` (optional, for every_time and cooldown flows) makes a retried call idempotent:
    the same key enrolls once."""
    if not isinstance(body, dict):
        raise MktError(400, "The body must be a JSON object with 'contact_id'.")
    for key in body:
        if key not in ("contact_id", "entry_key"):
            raise MktError(400, f"Unknown member '{key}'")
    contact_id = parse_hex_id(body.get("contact_id"), "The contact ID you provided is not valid.")
    entry_key = body.get("entry_key")
    if entry_key is not None and (not isinstance(entry_key, str) or not 1 <= len(entry_key) <= 200):
        raise MktError(400, "The member 'entry_key' must be a string of 1 to 200 characters.")
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        version, flow = _active_version(conn, row)
        if not any(t["type"] == "manual" for t in flow["triggers"]):
            raise MktError(409, NO_MANUAL)
        if conn.execute("SELECT 1 FROM contacts WHERE id = ? AND workspace_id = ?",
                        (contact_id, workspace_id)).fetchone() is None:
            raise MktError(404, CONTACT_NOT_FOUND)
        last = conn.execute("SELECT status, entered_at FROM automation_enrollments WHERE automation_id = ?"
                            " AND contact_id = ? ORDER BY id DESC LIMIT 1", (row["id"], contact_id)).fetchone()
        if last is not None and last["status"] in ("active", "paused"):
            raise MktError(409, ALREADY_IN)
        if flow["reentry"] == "once":
            key = "once"
        else:
            key = f"manual:{entry_key or secrets.token_hex(8)}"
            if flow["reentry"] == "cooldown" and last is not None:
                since = clock.utcnow() - clock.parse_ts(last["entered_at"])
                if since.total_seconds() < flow["cooldown_seconds"]:
                    raise MktError(409, COOLING_DOWN)
        now = clock.now()
        enrollment_id = conn.execute(
            "INSERT INTO automation_enrollments (automation_id, version_id, workspace_id, contact_id, entry_key,"
            " entry_event_id, status, step_id, seq, next_run_at, entered_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, 'active', ?, 0, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
            (row["id"], version["id"], workspace_id, contact_id, key, _newest_event(conn, workspace_id), flow["start"],
             now, now, now)).fetchone()
        queue_run(conn)
        if enrollment_id is None:
            if key == "once":
                raise MktError(409, ONCE_ONLY)
            existing = conn.execute("SELECT id FROM automation_enrollments WHERE automation_id = ? AND contact_id = ?"
                                    " AND entry_key = ?", (row["id"], contact_id, key)).fetchone()
            return enrollment_view(conn.execute(_ENROLLMENT, (existing["id"],)).fetchone())
        return enrollment_view(conn.execute(_ENROLLMENT, (enrollment_id[0],)).fetchone())


def backfill(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/automations/:id/backfill {"segment_id"?, "dry_run"?}: enroll existing contacts
    (a segment's members, or every contact) who could enter now under the re-entry policy
    (with cooldown: not within the cooldown of their last entry). With dry_run only counts."""
    from marketing_cli.services.contacts.segment_filters import member_query
    from marketing_cli.services.contacts.segments import get_segment

    body = {} if body is None else body
    if not isinstance(body, dict):
        raise MktError(400, "The body must be a JSON object.")
    for key in body:
        if key not in ("segment_id", "dry_run"):
            raise MktError(400, f"Unknown member '{key}'")
    dry_run = False if body.get("dry_run") is None else body["dry_run"]  # null is left out
    if not isinstance(dry_run, bool):
        raise MktError(400, "The member 'dry_run' must be a boolean.")
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        version, flow = _active_version(conn, row)
        source, params = "SELECT c.id FROM contacts c WHERE c.workspace_id = ?", [workspace_id]
        if body.get("segment_id") is not None:
            segment = get_segment(conn, workspace_id, body["segment_id"])
            query = member_query(conn, workspace_id, segment["filters"])
            source, params = query.sql, list(query.params)
        # Who may enter: not in the flow now, never in it (once), or not since the cooldown began
        # (cooldown: as for an event or a contact added by hand).
        since = "" if flow["reentry"] != "cooldown" else clock.format_ts(
            clock.utcnow() - timedelta(seconds=flow["cooldown_seconds"]))
        eligible = (f"SELECT id FROM ({source}) m WHERE NOT EXISTS (SELECT 1 FROM automation_enrollments x"
                    f" WHERE x.automation_id = ? AND x.contact_id = m.id AND (x.status IN ('active', 'paused')"
                    f" OR x.entry_key = 'once' OR (? != '' AND x.entered_at > ?)))")
        params = [*params, row["id"], since, since]
        count = conn.execute(f"SELECT count(*) FROM ({eligible}) AS eligible", params).fetchone()[0]
        if dry_run:
            return {"automation_id": row["id"], "count": count, "enrolled": 0, "dry_run": True}
        now = clock.now()
        key = "'once'" if flow["reentry"] == "once" else "'backfill:' || ?"
        key_params = [] if flow["reentry"] == "once" else [now]
        enrolled = conn.execute(
            "INSERT INTO automation_enrollments (automation_id, version_id, workspace_id, contact_id, entry_key,"
            " entry_event_id, status, step_id, seq, next_run_at, entered_at, updated_at)"
            f" SELECT ?, ?, ?, id, {key}, ?, 'active', ?, 0, ?, ?, ? FROM ({eligible}) AS eligible WHERE true"
            " ON CONFLICT DO NOTHING",
            [row["id"], version["id"], workspace_id, *key_params, _newest_event(conn, workspace_id), flow["start"],
             now, now, now, *params]).rowcount
        queue_run(conn)
        return {"automation_id": row["id"], "count": count, "enrolled": enrolled, "dry_run": False}


def list_enrollments(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, *,
                     status: Any = None, limit: int = 100) -> list[dict[str, Any]]:
    """GET /v1/automations/:id/enrollments: the newest first."""
    row = automation_row(conn, workspace_id, automation_id)
    if status not in (None, "") and status not in ("active", "paused", "completed", "exited"):
        raise MktError(400, f"The status '{status}' is not valid. Valid statuses are: active, paused, completed,"
                            " exited.")
    where, params = "x.automation_id = ?", [row["id"]]
    if status:
        where += " AND x.status = ?"
        params.append(status)
    rows = conn.execute(f"SELECT x.*, v.version FROM automation_enrollments x JOIN automation_versions v"
                        f" ON v.id = x.version_id WHERE {where} ORDER BY x.id DESC LIMIT ?", (*params, limit))
    return [enrollment_view(r) for r in rows]


# --- anniversaries -------------------------------------------------------------------------

FIRST_YEAR = 1900


def anniversary_dates(today: str) -> list[str]:
    """The stored dates (YYYY-MM-DD) whose anniversary is `today`, from FIRST_YEAR on.

    29 February: in a year without one, its anniversary is 28 February (the last day of
    the month it belongs to; docs/automations.md).
    """
    year, month_day = int(today[:4]), today[5:]
    days = [month_day]
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if month_day == "02-28" and not leap:
        days.append("02-29")
    return [f"{y:04d}-{d}" for y in range(FIRST_YEAR, year + 1) for d in days]


def anniversaries(conn: sqlite3.Connection) -> int:
    """Enroll the contacts whose date field has its anniversary today (UTC), per trigger: one
    INSERT ... SELECT each, found through the field's expression index (an IN list of the
    day in every year). Entry key `anniversary:<year>` (or `once`): a second run the same
    day, or the same year, enrolls nobody again. How many were enrolled."""
    from marketing_cli.services.automations.format import ANNIVERSARY
    from marketing_cli.storage import field_sql

    now = clock.now()
    dates = json.dumps(anniversary_dates(now[:10]))
    enrolled = 0
    for t in conn.execute("SELECT t.automation_id, t.version_id, t.workspace_id, t.matcher, v.flow"
                          " FROM automation_triggers t JOIN automation_versions v ON v.id = t.version_id"
                          " WHERE t.event_type = ?", (ANNIVERSARY,)).fetchall():
        flow = json.loads(t["flow"])
        field_id = json.loads(t["matcher"])["field_id"]
        key = "'once'" if flow["reentry"] == "once" else f"'anniversary:{now[:4]}'"
        # The date field's value as its index `contacts_field_<id>` holds it (a DATE is text; on
        # PostgreSQL its first 256 characters, which hold a date whole: field_sql.key_expr).
        value = field_sql.key_expr(conn, field_id, "DATE", "c")
        with transaction(conn):
            enrolled += conn.execute(
                "INSERT INTO automation_enrollments (automation_id, version_id, workspace_id, contact_id, entry_key,"
                " entry_event_id, status, step_id, seq, next_run_at, entered_at, updated_at)"
                f" SELECT ?, ?, c.workspace_id, c.id, {key},"
                " (SELECT coalesce(max(id), 0) FROM contact_events WHERE workspace_id = c.workspace_id),"
                " 'active', ?, 0, ?, ?, ? FROM contacts c"
                f" WHERE c.workspace_id = ? AND {value} IN (SELECT value FROM json_each(?))"
                " AND NOT EXISTS (SELECT 1 FROM automation_enrollments x WHERE x.contact_id = c.id"
                " AND x.automation_id = ? AND x.status IN ('active', 'paused'))"
                " ON CONFLICT (automation_id, contact_id, entry_key) DO NOTHING",
                (t["automation_id"], t["version_id"], flow["start"], now, now, now, t["workspace_id"], dates,
                 t["automation_id"])).rowcount
    return enrolled

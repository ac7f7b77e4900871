"""Running one due step of one enrollment: one transaction, one step run, at most one message.

    BEGIN IMMEDIATE
      read the enrollment (still active, still due, its seq N)
      INSERT automation_step_runs (enrollment, N)      <- unique: a second runner stops here
      do the step: the email_messages row and its send job / the webhook outbox row /
                   the tag, the field / the split's answer
      move the enrollment on (seq N+1, the next step, when it is due)
    COMMIT

Two runners (the serve worker and a cron `mkt jobs run`, or a lease taken over) serialize
on the write lock; the second reads seq N+1 and never repeats step N. A crash before the
COMMIT leaves no trace: no step run and no message, so the step runs once when the
enrollment is claimed again. From the message row on, delivery is the sender's and follows
its crash rule (CONTRACT section 7). Every step is on the enrollment's own version, so a
newer version (a deleted step, a new email) never touches it. A batch's plain email steps
run together, in one transaction of the same rows (drain.py); `run_due` sends the rest here.

A step that cannot do its work for this contact (no address, not subscribed, a tag deleted
since publishing) is skipped, counted with its reason in the step run, and the contact goes
on: nothing is skipped silently. A send step over the workspace's frequency cap (caps.py) is
skipped or deferred as its `when_capped` says; a deferral is a step run too (outcome
`deferred`, with its reason), and the enrollment stays on the step, due when the cap allows.

The step types are a table (`EXECUTORS`, keyed by the step's type), so that anything that
plays a flow (the simulator) dispatches as the runner does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import drain
from marketing_cli.services.contacts import events, zone_columns
from marketing_cli.storage import field_sql
from marketing_cli.storage.db import transaction

log = logging.getLogger("mkt.automations")

CLAIM_BATCH = 500
RETRY_SECONDS = 300  # a step that failed (not a skip: an error) is tried again this much later
MAX_STEPS_AT_ONCE = 100  # steps one enrollment runs in a row before others get their turn


@dataclass
class Outcome:
    outcome: str
    next_step: str | None = None
    delay_seconds: int = 0
    detail: str | None = None
    email_message_id: int | None = None
    sms_message_id: int | None = None
    webhook_id: int | None = None
    due_at: str | None = None  # an absolute due time (wait_until, a deferral) instead of delay_seconds
    end: str | None = None  # 'completed' or 'exited'
    exit_reason: str | None = None
    goal: bool = False
    wait: dict[str, Any] | None = None


# --- due work ------------------------------------------------------------------------------

DUE_SQL = ("SELECT id FROM automation_enrollments WHERE status = 'active' AND next_run_at <= ?"
           " ORDER BY next_run_at LIMIT ?")


def due_enrollments(conn: sqlite3.Connection, limit: int = CLAIM_BATCH) -> list[int]:
    """Ids of active enrollments whose next step is due, oldest first (the partial index)."""
    return [r[0] for r in conn.execute(DUE_SQL, (clock.now(), limit))]


def next_due_at(conn: sqlite3.Connection) -> str | None:
    return conn.execute("SELECT min(next_run_at) FROM automation_enrollments WHERE status = 'active'").fetchone()[0]


# --- the steps -----------------------------------------------------------------------------

class Context:
    def __init__(self, conn: sqlite3.Connection, enrollment: sqlite3.Row, flow: dict[str, Any]) -> None:
        self.conn = conn
        self.x = enrollment
        self.flow = flow
        self.ws = enrollment["workspace_id"]
        self.contact_id = enrollment["contact_id"]

    def contact(self) -> sqlite3.Row:
        return self.conn.execute("SELECT * FROM contacts WHERE id = ?", (self.contact_id,)).fetchone()


def _send_email(ctx: Context, step: dict[str, Any]) -> Outcome:
    from marketing_cli.services.email.automated import queue_automated_message

    contact = ctx.contact()
    wanted = "UNCONFIRMED" if step.get("confirmation") else "SUBSCRIBED"
    if not contact["email"]:
        return Outcome("skipped", step.get("next"), detail="the contact has no email address")
    if contact["status"] != wanted:
        return Outcome("skipped", step.get("next"), detail=f"the contact is {contact['status']}, not {wanted}")
    exempt = bool(step.get("confirmation"))  # a double opt-in confirmation is never capped, nor counted
    capped = None if exempt else _capped(ctx, step, "email")
    if capped is not None:
        return capped
    conn = ctx.conn
    # The first round of this step's campaigns that has no message for this contact yet.
    found = conn.execute(
        "SELECT ac.campaign_id FROM automation_campaigns ac WHERE ac.version_id = ? AND ac.step_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM email_messages m WHERE m.campaign_id = ac.campaign_id AND m.contact_id = ?)"
        " ORDER BY ac.round LIMIT 1", (ctx.x["version_id"], step["id"], ctx.contact_id)).fetchone()
    campaign_id = found[0] if found is not None else drain.new_round_campaign(
        conn, ctx.ws, ctx.x["automation_id"], ctx.x["version_id"], ctx.flow, step)
    message_id = queue_automated_message(conn, campaign_id, ctx.contact_id, contact["email"])
    if not exempt:
        conn.execute("UPDATE email_messages SET capped = 1 WHERE id = ?", (message_id,))
    return Outcome("sent", step.get("next"), email_message_id=message_id)


WHEN_CAPPED_DEFAULT = "defer"


def _capped(ctx: Context, step: dict[str, Any], channel: str) -> Outcome | None:
    """None when the frequency cap lets the message go; else the skip or the deferral."""
    from marketing_cli.services.automations import caps

    until = caps.capped_until(ctx.conn, ctx.ws, ctx.contact_id, channel)
    if until is None:
        return None
    why = caps.reason(channel)
    if (step.get("when_capped") or WHEN_CAPPED_DEFAULT) == "skip":
        return Outcome("skipped", step.get("next"), detail=why)
    return Outcome("deferred", step["id"], due_at=until, detail=why)


def _send_sms(ctx: Context, step: dict[str, Any]) -> Outcome:
    from marketing_cli.services.automations.sms import queue_sms, unreachable

    contact = ctx.contact()
    why = unreachable(contact)
    if why is not None:  # before the cap: a contact who cannot get it is skipped, not deferred
        return Outcome("skipped", step.get("next"), detail=why)
    capped = _capped(ctx, step, "sms")
    if capped is not None:
        return capped
    message_id, why = queue_sms(ctx.conn, ctx.ws, ctx.x, ctx.flow, step, contact)
    if message_id is None:
        return Outcome("skipped", step.get("next"), detail=why)
    return Outcome("sent", step.get("next"), sms_message_id=message_id)


def _newest_event(ctx: Context) -> int:
    return ctx.conn.execute("SELECT coalesce(max(id), 0) FROM contact_events WHERE workspace_id = ?",
                            (ctx.ws,)).fetchone()[0]


def _wait(ctx: Context, step: dict[str, Any]) -> Outcome:
    return Outcome("waited", step.get("next"), delay_seconds=step["seconds"])


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def next_local_time(now: datetime, zone_name: str, hhmm: str, weekdays: list[str] | None) -> datetime:
    """The first instant strictly after `now` at which the clock in `zone_name` reads `hhmm`, on
    one of `weekdays` (local days; all days when None). A time in a DST gap moves forward by
    the gap, a repeated time is its first occurrence (kernel/localtime)."""
    from marketing_cli.kernel.localtime import local_date, local_instant

    allowed = {WEEKDAYS.index(d) for d in weekdays} if weekdays else set(range(7))
    day = local_date(now, zone_name)
    for offset in range(9):  # today and the next 8 days hold every weekday, and a gap's shift
        candidate_day = day + timedelta(days=offset)
        if candidate_day.weekday() not in allowed:
            continue
        moment = local_instant(candidate_day, hhmm, zone_name)
        if moment > now:
            return moment
    raise AssertionError("a weekday always comes within 8 days")  # pragma: no cover


def _wait_until(ctx: Context, step: dict[str, Any]) -> Outcome:
    from marketing_cli.services.contacts.zones import contact_zone

    now = clock.utcnow()
    zone_name, source = contact_zone(ctx.conn, ctx.ws, ctx.contact_id, now)
    due = next_local_time(now, zone_name, step["time"], step.get("weekdays"))
    return Outcome("waited", step.get("next"), due_at=clock.format_ts(due), detail=f"{zone_name} ({source})")


def _wait_for_event(ctx: Context, step: dict[str, Any]) -> Outcome:
    return Outcome("waiting", step["id"], delay_seconds=step["timeout_seconds"], wait={
        "event_type": step["event"]["event_type"], "matcher": json.dumps(step["event"], separators=(",", ":")),
        "from": _newest_event(ctx), "next": step.get("next"), "timeout_next": step.get("timeout_next")})


def _field_value(ctx: Context, field_id: int) -> Any:
    return field_value(ctx.conn, ctx.contact_id, field_id)


def field_value(conn: sqlite3.Connection, contact_id: str, field_id: int) -> Any:
    """The contact's value of the field as SQLite's json_extract reads it (a boolean as 1/0; None
    when it has none), read from the stored JSON here so both engines answer alike."""
    row = conn.execute("SELECT data FROM contacts WHERE id = ?", (contact_id,)).fetchone()
    value = json.loads(row[0] or "{}").get(str(int(field_id))) if row is not None else None
    return int(value) if isinstance(value, bool) else value


def _compare(operator: str, current: Any, wanted: Any) -> bool:
    if operator == "exists":
        return current is not None
    if operator == "not_exists":
        return current is None
    if operator == "equals":
        return current == wanted
    if operator == "not_equals":
        return current != wanted
    if operator == "contains":
        if isinstance(current, list):
            return wanted in current
        return isinstance(current, str) and str(wanted).lower() in current.lower()
    if current is None or wanted is None or isinstance(current, list):
        return False
    try:
        return current > wanted if operator == "greater_than" else current < wanted
    except TypeError:
        return False


def _split(ctx: Context, step: dict[str, Any]) -> Outcome:
    condition = step["condition"]
    kind = condition["kind"]
    detail = None
    if kind == "tag":
        answer = ctx.conn.execute("SELECT 1 FROM contact_tags WHERE contact_id = ? AND tag_id = ?",
                                  (ctx.contact_id, condition["tag_id"])).fetchone() is not None
    elif kind == "field":
        answer = _compare(condition["operator"], _field_value(ctx, condition["field_id"]), condition.get("value"))
    elif kind == "segment":
        answer, detail = _in_segment(ctx, condition["segment_id"])
    elif kind == "random":
        digest = hashlib.sha256(f"{ctx.x['id']}:{step['id']}".encode()).digest()
        answer = int.from_bytes(digest[:8], "big") % 100 < condition["percent"]
    else:
        row = ctx.conn.execute(
            "SELECT m.opened_at, m.clicked_at FROM automation_step_runs r JOIN email_messages m"
            " ON m.id = r.email_message_id WHERE r.enrollment_id = ? AND r.step_id = ? ORDER BY r.seq DESC LIMIT 1",
            (ctx.x["id"], condition["step"])).fetchone()
        column = "opened_at" if condition["activity"] == "opened" else "clicked_at"
        answer = row is not None and row[column] is not None
    return Outcome("yes" if answer else "no", step.get("yes" if answer else "no"), detail=detail)


def _in_segment(ctx: Context, segment_id: int) -> tuple[bool, str | None]:
    """The segment's compiled filters, asked about this one contact (no rebuild, no scan)."""
    from marketing_cli.services.contacts.segment_filters import member_query

    row = ctx.conn.execute("SELECT filters FROM segments WHERE id = ? AND workspace_id = ?",
                           (segment_id, ctx.ws)).fetchone()
    if row is None:
        return False, f"the segment {segment_id} was deleted"
    try:
        query = member_query(ctx.conn, ctx.ws, json.loads(row["filters"]))
    except MktError as exc:
        return False, f"the segment {segment_id} cannot be evaluated: {exc.message}"
    found = ctx.conn.execute(f"{query.sql} AND c.id = ?", [*query.params, ctx.contact_id]).fetchone()
    return found is not None, None


def _tag(ctx: Context, step: dict[str, Any]) -> Outcome:
    from marketing_cli.services.contacts import records

    change = records.add_contact_tags if step["type"] == "add_tag" else records.remove_contact_tags
    try:
        change(ctx.conn, ctx.ws, ctx.contact_id, {"tag_ids": [step["tag_id"]]})
    except MktError as exc:  # the tag was deleted since publishing
        return Outcome("skipped", step.get("next"), detail=exc.message)
    return Outcome("done", step.get("next"))


def _set_field(ctx: Context, step: dict[str, Any]) -> Outcome:
    row = ctx.conn.execute("SELECT merge_tag FROM fields WHERE id = ? AND workspace_id = ?",
                           (step["field_id"], ctx.ws)).fetchone()
    if row is None:
        return Outcome("skipped", step.get("next"), detail=f"the field '{step['field']}' was deleted")
    old, new = _field_value(ctx, step["field_id"]), step["value"]
    if old != new or type(old) is not type(new):
        kept = zone_columns.kept_after_field_set(row["merge_tag"], new)  # the contact's kept zone columns
        if new is None:
            data = field_sql.remove_value_expr(ctx.conn, step["field_id"])
            ctx.conn.execute(f"UPDATE contacts SET data = {data}, {kept[0]}, updated_at = ? WHERE id = ?",
                             (*kept[1], clock.now(), ctx.contact_id))
        else:
            data = field_sql.set_value_expr(ctx.conn, step["field_id"])
            ctx.conn.execute(f"UPDATE contacts SET data = {data}, {kept[0]}, updated_at = ? WHERE id = ?",
                             (json.dumps(new), *kept[1], clock.now(), ctx.contact_id))
        events.append_event(ctx.conn, ctx.ws, ctx.contact_id, "FIELD_UPDATED",
                            {"field_id": step["field_id"], "merge_tag": row["merge_tag"], "old": old, "new": new})
    return Outcome("done", step.get("next"))


def _webhook(ctx: Context, step: dict[str, Any]) -> Outcome:
    from marketing_cli.services.automations.webhooks import queue_webhook

    webhook_id = queue_webhook(ctx.conn, ctx.x, ctx.flow, step)
    return Outcome("queued", step.get("next"), webhook_id=webhook_id)


def _goal(ctx: Context, step: dict[str, Any]) -> Outcome:
    return Outcome("goal", None, end="exited", exit_reason="goal", goal=True)


def _exit(ctx: Context, step: dict[str, Any]) -> Outcome:
    return Outcome("exit", None, end="exited", exit_reason="exit step")


EXECUTORS = {"send_email": _send_email, "send_sms": _send_sms, "wait": _wait, "wait_until": _wait_until, "wait_for_event": _wait_for_event, "split": _split,
             "add_tag": _tag, "remove_tag": _tag, "set_field": _set_field, "webhook": _webhook, "goal": _goal,
             "exit": _exit}


# --- one step ------------------------------------------------------------------------------

_ENROLLMENT = ("SELECT x.*, v.flow FROM automation_enrollments x JOIN automation_versions v ON v.id = x.version_id"
               " WHERE x.id = ?")


def _move(conn: sqlite3.Connection, x: sqlite3.Row, result: Outcome, now: str) -> None:
    if result.end is None and result.next_step is None and result.wait is None:
        result.end = "completed"
    if result.end is not None:
        conn.execute("UPDATE automation_enrollments SET seq = seq + 1, status = ?, step_id = NULL, next_run_at = NULL,"
                     " waiting = 0, exit_reason = ?, goal_reached_at = ?, updated_at = ? WHERE id = ?",
                     (result.end, result.exit_reason or result.end, now if result.goal else None, now, x["id"]))
        return
    due = result.due_at or (clock.format_ts(clock.utcnow() + timedelta(seconds=result.delay_seconds))
                            if result.delay_seconds else now)
    wait = result.wait or {}
    conn.execute("UPDATE automation_enrollments SET seq = seq + 1, step_id = ?, next_run_at = ?, waiting = ?,"
                 " wait_event_type = ?, wait_matcher = ?, wait_from_event_id = ?, wait_next = ?,"
                 " wait_timeout_next = ?, updated_at = ? WHERE id = ?",
                 (result.next_step, due, 1 if wait else 0, wait.get("event_type"), wait.get("matcher"),
                  wait.get("from"), wait.get("next"), wait.get("timeout_next"), now, x["id"]))


def run_step(conn: sqlite3.Connection, enrollment_id: int) -> bool:
    """Run the enrollment's due step (or end its wait on timeout); True when another step is due now."""
    with transaction(conn):
        x = conn.execute(_ENROLLMENT, (enrollment_id,)).fetchone()
        now = clock.now()
        if x is None or x["status"] != "active" or x["next_run_at"] is None or x["next_run_at"] > now:
            return False
        flow = json.loads(x["flow"])
        steps = {s["id"]: s for s in flow["steps"]}
        if x["waiting"]:  # a wait for an event timed out: the timeout branch
            step_id, result = x["step_id"], Outcome("timeout", x["wait_timeout_next"])
        elif x["step_id"] is None:
            step_id, result = None, Outcome("completed")
        else:
            step_id = x["step_id"]
            result = None
        if step_id is None:
            _move(conn, x, result, now)
            return False
        inserted = conn.execute(
            "INSERT INTO automation_step_runs (enrollment_id, seq, automation_id, version_id, step_id, outcome,"
            " ran_at) VALUES (?, ?, ?, ?, ?, 'running', ?) ON CONFLICT DO NOTHING",
            (x["id"], x["seq"], x["automation_id"], x["version_id"], step_id, now)).rowcount
        if not inserted:  # this step already ran (its enrollment row was read before a COMMIT elsewhere)
            return False
        if result is None:
            step = steps[step_id]
            result = EXECUTORS[step["type"]](Context(conn, x, flow), step)
        conn.execute("UPDATE automation_step_runs SET outcome = ?, detail = ?, email_message_id = ?,"
                     " sms_message_id = ?, webhook_id = ? WHERE enrollment_id = ? AND seq = ?",
                     (result.outcome, result.detail, result.email_message_id, result.sms_message_id,
                      result.webhook_id, x["id"], x["seq"]))
        _move(conn, x, result, now)
        return result.end is None and result.wait is None and result.delay_seconds == 0 and \
            result.due_at is None and result.next_step is not None


def run_enrollment(conn: sqlite3.Connection, enrollment_id: int) -> int:
    """Run the enrollment's steps while they are due now (one transaction each); how many ran."""
    ran = 0
    while ran < MAX_STEPS_AT_ONCE:
        ran += 1
        if not run_step(conn, enrollment_id):
            break
    return ran


def run_due(conn: sqlite3.Connection, limit: int = CLAIM_BATCH) -> int:
    """One bounded batch of due enrollments; how many were due.

    The batch's plain email steps run together in one transaction (drain.py); the rest one
    enrollment at a time. An enrollment whose step fails (its transaction rolled back:
    nothing of the step was written) is put back RETRY_SECONDS later and logged, so one
    broken contact never holds up the others at the head of the due index. When the batch's
    transaction fails, every enrollment of it runs alone (nothing of the batch was written)."""
    due = due_enrollments(conn, limit)
    try:
        rest = drain.run_batch(conn, due)
    except Exception:  # noqa: BLE001 - rolled back: each enrollment is tried alone below
        log.warning("automation batch of %d enrollments failed; running them one by one", len(due), exc_info=True)
        rest = due
    for enrollment_id in rest:
        try:
            run_enrollment(conn, enrollment_id)
        except Exception:  # noqa: BLE001 - this enrollment only; the error is logged
            log.exception("automation enrollment %s failed; tried again in %d s", enrollment_id, RETRY_SECONDS)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            with transaction(conn):
                conn.execute("UPDATE automation_enrollments SET next_run_at = ?, updated_at = ? WHERE id = ?"
                             " AND status = 'active'",
                             (clock.format_ts(clock.utcnow() + timedelta(seconds=RETRY_SECONDS)), clock.now(),
                              enrollment_id))
    jobs.heartbeat(conn)
    return len(due)

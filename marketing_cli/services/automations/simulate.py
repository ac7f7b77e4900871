"""See before you send: a flow walked for one contact on a simulated clock, writing nothing.

`simulate(conn, ws, automation_id, {"contact_id", "events"?, "until"?})` takes the flow's
newest published version (the draft, checked as publishing would, when none is published
yet) and walks it for the contact from now, step by step, without the runner: each step
the contact would take is listed with its UTC time and its local time in the contact's
zone (the resolver of local-time campaigns: the `timezone` field, the phone number's
zone, the located zone, the workspace's zone; services/contacts/zones.py).

- Waits move the simulated clock. A wait for an event ends at the first matching event of
  the given events (a JSON list of {"name" or "type", "properties", "at", ...}) after the
  wait began, else at its timeout through `timeout_next`. A matching event for the flow's
  goal takes the contact out at that time, counted as a conversion.
- Splits are answered on the contact's current data, with the tags and fields the
  simulated steps before them set; a segment split asks the segment's compiled filters
  about the contact as stored; an email activity split is "no" unless the events say the
  message was opened or clicked ({"type": "email_opened", "step": "hello", "at": ...}).
- Sends are checked as the real step checks them (an address, the status) and against the
  frequency caps (capped: skipped or deferred, as the step says). SMS steps are priced and
  held by quiet hours: the hold lasts until the window opens for the contact's number.
- Steps are simulated by a table keyed by step type (SIMULATORS); a type without an entry
  is listed as not simulated and the walk follows its `next`.

Nothing is sent or written: the walk runs with `PRAGMA query_only` on, so a write by
mistake is an error, never a change.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.services.automations import caps
from marketing_cli.services.automations.flows import automation_row, version_row
from marketing_cli.services.automations.format import TRIGGER_EVENTS, check_document
from marketing_cli.services.automations.steps import WHEN_CAPPED_DEFAULT, field_value
from marketing_cli.storage.db import transaction

MAX_SIMULATED_STEPS = 500
DEFAULT_DAYS = 366
MAX_EVENTS = 1_000
CONTACT_NOT_FOUND = "We couldn't find a contact with that ID."
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
EVENT_TYPES = (*TRIGGER_EVENTS, "email_opened", "email_clicked")
EVENT_MEMBERS = ("name", "type", "properties", "at", "tag", "field", "from", "to", "step")


# --- the flow and the inputs ------------------------------------------------------------------

def flow_for(conn: sqlite3.Connection, workspace_id: int, row: sqlite3.Row) -> tuple[dict[str, Any], int | None]:
    """(the resolved flow, its version): the newest published version, else the draft checked
    and resolved as publishing would (read only: nothing is stored)."""
    from marketing_cli.services.automations import validate

    if row["current_version"]:
        return json.loads(version_row(conn, row["id"], row["current_version"])["flow"]), row["current_version"]
    return validate.resolve(conn, workspace_id, check_document(json.loads(row["draft"]))), None


def _instant(value: Any, member: str, *, end_of_day: bool = False) -> datetime:
    """RFC 3339 UTC, or a date (YYYY-MM-DD: its start, or its end with `end_of_day`)."""
    if isinstance(value, str):
        try:
            return clock.parse_ts(value)
        except ValueError:
            pass
        try:
            day = date.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            moment = datetime.combine(day, time(), UTC)
            return moment + timedelta(days=1, microseconds=-1000) if end_of_day else moment
    raise MktError(400, f"The member '{member}' must be a date (YYYY-MM-DD) or an RFC 3339 time such as "
                        "2026-01-31T09:00:00Z.")


@dataclass
class Event:
    kind: str                 # a trigger type (custom_event, tag_added, ...), email_opened, email_clicked
    at: datetime
    raw: dict[str, Any]


def read_events(value: Any) -> list[Event]:
    """The events file: a JSON list of {"name" (a custom event) or "type", "properties"?, "at", ...}."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise MktError(400, "The member 'events' must be a JSON array of events ({\"name\", \"properties\", \"at\"}).")
    if len(value) > MAX_EVENTS:
        raise MktError(400, f"The member 'events' can hold at most {MAX_EVENTS} events.")
    out = []
    for i, item in enumerate(value):
        where = f"events[{i}]"
        if not isinstance(item, dict):
            raise MktError(400, f"The member '{where}' must be an object.")
        for key in item:
            if key not in EVENT_MEMBERS:
                raise MktError(400, f"Unknown member '{where}.{key}'")
        kind = item.get("type", "custom_event" if "name" in item else None)
        if kind not in EVENT_TYPES:
            raise MktError(400, f"The member '{where}.type' must be one of: {', '.join(EVENT_TYPES)} (or give"
                                " 'name' for a custom event).")
        if kind == "custom_event" and not isinstance(item.get("name"), str):
            raise MktError(400, f"The member '{where}.name' is required for a custom event (a string).")
        if item.get("properties") is not None and not isinstance(item["properties"], dict):
            raise MktError(400, f"The member '{where}.properties' must be an object.")
        if "at" not in item:
            raise MktError(400, f"The member '{where}.at' is required (when the event happens).")
        out.append(Event(kind, _instant(item["at"], f"{where}.at"), item))
    return sorted(out, key=lambda e: e.at)


def event_matches(event: Event, condition: dict[str, Any]) -> bool:
    """Does a given event match a trigger, goal or wait condition (as the runner's SQL matches
    the log: tags and fields by name here, custom events by name and properties)?"""
    if event.kind != condition.get("type"):
        return False
    e, c = event.raw, condition
    if event.kind in ("tag_added", "tag_removed"):
        return e.get("tag") == c.get("tag")
    if event.kind == "field_updated":
        return e.get("field") == c.get("field") and ("from" not in c or e.get("from") == c["from"]) and \
            ("to" not in c or e.get("to") == c["to"])
    if event.kind == "custom_event":
        props = e.get("properties") or {}
        return e.get("name") == c.get("name") and all(props.get(k) == v for k, v in (c.get("properties") or {}).items())
    return True


# --- the contact and its zone --------------------------------------------------------------------

def contact_zone(conn: sqlite3.Connection, workspace_id: int, contact: sqlite3.Row, at: datetime) -> tuple[str, str]:
    """(zone, source) of one contact at `at`, in the order of zones.Zones (field, phone,
    location, workspace), for one contact in Python rather than over an audience in SQL."""
    from marketing_cli.kernel.localtime import canonical_zone
    from marketing_cli.services.account.workspaces import workspace_timezone
    from marketing_cli.services.contacts.phone_zones import phone_zone
    from marketing_cli.services.contacts.values import TIMEZONE_TAG

    row = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = ?",
                       (workspace_id, TIMEZONE_TAG)).fetchone()
    if row is not None:
        value = json.loads(contact["data"] or "{}").get(str(row[0]))
        if isinstance(value, str) and canonical_zone(value):
            return value, "field"
    if contact["phone"]:
        found = phone_zone(contact["phone"], at)
        if found:
            return found, "phone"
    if contact["located_timezone"]:
        return contact["located_timezone"], "location"
    return workspace_timezone(conn, workspace_id), "workspace"


# --- the walk ------------------------------------------------------------------------------------

@dataclass
class Walk:
    conn: sqlite3.Connection
    ws: int
    flow: dict[str, Any]
    contact: sqlite3.Row
    zone: str
    events: list[Event]
    now: datetime
    until: datetime
    tags: dict[int, bool] = field(default_factory=dict)      # tag id -> has it (set by simulated steps)
    fields: dict[int, Any] = field(default_factory=dict)     # field id -> value (set by simulated steps)
    sent: dict[str, list[datetime]] = field(default_factory=dict)  # channel -> simulated send times
    sent_steps: dict[str, datetime] = field(default_factory=dict)  # send step id -> when it was sent
    timeline: list[dict[str, Any]] = field(default_factory=list)
    cost_units: int = 0

    def local(self, moment: datetime) -> str:
        from zoneinfo import ZoneInfo

        return moment.astimezone(ZoneInfo(self.zone)).isoformat(timespec="seconds")

    def add(self, at: datetime, step: dict[str, Any] | None, outcome: str, detail: str | None = None,
            **extra: Any) -> None:
        self.timeline.append({"at": clock.format_ts(at), "local": self.local(at),
                              "step_id": step["id"] if step else None, "type": step["type"] if step else None,
                              "outcome": outcome, "detail": detail, **extra})

    def cut(self, moment: datetime) -> None:
        """Forget what the last step would do after `moment` (a goal came first, or the end)."""
        stamp = clock.format_ts(moment)
        self.timeline = [item for item in self.timeline if item["at"] <= stamp]

    def goal_between(self, start: datetime, end: datetime) -> Event | None:
        goal = self.flow.get("goal")
        if goal is None:
            return None
        return next((e for e in self.events if start < e.at <= end and event_matches(e, goal)), None)


@dataclass
class Step:
    """What a simulated step did: the next step, when (None: now), or the end."""

    next_step: str | None
    at: datetime | None = None
    end: str | None = None          # 'completed' or 'exited'
    reason: str | None = None


def _field_value(w: Walk, field_id: int) -> Any:
    if field_id in w.fields:
        return w.fields[field_id]
    return field_value(w.conn, w.contact["id"], field_id)


def _has_tag(w: Walk, tag_id: int) -> bool:
    if tag_id in w.tags:
        return w.tags[tag_id]
    return w.conn.execute("SELECT 1 FROM contact_tags WHERE contact_id = ? AND tag_id = ?",
                          (w.contact["id"], tag_id)).fetchone() is not None


# --- frequency caps -----------------------------------------------------------------------------------

def _sent_before(w: Walk, channel: str, since: datetime) -> int:
    """Messages of the channel the contact got since `since`: stored ones and simulated ones."""
    stored = 0
    if since < w.now:  # the flows' counted messages (capped = 1), as caps.capped_until reads them
        stored = len(caps.counted_since(w.conn, w.contact["id"], channel, clock.format_ts(since)))
    return stored + sum(1 for t in w.sent.get(channel, []) if t > since)


def _capped(w: Walk, step: dict[str, Any], channel: str, at: datetime) -> tuple[datetime, str] | None:
    """None when the message may go at `at`; else (when a slot frees, the cap's text)."""
    if step.get("confirmation"):  # messages a contact must get are exempt
        return None
    for limit, seconds in caps.caps_for(w.conn, w.ws, channel):
        window = timedelta(seconds=seconds)
        if _sent_before(w, channel, at - window) >= limit:
            simulated = sorted(t for t in w.sent.get(channel, []) if t > at - window)
            frees = (simulated[-limit] + window) if len(simulated) >= limit else at + window
            return frees, f"frequency cap: {limit} {channel} message(s) per {seconds} s"
    return None


def _send_gate(w: Walk, step: dict[str, Any], channel: str, at: datetime) -> tuple[datetime | None, Step | None]:
    """Apply the cap: (when the message goes, None) or (None, the step's result when skipped)."""
    capped = _capped(w, step, channel, at)
    if capped is None:
        return at, None
    frees, text = capped
    if (step.get("when_capped") or WHEN_CAPPED_DEFAULT) == "defer":
        w.add(at, step, "deferred", f"{text}: deferred to {clock.format_ts(frees)}", until=clock.format_ts(frees))
        return frees, None
    w.add(at, step, "skipped", text)
    return None, Step(step.get("next"))


# --- the step simulators -----------------------------------------------------------------------------

def _send_email(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    from marketing_cli.services.contacts.merge_tags import Renderer
    from marketing_cli.services.delivery.message import CompiledEmail

    wanted = "UNCONFIRMED" if step.get("confirmation") else "SUBSCRIBED"
    if not w.contact["email"]:
        w.add(at, step, "skipped", "the contact has no email address")
        return Step(step.get("next"))
    if w.contact["status"] != wanted:
        w.add(at, step, "skipped", f"the contact is {w.contact['status']}, not {wanted}")
        return Step(step.get("next"))
    when, skipped = _send_gate(w, step, "email", at)
    if skipped is not None:
        return skipped
    subject, _, _ = CompiledEmail(step["subject"], step.get("body_html") or step.get("html") or "").render(
        Renderer(w.conn, w.ws, preview_text=step.get("preview_text") or "").values_for(w.contact))
    w.sent.setdefault("email", []).append(when)
    w.sent_steps[step["id"]] = when
    w.add(when, step, "would send", f"email to {w.contact['email']}", channel="email", subject=subject)
    return Step(step.get("next"), when)


def sms_body(conn: sqlite3.Connection, workspace_id: int, step: dict[str, Any], contact: Any) -> str:
    from marketing_cli.services.sms.render import Renderer

    return Renderer(conn, workspace_id, step.get("body") or step.get("message") or "").render(
        contact["email"], contact["phone"], contact["data"])


def _send_sms(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    """{"type": "send_sms", "body": "..."}: priced as a campaign message, held by quiet hours."""
    from marketing_cli.services.sms import gate, places, quiet_hours
    from marketing_cli.services.sms.pricing import country_of, price_units
    from marketing_cli.services.sms.segments import count_segments

    if not w.contact["phone"]:
        w.add(at, step, "skipped", "the contact has no phone number")
        return Step(step.get("next"))
    if w.contact["status"] != "SUBSCRIBED":
        w.add(at, step, "skipped", f"the contact is {w.contact['status']}, not SUBSCRIBED")
        return Step(step.get("next"))
    try:
        body = sms_body(w.conn, w.ws, step, w.contact)
    except MktError as exc:
        w.add(at, step, "skipped", exc.message)
        return Step(step.get("next"))
    when, skipped = _send_gate(w, step, "sms", at)
    if skipped is not None:
        return skipped
    if gate.enabled(w.conn, w.ws):
        verdict = quiet_hours.verdict(places.place_of(w.contact["phone"]), when)
        if not verdict.open:
            w.add(when, step, "held", verdict.reason, until=clock.format_ts(verdict.until))
            when = verdict.until
    segments = count_segments(body).segments
    country = country_of(w.contact["phone"])
    units = price_units(w.conn, w.ws).get(country or "")
    price = None
    if units is not None:
        w.cost_units += units * segments
        price = str(Decimal(units * segments).scaleb(-5))
    w.sent.setdefault("sms", []).append(when)
    w.sent_steps[step["id"]] = when
    w.add(when, step, "would send", f"SMS to {w.contact['phone']}", channel="sms", body=body, segments=segments,
          country=country, price=price)
    return Step(step.get("next"), when)


def _wait(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    due = at + timedelta(seconds=step["seconds"])
    w.add(at, step, "wait", f"until {clock.format_ts(due)}", until=clock.format_ts(due))
    return Step(step.get("next"), due)


def next_local_time(at: datetime, zone_name: str, hhmm: str, weekdays: list[str] | None) -> datetime:
    """The first instant at or after `at` when the clock in the zone reads `hhmm` on one of the weekdays."""
    from marketing_cli.kernel.localtime import local_date, local_instant

    allowed = {WEEKDAYS.index(d[:3].lower()) for d in weekdays or WEEKDAYS if d[:3].lower() in WEEKDAYS}
    day = local_date(at, zone_name)
    for offset in range(0, 15):
        candidate_day = day + timedelta(days=offset)
        if allowed and candidate_day.weekday() not in allowed:
            continue
        candidate = local_instant(candidate_day, hhmm, zone_name)
        if candidate >= at:
            return candidate
    return at


def _wait_until(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    """{"type": "wait_until", "time": "09:00", "weekdays": ["mon", ...]} in the contact's zone."""
    from marketing_cli.kernel.localtime import parse_local_time

    try:
        hhmm = parse_local_time(step.get("time"))
    except ValueError as exc:
        w.add(at, step, "not simulated", str(exc))
        return Step(step.get("next"))
    due = next_local_time(at, w.zone, hhmm, step.get("weekdays"))
    w.add(at, step, "wait", f"until {hhmm} ({', '.join(step.get('weekdays') or ['every day'])}) in {w.zone}",
          until=clock.format_ts(due))
    return Step(step.get("next"), due)


def _wait_for_event(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    timeout = at + timedelta(seconds=step["timeout_seconds"])
    found = next((e for e in w.events if at < e.at <= timeout and event_matches(e, step["event"])), None)
    if found is not None:
        w.add(at, step, "waiting", f"for {step['event']['type']}: it happens at {clock.format_ts(found.at)}",
              until=clock.format_ts(found.at))
        w.add(found.at, step, "event", "the event happened: on through 'next'")
        return Step(step.get("next"), found.at)
    w.add(at, step, "waiting", f"for {step['event']['type']} until the timeout at {clock.format_ts(timeout)}",
          until=clock.format_ts(timeout))
    w.add(timeout, step, "timeout", "no matching event: on through 'timeout_next'")
    return Step(step.get("timeout_next"), timeout)


def _split(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    from marketing_cli.services.automations.steps import _compare

    condition = step["condition"]
    kind = condition["kind"]
    detail = None
    if kind == "tag":
        answer = _has_tag(w, condition["tag_id"])
        detail = f"tag '{condition['tag']}'"
    elif kind == "field":
        current = _field_value(w, condition["field_id"])
        answer = _compare(condition["operator"], current, condition.get("value"))
        detail = f"{condition['field']} is {json.dumps(current)}"
    elif kind == "segment":
        answer, detail = _in_segment(w, condition["segment_id"])
    elif kind == "random":
        digest = hashlib.sha256(f"{w.contact['id']}:{step['id']}".encode()).digest()
        answer = int.from_bytes(digest[:8], "big") % 100 < condition["percent"]
        detail = f"random {condition['percent']}% yes (the real answer depends on the enrollment)"
    else:
        sent = w.sent_steps.get(condition["step"])
        wanted = "email_opened" if condition["activity"] == "opened" else "email_clicked"
        answer = sent is not None and any(e.kind == wanted and e.raw.get("step") == condition["step"]
                                          and sent <= e.at <= at for e in w.events)
        detail = f"{condition['activity']} '{condition['step']}'" + ("" if answer else ": no such event given")
    w.add(at, step, "yes" if answer else "no", detail)
    return Step(step.get("yes" if answer else "no"))


def _in_segment(w: Walk, segment_id: int) -> tuple[bool, str]:
    from marketing_cli.services.contacts.segment_filters import member_query

    row = w.conn.execute("SELECT filters FROM segments WHERE id = ? AND workspace_id = ?",
                         (segment_id, w.ws)).fetchone()
    if row is None:
        return False, f"the segment {segment_id} was deleted"
    try:
        query = member_query(w.conn, w.ws, json.loads(row["filters"]))
    except MktError as exc:
        return False, f"the segment {segment_id} cannot be evaluated: {exc.message}"
    found = w.conn.execute(f"{query.sql} AND c.id = ?", [*query.params, w.contact["id"]]).fetchone()
    return found is not None, f"segment {segment_id} (the contact as stored now)"


def _tag(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    w.tags[step["tag_id"]] = step["type"] == "add_tag"
    w.add(at, step, "would " + ("add" if step["type"] == "add_tag" else "remove") + " the tag", step["tag"])
    return Step(step.get("next"))


def _set_field(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    w.fields[step["field_id"]] = step["value"]
    w.add(at, step, "would set the field", f"{step['field']} = {json.dumps(step['value'])}")
    return Step(step.get("next"))


def _webhook(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    w.add(at, step, "would call", step["url"])
    return Step(step.get("next"))


def _goal(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    w.add(at, step, "goal", "the contact exits, counted as a conversion")
    return Step(None, end="exited", reason="goal")


def _exit(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    w.add(at, step, "exit", "the contact exits")
    return Step(None, end="exited", reason="exit step")


Simulator = Callable[[Walk, dict[str, Any], datetime], Step]
SIMULATORS: dict[str, Simulator] = {
    "send_email": _send_email, "send_sms": _send_sms, "wait": _wait, "wait_until": _wait_until,
    "wait_for_event": _wait_for_event, "split": _split, "add_tag": _tag, "remove_tag": _tag,
    "set_field": _set_field, "webhook": _webhook, "goal": _goal, "exit": _exit,
}


def _fallback(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    """A step type the simulator does not know: listed, and the walk follows its `next`."""
    w.add(at, step, "not simulated", f"the simulator does not know the step type '{step['type']}'")
    return Step(step.get("next"))


# --- the service ------------------------------------------------------------------------------------

def _check_body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise MktError(400, "The body must be a JSON object with 'contact_id'.")
    for key in body:
        if key not in ("contact_id", "events", "until"):
            raise MktError(400, f"Unknown member '{key}'")
    return body


def simulate(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/automations/:id/simulate {"contact_id", "events"?, "until"?}: the steps the contact
    would take, each with its UTC and local time. Sends nothing and writes nothing."""
    body = _check_body(body)
    contact_id = parse_hex_id(body.get("contact_id"), "The contact ID you provided is not valid.")
    events = read_events(body.get("events"))
    now = clock.utcnow()
    until = _instant(body["until"], "until", end_of_day=True) if body.get("until") is not None \
        else now + timedelta(days=DEFAULT_DAYS)
    if until <= now:
        raise MktError(400, "The member 'until' must be in the future.")
    was_query_only = conn.execute("PRAGMA query_only").fetchone()[0]
    conn.execute("PRAGMA query_only = ON")
    try:
        row = automation_row(conn, workspace_id, automation_id)
        contact = conn.execute("SELECT * FROM contacts WHERE id = ? AND workspace_id = ?",
                               (contact_id, workspace_id)).fetchone()
        if contact is None:
            raise MktError(404, CONTACT_NOT_FOUND)
        flow, version = flow_for(conn, workspace_id, row)
        zone, source = contact_zone(conn, workspace_id, contact, now)
        w = Walk(conn, workspace_id, flow, contact, zone, events, now, until)
        end, reason = _walk(w)
    finally:
        if not was_query_only:
            conn.execute("PRAGMA query_only = OFF")
    counts: dict[str, int] = {}
    for item in w.timeline:
        if item["outcome"] == "would send":
            counts[item["channel"]] = counts.get(item["channel"], 0) + 1
    return {"automation_id": row["id"], "version": version, "contact_id": contact["id"], "zone": zone,
            "zone_source": source, "started_at": clock.format_ts(now), "until": clock.format_ts(until),
            "steps": w.timeline, "end": end, "exit_reason": reason, "messages": counts,
            "sms_cost": str(Decimal(w.cost_units).scaleb(-5)) if w.cost_units else None}


def _walk(w: Walk) -> tuple[str, str | None]:
    """Walk from the start; ('completed' | 'exited' | 'in flow at the end' ..., the exit reason)."""
    steps = {s["id"]: s for s in w.flow["steps"]}
    at = w.now
    w.add(at, None, "entered", f"version of {len(steps)} step(s), starting at '{w.flow['start']}'")
    current: str | None = w.flow["start"]
    for _ in range(MAX_SIMULATED_STEPS):
        if current is None:
            w.add(at, None, "completed", "no next step: the contact has completed the flow")
            return "completed", None
        step = steps[current]
        result = SIMULATORS.get(step["type"], _fallback)(w, step, at)
        later = result.at if result.at is not None else at
        goal = w.goal_between(at, min(later, w.until))
        if goal is not None:
            w.cut(goal.at)
            w.add(goal.at, None, "goal", "a goal event: the contact exits, counted as a conversion")
            return "exited", "goal"
        if later > w.until:
            w.cut(w.until)
            w.add(w.until, None, "simulation ends", f"still in the flow, next at '{result.next_step}' on "
                                                    f"{clock.format_ts(later)}")
            return "in flow", None
        at = later
        if result.end is not None:
            return result.end, result.reason
        current = result.next_step
    w.add(at, None, "simulation ends", f"stopped after {MAX_SIMULATED_STEPS} steps")
    return "in flow", None


# --- test sends ---------------------------------------------------------------------------------

NO_ADDRESS = ("Give the test address in 'to': an email address for the email steps, or a phone number in"
              " E.164 form (+15551234567) for the SMS steps; 'sms_to' adds a phone number beside an email address.")


def _test_targets(conn: sqlite3.Connection, workspace_id: int, body: Any) -> tuple[str | None, str | None]:
    """(email, phone) from {"to", "sms_to"?}: `to` holding an @ is an email address, `to` starting
    with + is a phone number; `sms_to` is a phone number for the SMS steps."""
    from marketing_cli.services.contacts.values import normalize_email, normalize_phone

    to, sms_to = body.get("to"), body.get("sms_to")
    if not isinstance(to, str) or not to.strip():
        raise MktError(400, NO_ADDRESS)
    email = phone = None
    try:
        if "@" in to:
            email = normalize_email(to)
        elif to.strip().startswith("+"):
            phone = normalize_phone(to, None)
        else:
            raise ValueError(to)
    except ValueError:
        raise MktError(400, f"'{to}' is neither an email address nor a phone number in E.164 form. "
                            + NO_ADDRESS) from None
    if sms_to is not None:
        if not isinstance(sms_to, str) or phone is not None:
            raise MktError(400, "The member 'sms_to' is a phone number beside an email address in 'to'.")
        try:
            phone = normalize_phone(sms_to, None)
        except ValueError:
            raise MktError(400, f"The member 'sms_to' ('{sms_to}') is not a phone number.") from None
    return email, phone


def _check_test_room(conn: sqlite3.Connection, workspace_id: int, count: int) -> None:
    """The test email limits (services/delivery/test_emails.py) must leave room for all `count` emails."""
    from marketing_cli.services.delivery import test_emails

    now = clock.utcnow()
    per_minute, per_hour, per_day = test_emails.limits()
    for window, limit, status, message in ((timedelta(minutes=1), per_minute, 429, test_emails.PER_MINUTE),
                                           (timedelta(hours=1), per_hour, 400, test_emails.PER_HOUR),
                                           (timedelta(days=1), per_day, 400, test_emails.PER_DAY)):
        used = conn.execute("SELECT COUNT(*) FROM test_email_sends WHERE workspace_id = ? AND sent_at > ?",
                            (workspace_id, clock.format_ts(now - window))).fetchone()[0]
        if used + count > limit:
            raise MktError(status, message if count == 1 else
                           f"{message} This flow has {count} emails and the limit is {limit}.")


def _test_message(conn: sqlite3.Connection, workspace_id: int, step: dict[str, Any], contact: Any,
                  recipient: str) -> tuple[Any, str]:
    """(the MIME test message of a send_email step, its sender address), merge tags rendered."""
    from marketing_cli.services.contacts.merge_tags import Renderer
    from marketing_cli.services.delivery.message import CompiledEmail, address, build_message
    from marketing_cli.services.email.senders import get_sender_identity
    from marketing_cli.services.email.variant_html import public_url

    sender = get_sender_identity(conn, workspace_id, step["sender_id"])
    if sender is None:
        raise MktError(400, f"Step '{step['id']}' names the sender {step['sender_id']}, which the workspace does not"
                            " have.")
    base = public_url()
    links = {"unsubscribe_url": f"{base}/test-email/unsubscribe", "view_online_url": f"{base}/test-email/view-online",
             "preferences_url": f"{base}/test-email/preferences", "confirmation_url": f"{base}/test-email/confirm"}
    values = Renderer(conn, workspace_id, preview_text=step.get("preview_text") or "").values_for(
        contact, actions=links, extra={"confirmation_url": links["confirmation_url"]})
    subject, html, text = CompiledEmail(step["subject"], step["body_html"]).render(values)
    message = build_message(sender=address(sender["display_name"], sender["local_part"], sender["domain_name"]),
                            to=recipient, subject=subject, html=html, text=text,
                            headers={"X-Mkt-Test": "1", "X-Mkt-Automation": str(step.get("_automation_id", ""))})
    return message, f"{sender['local_part']}@{sender['domain_name']}"


def send_tests(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, body: Any, *,
               transport: Any = None, smtp_url: str | None = None) -> dict[str, Any]:
    """POST /v1/automations/:id/test {"to", "sms_to"?, "contact_id"?}: each message of the flow
    (newest version, else the checked draft) sent once to the test address.

    Email steps go to `to` when it is an email address, through the workspace's transport as
    a campaign's test email goes (the test email limits count each one; the subject as the
    step writes it, the X-Mkt-Test header marks it; action links inert). SMS steps go to `to` when it is a phone number, or to
    `sms_to`, through the workspace's SMS provider. Merge tags are rendered for `contact_id`,
    else the workspace's contact with the test address, else the fields' defaults. A step of
    a channel without a test address is listed as not sent."""
    from marketing_cli.services.delivery import test_emails, transport_settings
    from marketing_cli.services.delivery.transport import OutboxTransport, TransportError

    if not isinstance(body, dict):
        raise MktError(400, "The body must be a JSON object with 'to'.")
    for key in body:
        if key not in ("to", "sms_to", "contact_id"):
            raise MktError(400, f"Unknown member '{key}'")
    email, phone = _test_targets(conn, workspace_id, body)
    row = automation_row(conn, workspace_id, automation_id)
    flow, version = flow_for(conn, workspace_id, row)
    contact = None
    if body.get("contact_id") is not None:
        contact_id = parse_hex_id(body["contact_id"], "The contact ID you provided is not valid.")
        contact = conn.execute("SELECT * FROM contacts WHERE id = ? AND workspace_id = ?",
                               (contact_id, workspace_id)).fetchone()
        if contact is None:
            raise MktError(404, CONTACT_NOT_FOUND)
    elif email or phone:
        column, value = ("email", email) if email else ("phone", phone)
        contact = conn.execute(f"SELECT * FROM contacts WHERE workspace_id = ? AND {column} = ?",
                               (workspace_id, value)).fetchone()
    mails = [s for s in flow["steps"] if s["type"] == "send_email"]
    texts = [s for s in flow["steps"] if s["type"] == "send_sms"]
    if not mails and not texts:
        raise MktError(400, "This automation has no send step: there is nothing to test.")
    results: list[dict[str, Any]] = []
    if email and mails:
        built = [(s, *_test_message(conn, workspace_id, {**s, "_automation_id": row["id"]}, contact, email))
                 for s in mails]
        with transaction(conn):
            _check_test_room(conn, workspace_id, len(built))
            places_ = [test_emails.record_test_send(conn, workspace_id, email) for _ in built]
        own = transport is None
        sent = 0
        try:
            if own:
                transport = transport_settings.selection(conn, workspace_id, smtp_url=smtp_url).open()
            for step, message, sender in built:
                transport.send(message, sender, [email])
                sent += 1
                results.append({"step_id": step["id"], "channel": "email", "to": email,
                                "status": "written to the outbox" if isinstance(transport, OutboxTransport)
                                else "sent", "message_id": message["Message-ID"], "subject": message["Subject"]})
        except (TransportError, ValueError) as exc:
            with transaction(conn):
                conn.executemany("DELETE FROM test_email_sends WHERE id = ?", [(p,) for p in places_[sent:]])
            raise MktError(502, test_emails.SEND_FAILED.format(reason=exc)) from None
        finally:
            if own and transport is not None:
                transport.close()
    else:
        results += [{"step_id": s["id"], "channel": "email", "to": None, "status": "not sent: no test email address",
                     "message_id": None} for s in mails]
    results += _send_test_texts(conn, workspace_id, row["id"], texts, phone, contact)
    order = {s["id"]: i for i, s in enumerate(flow["steps"])}
    results.sort(key=lambda r: order[r["step_id"]])
    return {"automation_id": row["id"], "version": version, "to": body["to"], "sms_to": phone, "sent": results}


def _send_test_texts(conn: sqlite3.Connection, workspace_id: int, automation_id: int, texts: list[dict[str, Any]],
                     phone: str | None, contact: Any) -> list[dict[str, Any]]:
    """Each SMS step once to `phone` through the workspace's provider (Twilio). The outbox provider
    keeps campaign messages only: there the text is rendered and shown, not stored."""
    from marketing_cli.services.sms.ledger import get_sender_id
    from marketing_cli.services.sms.providers import Outgoing, get_provider
    from marketing_cli.services.sms.segments import count_segments

    if not texts:
        return []
    if phone is None:
        return [{"step_id": s["id"], "channel": "sms", "to": None, "status": "not sent: no test phone number",
                 "message_id": None} for s in texts]
    shown = contact if contact is not None else {"email": None, "phone": phone, "data": "{}"}
    sender = get_sender_id(conn, workspace_id)["sms_sender_id"]
    provider = get_provider(conn, workspace_id)
    out = []
    for step in texts:
        body = sms_body(conn, workspace_id, step, shown)
        entry = {"step_id": step["id"], "channel": "sms", "to": phone, "body": body, "message_id": None}
        if provider.in_database:
            entry["status"] = "not sent: the workspace's SMS provider is the outbox (mkt sms provider set twilio)"
        elif not sender:
            entry["status"] = "not sent: the workspace has no SMS sender ID (mkt sms sender-id set)"
        else:
            receipt = provider.send(conn, workspace_id, [Outgoing(0, f"automation-{automation_id}-test", sender,
                                                                  phone, body, count_segments(body).segments)])[0]
            entry["status"] = "sent" if receipt.accepted else f"failed: {receipt.error}"
            entry["message_id"] = receipt.reference
        out.append(entry)
    return out

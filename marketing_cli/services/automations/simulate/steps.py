"""The step simulators: one per step type (SIMULATORS), each given the walk, the step and the
instant the contact reaches it; each adds its lines to the timeline and answers a Step (the
next step, when: None for now, or the end). A type without one is the replay's (replay.py).

- Waits move the simulated clock. A wait for an event ends at the first matching event of
  the given events after the wait began, else at its timeout through `timeout_next`.
- Splits are answered on the contact's current data, with the tags and fields the
  simulated steps before them set; a segment split asks the segment's compiled filters
  about the contact as stored; an email activity split is "no" unless the events say the
  message was opened or clicked ({"type": "email_opened", "step": "hello", "at": ...}).
- Sends are checked as the real step checks them (an address, the status) and against the
  frequency caps (capped: skipped or deferred, as the step says). SMS steps are priced and
  held by quiet hours: the hold lasts until the window opens for the contact's number.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import caps
from marketing_cli.services.automations.simulate.events import event_matches
from marketing_cli.services.automations.simulate.times import next_local_time
from marketing_cli.services.automations.simulate.walk import Step, Walk
from marketing_cli.services.automations.steps import WHEN_CAPPED_DEFAULT, field_value


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

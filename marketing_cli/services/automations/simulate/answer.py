"""`simulate(conn, ws, automation_id, {"contact_id", "events"?, "until"?})`, the service of
POST /v1/automations/:id/simulate: the request read (the events, events.py; `until`,
times.py), the flow's newest published version (the draft, checked as publishing would,
when none is published yet: walk.flow_for) walked for the contact from now (replay.py), and
the answer: each step the contact would take with its UTC time and its local time in the
contact's zone, the messages it would get per channel, and their SMS cost.

Nothing is sent or written: the walk runs with `PRAGMA query_only` on, so a write by
mistake is an error, never a change.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from decimal import Decimal
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.services.automations.flows import automation_row
from marketing_cli.services.automations.simulate.events import read_events
from marketing_cli.services.automations.simulate.replay import replay
from marketing_cli.services.automations.simulate.times import contact_zone, read_instant
from marketing_cli.services.automations.simulate.walk import CONTACT_NOT_FOUND, Walk, flow_for

DEFAULT_DAYS = 366


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
    until = read_instant(body["until"], "until", end_of_day=True) if body.get("until") is not None \
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
        end, reason = replay(w)
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

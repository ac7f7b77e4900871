"""The events a simulation is given (`events`, the CLI's --events file): a JSON list of
{"name" or "type", "properties", "at", ...}, read and checked (read_events), and matched
against a condition as the runner's SQL matches the event log (event_matches).

A wait for an event ends at the first matching event of the given events after the wait
began, else at its timeout (steps.py); a matching event for the flow's goal takes the
contact out at that time (replay.py); an email activity split reads the email_opened and
email_clicked events, which name the step ({"type": "email_opened", "step": "hello", "at": ...}).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.automations.format import TRIGGER_EVENTS
from marketing_cli.services.automations.simulate.times import read_instant

MAX_EVENTS = 1_000
EVENT_TYPES = (*TRIGGER_EVENTS, "email_opened", "email_clicked")
EVENT_MEMBERS = ("name", "type", "properties", "at", "tag", "field", "from", "to", "step")


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
        out.append(Event(kind, read_instant(item["at"], f"{where}.at"), item))
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

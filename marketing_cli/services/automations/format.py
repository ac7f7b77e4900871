"""The flow document: its shape, checked without the database.

A flow is a JSON object (docs/automations.md; the JSON Schema is `flow.schema.json` beside
this module, served at GET /v1/automations/schema):

    {"name": "Welcome", "reentry": "once" | "every_time" | "cooldown", "cooldown": {"days": 7},
     "triggers": [{"type": "tag_added", "tag": "vip"}, ...],
     "goal": {"type": "custom_event", "name": "purchase"},          (optional)
     "start": "welcome",                                            (optional: the first step)
     "steps": [{"id": "welcome", "type": "send_email", ..., "next": "wait"}, ...]}

`check_document` returns the document normalised (defaults filled in, durations in
seconds kept beside what was written) or raises MktError(400) naming the member. Which
templates, tags, fields, segments and senders exist is the publisher's check (validate.py).

A document nests at most MAX_DEPTH levels (the document itself is one: a webhook's payload
has about 28), checked first, without recursion, so every value a flow stores stays far
inside what the encoders read back (orjson stops at 255 levels: a payload nested 256 to 990
deep was stored, then every answer that held it was a 500).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from marketing_cli.errors import MktError

MAX_NAME = 255
MAX_STEPS = 200
MAX_TRIGGERS = 20
MAX_DOCUMENT_BYTES = 256 * 1024
MAX_DEPTH = 32  # levels of objects and arrays in a document, the document itself counted
TOO_DEEP = "The automation nests objects and arrays more than 32 levels deep (at '{path}')."
MAX_WAIT_SECONDS = 366 * 86400
REENTRY = ("once", "every_time", "cooldown")

# trigger type -> contact_events.type
TRIGGER_EVENTS = {
    "contact_subscribed": "CONTACT_SUBSCRIBED",
    "subscription_pending": "CONTACT_SUBSCRIBED_PENDING",
    "tag_added": "TAG_ADDED",
    "tag_removed": "TAG_REMOVED",
    "field_updated": "FIELD_UPDATED",
    "custom_event": "CUSTOM_EVENT",
}
# Triggers that read no event: a date field's yearly anniversary (triggers.anniversaries) and
# enrolling by hand.
TRIGGER_TYPES = (*TRIGGER_EVENTS, "segment_entered", "segment_left", "date_anniversary", "manual")
ANNIVERSARY = "DATE_ANNIVERSARY"  # automation_triggers.event_type of an anniversary (no event has it)
# Segment triggers are decided for the contacts that have events (triggers.segment_changes).
SEGMENT_KINDS = {"segment_entered": "SEGMENT_ENTERED", "segment_left": "SEGMENT_LEFT"}
# members of each trigger / event condition besides "type": (name, JSON type, required)
_EVENT_MEMBERS: dict[str, tuple[tuple[str, Any, bool], ...]] = {
    "contact_subscribed": (),
    "subscription_pending": (),
    "manual": (),
    "date_anniversary": (("field", str, True),),
    "segment_entered": (("segment_id", int, True),),
    "segment_left": (("segment_id", int, True),),
    "tag_added": (("tag", str, True),),
    "tag_removed": (("tag", str, True),),
    "field_updated": (("field", str, True), ("from", object, False), ("to", object, False)),
    "custom_event": (("name", str, True), ("properties", dict, False)),
}
SPLIT_KINDS = ("tag", "field", "segment", "random", "email_activity")
FIELD_OPERATORS = ("equals", "not_equals", "exists", "not_exists", "greater_than", "less_than", "contains")
ACTIVITIES = ("opened", "clicked")
DURATION_UNITS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}

# step type -> its members: (name, JSON type, required); "next" pointers are listed apart.
STEP_MEMBERS: dict[str, tuple[tuple[str, Any, bool], ...]] = {
    "send_email": (("subject", str, True), ("sender_id", int, True), ("template_id", int, False),
                   ("html", str, False), ("preview_text", str, False), ("confirmation", bool, False),
                   ("when_capped", str, False)),
    "send_sms": (("body", str, True), ("when_capped", str, False)),
    "wait": (("duration", dict, True),),
    "wait_until": (("time", str, True), ("weekdays", list, False)),
    "wait_for_event": (("event", dict, True), ("timeout", dict, True)),
    "split": (("condition", dict, True),),
    "add_tag": (("tag", str, True),),
    "remove_tag": (("tag", str, True),),
    "set_field": (("field", str, True), ("value", object, True)),
    "webhook": (("url", str, True), ("payload", dict, False)),
    "goal": (("name", str, False),),
    "exit": (),
}
STEP_TYPES = tuple(STEP_MEMBERS)
# the pointers each step type may carry
POINTERS = {"split": ("yes", "no"), "wait_for_event": ("next", "timeout_next"), "goal": (), "exit": ()}
WAIT_TYPES = ("wait", "wait_until", "wait_for_event")
SEND_TYPES = ("send_email", "send_sms")
WHEN_CAPPED = ("skip", "defer")  # what a send step does over the frequency cap (default: defer)
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_SMS_BODY = 1600  # as an SMS campaign's message


def pointers_of(step_type: str) -> tuple[str, ...]:
    return POINTERS.get(step_type, ("next",))


def flow_schema() -> dict[str, Any]:
    """The JSON Schema of the document (shipped in the package, served by the API), with what
    `_members` enforces stated: a required string member holds more than blanks."""
    return _required_strings_not_blank(
        json.loads(resources.files(__package__).joinpath("flow.schema.json").read_text(encoding="utf-8")))


def _required_strings_not_blank(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_required_strings_not_blank(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: _required_strings_not_blank(value) for key, value in schema.items()}
    for name in schema.get("required", ()):
        sub = result.get("properties", {}).get(name)
        if isinstance(sub, dict) and sub.get("type") == "string" and "pattern" not in sub and "enum" not in sub:
            result["properties"][name] = {**sub, "pattern": "\\S"}
    return result


def _bad(message: str) -> MktError:
    return MktError(400, message)


def _type_name(expected: Any) -> str:
    return {str: "a string", int: "an integer", bool: "a boolean", dict: "an object", list: "an array"}[expected]


def _is(value: Any, expected: Any) -> bool:
    if expected is object:
        return True
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def _members(obj: Any, path: str, spec: tuple[tuple[str, Any, bool], ...], extra: tuple[str, ...] = ()) -> None:
    """Known members only, each of its type; required ones present."""
    if not isinstance(obj, dict):
        raise _bad(f"The member '{path}' must be an object.")
    allowed = {name for name, _, _ in spec} | set(extra)
    for key in obj:
        if key not in allowed:
            raise _bad(f"Unknown member '{path}.{key}'")
    for name, expected, required in spec:
        if name not in obj or obj[name] is None and expected is not object:
            if required:
                raise _bad(f"The member '{path}.{name}' is required.")
            continue
        if not _is(obj[name], expected):
            raise _bad(f"The member '{path}.{name}' must be {_type_name(expected)}.")
        if expected is str and required and not obj[name].strip():
            raise _bad(f"The member '{path}.{name}' must not be empty.")


def duration_seconds(value: Any, path: str) -> int:
    """{"days": 1, "hours": 2, ...} -> seconds (> 0, at most a year)."""
    if not isinstance(value, dict) or not value:
        raise _bad(f"The member '{path}' must be an object such as {{\"days\": 1}} (days, hours, minutes, seconds).")
    total = 0
    for unit, amount in value.items():
        if unit not in DURATION_UNITS:
            raise _bad(f"Unknown member '{path}.{unit}': a duration has days, hours, minutes and seconds.")
        if amount is None:  # an optional member sent as null is left out
            continue
        if not _is(amount, int) or amount < 0:
            raise _bad(f"The member '{path}.{unit}' must be a whole number, 0 or more.")
        total += amount * DURATION_UNITS[unit]
    if not 0 < total <= MAX_WAIT_SECONDS:
        raise _bad(f"The duration '{path}' must be more than 0 and at most 366 days.")
    return total


def check_event_condition(value: Any, path: str, *, trigger: bool = False) -> dict[str, Any]:
    """A trigger (`trigger`: also the kinds without an event), a goal or a wait-for-event's event."""
    if not isinstance(value, dict):
        raise _bad(f"The member '{path}' must be an object.")
    kind = value.get("type")
    kinds = TRIGGER_TYPES if trigger else tuple(TRIGGER_EVENTS)
    if kind not in kinds:
        raise _bad(f"The member '{path}.type' must be one of: {', '.join(kinds)}.")
    _members(value, path, _EVENT_MEMBERS[kind], ("type",))
    if kind == "custom_event" and "properties" in value and value["properties"] is not None:
        for key, item in value["properties"].items():
            if isinstance(item, (dict, list)):
                raise _bad(f"The member '{path}.properties.{key}' must be a string, number, boolean or null:"
                           " property filters compare single values.")
    return dict(value)


def _check_condition(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(f"The member '{path}' must be an object.")
    kind = value.get("kind")
    if kind not in SPLIT_KINDS:
        raise _bad(f"The member '{path}.kind' must be one of: {', '.join(SPLIT_KINDS)}.")
    spec: dict[str, tuple[tuple[str, Any, bool], ...]] = {
        "tag": (("tag", str, True),),
        "field": (("field", str, True), ("operator", str, True), ("value", object, False)),
        "segment": (("segment_id", int, True),),
        "random": (("percent", int, True),),
        "email_activity": (("step", str, True), ("activity", str, True)),
    }
    _members(value, path, spec[kind], ("kind",))
    if kind == "field" and value["operator"] not in FIELD_OPERATORS:
        raise _bad(f"The member '{path}.operator' must be one of: {', '.join(FIELD_OPERATORS)}.")
    if kind == "field" and value["operator"] not in ("exists", "not_exists") and "value" not in value:
        raise _bad(f"The member '{path}.value' is required for the operator '{value['operator']}'.")
    if kind == "random" and not 0 <= value["percent"] <= 100:
        raise _bad(f"The member '{path}.percent' must be between 0 and 100.")
    if kind == "email_activity" and value["activity"] not in ACTIVITIES:
        raise _bad(f"The member '{path}.activity' must be one of: {', '.join(ACTIVITIES)}.")
    return dict(value)


def _check_step(step: Any, index: int) -> dict[str, Any]:
    path = f"steps[{index}]"
    if not isinstance(step, dict):
        raise _bad(f"The member '{path}' must be an object.")
    kind = step.get("type")
    if kind not in STEP_TYPES:
        raise _bad(f"The member '{path}.type' must be one of: {', '.join(STEP_TYPES)}.")
    step_id = step.get("id")
    if not isinstance(step_id, str) or not step_id.strip() or len(step_id) > 64:
        raise _bad(f"The member '{path}.id' must be a non-empty string of at most 64 characters.")
    pointers = pointers_of(kind)
    _members(step, path, STEP_MEMBERS[kind], ("id", "type", "name", *pointers))
    for pointer in pointers:
        if step.get(pointer) is not None and not isinstance(step[pointer], str):
            raise _bad(f"The member '{path}.{pointer}' must be a step id (a string) or null.")
    checked = dict(step)
    if kind in SEND_TYPES and step.get("when_capped") is not None and step["when_capped"] not in WHEN_CAPPED:
        raise _bad(f"The member '{path}.when_capped' must be one of: {', '.join(WHEN_CAPPED)}.")
    if kind == "send_email":
        if (step.get("template_id") is None) == (step.get("html") is None):
            raise _bad(f"Step '{step_id}' ({path}) needs exactly one of 'template_id' and 'html'.")
        if not 3 <= len(step["subject"].strip()) <= 90:
            raise _bad(f"The member '{path}.subject' must be 3 to 90 characters long.")
    elif kind == "send_sms":
        if len(step["body"]) > MAX_SMS_BODY:
            raise _bad(f"The member '{path}.body' must be {MAX_SMS_BODY} characters or less.")
    elif kind == "wait":
        checked["seconds"] = duration_seconds(step["duration"], f"{path}.duration")
    elif kind == "wait_until":
        from marketing_cli.kernel.localtime import parse_local_time

        try:
            checked["time"] = parse_local_time(step["time"])
        except ValueError as exc:
            raise _bad(f"The member '{path}.time': {exc}") from None
        days = step.get("weekdays")
        if days is not None:
            if not days or any(d not in WEEKDAYS for d in days) or len(set(days)) != len(days):
                raise _bad(f"The member '{path}.weekdays' must list distinct days among {', '.join(WEEKDAYS)}"
                           " (at least one), or be left out for every day.")
            checked["weekdays"] = [d for d in WEEKDAYS if d in days]
    elif kind == "wait_for_event":
        checked["event"] = check_event_condition(step["event"], f"{path}.event")
        checked["timeout_seconds"] = duration_seconds(step["timeout"], f"{path}.timeout")
    elif kind == "split":
        checked["condition"] = _check_condition(step["condition"], f"{path}.condition")
    elif kind == "webhook":
        url = step["url"].strip()
        if not url.lower().startswith(("http://", "https://")) or len(url) > 2048:
            raise _bad(f"The member '{path}.url' must be an http(s) URL of at most 2048 characters.")
    return checked


def too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """The path of the first object or array deeper than `limit` levels in `value`; None
    when there is none. Walked with a stack, so a value nested thousands deep is no
    RecursionError."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict):
            children = [(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        if depth > limit:
            return path
        stack.extend((child, depth + 1, where) for child, where in children if isinstance(child, (dict, list)))
    return None


def _path_for_message(path: str) -> str:
    return path if len(path) <= 80 else path[:77] + "..."


def check_document(doc: Any) -> dict[str, Any]:
    """The document's shape (members, types, ids, pointers to known ids); its normal form."""
    if not isinstance(doc, dict):
        raise _bad("The automation must be a JSON object (docs/automations.md).")
    deep = too_deep(doc)
    if deep is not None:
        raise _bad(TOO_DEEP.format(path=_path_for_message(deep)))
    if len(json.dumps(doc, ensure_ascii=False).encode("utf-8")) > MAX_DOCUMENT_BYTES:
        raise _bad(f"An automation can be at most {MAX_DOCUMENT_BYTES // 1024} KB as JSON.")
    allowed = ("name", "description", "reentry", "cooldown", "triggers", "goal", "start", "steps")
    for key in doc:
        if key not in allowed:
            raise _bad(f"Unknown member '{key}'")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _bad("The automation's 'name' is required (a non-empty string).")
    if len(name.strip()) > MAX_NAME:
        raise _bad(f"The automation's 'name' can be at most {MAX_NAME} characters.")
    if doc.get("description") is not None and not isinstance(doc["description"], str):
        raise _bad("The member 'description' must be a string.")
    reentry = doc.get("reentry", "once") or "once"
    if reentry not in REENTRY:
        raise _bad(f"The member 'reentry' must be one of: {', '.join(REENTRY)}.")
    out: dict[str, Any] = {"name": name.strip(), "reentry": reentry}
    if doc.get("description"):
        out["description"] = doc["description"]
    if reentry == "cooldown":
        out["cooldown"] = doc.get("cooldown")
        out["cooldown_seconds"] = duration_seconds(doc.get("cooldown"), "cooldown")
    elif doc.get("cooldown") is not None:
        raise _bad("The member 'cooldown' is only for reentry 'cooldown'.")
    triggers = doc.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        raise _bad("The member 'triggers' must be an array of at least one trigger.")
    if len(triggers) > MAX_TRIGGERS:
        raise _bad(f"An automation can have at most {MAX_TRIGGERS} triggers.")
    out["triggers"] = [check_event_condition(t, f"triggers[{i}]", trigger=True) for i, t in enumerate(triggers)]
    if doc.get("goal") is not None:
        out["goal"] = check_event_condition(doc["goal"], "goal")
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        raise _bad("The member 'steps' must be an array of at least one step.")
    if len(steps) > MAX_STEPS:
        raise _bad(f"An automation can have at most {MAX_STEPS} steps.")
    checked = [_check_step(s, i) for i, s in enumerate(steps)]
    ids: dict[str, int] = {}
    for i, step in enumerate(checked):
        if step["id"] in ids:
            raise _bad(f"The step id '{step['id']}' is used twice (steps[{ids[step['id']]}] and steps[{i}]).")
        ids[step["id"]] = i
    for i, step in enumerate(checked):
        for pointer in pointers_of(step["type"]):
            target = step.get(pointer)
            if target is not None and target not in ids:
                raise _bad(f"Step '{step['id']}' (steps[{i}]) points '{pointer}' at '{target}', which is no step.")
    start = doc.get("start")
    if start is not None and start not in ids:
        raise _bad(f"The member 'start' names '{start}', which is no step.")
    out["start"] = start if start is not None else checked[0]["id"]
    out["steps"] = checked
    return out

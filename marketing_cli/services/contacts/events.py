"""Custom events (POST /v1/events, `mkt events track`) and the automation event log.

Every automation event (CONTACT_SUBSCRIBED_PENDING, TAG_ADDED, TAG_REMOVED, FIELD_UPDATED,
CUSTOM_EVENT) is a row of `contact_events`, appended in the same transaction as the change
that fired it; automations read the log in id order. `track_event` appends a CUSTOM_EVENT
and bumps the month's `events` usage counter in one transaction, after the plan's events
allowance said yes, so an accepted event is never lost and never counted twice.

`list_events` reads the log (`mkt events log`, GET /v1/events): newest last, and with
`after_id` it returns only what came after, which is how `--follow` polls.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.services.account import billing
from marketing_cli.storage.db import transaction

INVALID_BODY = "Invalid request body."
IDENTIFIER_REQUIRED = (
    "Email address or phone number is required. Please provide the contact's email address or phone number."
)
NOT_BOTH = "Please provide an email address or phone number, not both."
NAME_REQUIRED = "Event name is required."
PHONE_NOT_FOUND = "We couldn't find a contact with the phone number '{number}'."
EMAIL_NOT_FOUND = "We couldn't find a contact with the email address '{email}'."
PHONE_INVALID = "Phone number is invalid. Please provide a valid phone number."
NO_PHONE_FIELD = (
    "We couldn't find a PhoneNumber field in your workspace. Please check your workspace configuration and try again."
)
ALLOWANCE_USED_UP = (
    "Billing limit error: your plan's event allowance for this month is used up. "
    "Upgrade the plan or raise the events allowance to track more events."
)

# Part 8 of the specification: constraints on `properties`.
MAX_PROPERTIES_BYTES = 16 * 1024
MAX_DEPTH = 5
MAX_KEYS = 50
MAX_KEY_LENGTH = 128
PROPERTIES_NOT_OBJECT = "Event properties must be a JSON object (not an array, a string, a number or a boolean)."

# CONTACT_SUBSCRIBED: a double opt-in confirmation (services/delivery/confirmation.py).
EVENT_TYPES = ("CONTACT_SUBSCRIBED_PENDING", "CONTACT_SUBSCRIBED", "TAG_ADDED", "TAG_REMOVED", "FIELD_UPDATED",
               "CUSTOM_EVENT")
DEFAULT_LOG_LIMIT = 50
MAX_LOG_LIMIT = 1000


# --- the log -------------------------------------------------------------------------

_APPEND = "INSERT INTO contact_events (workspace_id, contact_id, type, payload, created_at) VALUES (?, ?, ?, ?, ?)"


def _payload(payload: dict[str, Any] | None) -> str:
    return json.dumps(payload or {}, ensure_ascii=False, separators=(",", ":"))


def append_event(conn: sqlite3.Connection, workspace_id: int, contact_id: str, type: str,
                 payload: dict[str, Any] | None = None) -> int:
    """Append one automation event (call inside the transaction of the change); its id."""
    return conn.execute(_APPEND, (workspace_id, contact_id, type, _payload(payload), clock.now())).lastrowid


def append_events(conn: sqlite3.Connection, workspace_id: int, contact_id: str,
                  events: list[tuple[str, dict[str, Any]]]) -> None:
    """Append several (type, payload) events of one contact, inside the change's transaction."""
    now = clock.now()
    conn.executemany(_APPEND, [(workspace_id, contact_id, kind, _payload(payload), now) for kind, payload in events])


def event_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": row["type"],
        "contact_id": row["contact_id"],
        "payload": json.loads(row["payload"]),
        "created_at": row["created_at"],
    }


def list_events(conn: sqlite3.Connection, workspace_id: int, after_id: int | None = None,
                limit: int = DEFAULT_LOG_LIMIT, type: str | None = None,
                contact_id: str | None = None) -> list[dict[str, Any]]:
    """The workspace's automation events, oldest first.

    Without `after_id`: the newest `limit` events. With it: the first `limit` events whose
    id is greater (so a follower passes the last id it has seen).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LOG_LIMIT:
        raise MktError(400, f"The limit must be between 1 and {MAX_LOG_LIMIT}.")
    if after_id is not None and (isinstance(after_id, bool) or not isinstance(after_id, int)
                                 or not 0 <= after_id < 2**63):
        raise MktError(400, "after_id must be an event id (an integer, 0 or more).")
    if type is not None and type not in EVENT_TYPES:
        raise MktError(400, f"The event type '{type}' is not valid. Valid types are: {', '.join(EVENT_TYPES)}.")
    if contact_id is not None:
        contact_id = parse_hex_id(contact_id, "The contact ID you provided is not valid.")
    where, params = ["workspace_id = ?"], [workspace_id]
    if type is not None:
        where.append("type = ?")
        params.append(type)
    if contact_id is not None:
        where.append("contact_id = ?")
        params.append(contact_id)
    if after_id is not None:
        where.append("id > ?")
        params.append(after_id)
        sql = f"SELECT * FROM contact_events WHERE {' AND '.join(where)} ORDER BY id LIMIT ?"
        rows = conn.execute(sql, (*params, limit)).fetchall()
    else:
        sql = f"SELECT * FROM contact_events WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
        rows = conn.execute(sql, (*params, limit)).fetchall()[::-1]
    return [event_view(r) for r in rows]


def latest_event_id(conn: sqlite3.Connection, workspace_id: int) -> int:
    """The id of the workspace's newest event (0 when it has none): where a follower starts."""
    row = conn.execute("SELECT MAX(id) FROM contact_events WHERE workspace_id = ?", (workspace_id,)).fetchone()
    return row[0] or 0


# --- properties ----------------------------------------------------------------------

def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _check_container(value: Any, depth: int, path: str) -> None:
    """Depth, key count and key rules, container by container (depth 1 = the top object)."""
    if depth > MAX_DEPTH:
        raise MktError(
            400,
            f"Event properties can be nested at most {MAX_DEPTH} levels deep (the top-level object is level 1);"
            f" '{path}' is at level {depth}.",
        )
    if isinstance(value, dict):
        if len(value) > MAX_KEYS:
            where = f"the object '{path}'" if path else "the top-level object"
            raise MktError(400, f"Event properties can hold at most {MAX_KEYS} keys per object;"
                                f" {where} has {len(value)}.")
        for key, item in value.items():
            if len(key) > MAX_KEY_LENGTH:
                raise MktError(400, f"Event property keys can be at most {MAX_KEY_LENGTH} characters long;"
                                    f" '{key[:32]}...' has {len(key)}.")
            if key.startswith("$"):
                raise MktError(400, f"Event property key '{_path(path, key)}' is not allowed: a key cannot start"
                                    " with $.")
            if "." in key:
                raise MktError(400, f"Event property key '{key}' is not allowed: a key cannot contain '.'.")
            _check_item(item, depth, _path(path, key))
    else:
        for index, item in enumerate(value):
            _check_item(item, depth, _path(path, index))


def _check_item(item: Any, depth: int, path: str) -> None:
    if isinstance(item, (dict, list)):
        _check_container(item, depth + 1, path)
    elif isinstance(item, float) and not math.isfinite(item):
        raise MktError(400, f"Event property '{path}' must be a finite number.")
    elif isinstance(item, int) and not isinstance(item, bool) and not -(2**63) <= item < 2**63:
        raise MktError(400, f"Event property '{path}' is an integer beyond 64 bits; send it as a string.")


def check_properties(properties: Any) -> dict[str, Any]:
    """The properties object, checked against part 8 of the specification."""
    if properties is None:
        return {}
    if not isinstance(properties, dict):
        raise MktError(400, PROPERTIES_NOT_OBJECT)
    try:
        size = len(json.dumps(properties, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    except (ValueError, RecursionError):  # only reachable from Python callers: JSON bodies are finite
        raise MktError(400, PROPERTIES_NOT_OBJECT) from None
    if size > MAX_PROPERTIES_BYTES:
        raise MktError(400, f"Event properties can be at most 16 KB ({MAX_PROPERTIES_BYTES} bytes) when"
                            f" serialized as JSON; these are {size} bytes.")
    _check_container(properties, 1, "")
    return properties


# --- tracking ------------------------------------------------------------------------

def _identifier(body: dict[str, Any], name: str) -> str | None:
    value = member(body, name, str)
    return value.strip() if value is not None and value.strip() else None


def _contact_by_email(conn: sqlite3.Connection, workspace_id: int, email: str) -> str:
    from marketing_cli.services.contacts.values import normalize_email

    try:
        normalized = normalize_email(email)
    except ValueError:
        normalized = None  # no contact can have an invalid address
    row = None
    if normalized is not None:
        row = conn.execute(
            "SELECT id FROM contacts WHERE workspace_id = ? AND email = ?", (workspace_id, normalized)
        ).fetchone()
    if row is None:
        raise MktError(400, EMAIL_NOT_FOUND.format(email=email))
    return row["id"]


def _contact_by_phone(conn: sqlite3.Connection, workspace_id: int, phone: str) -> str:
    from marketing_cli.services.contacts.values import contact_with_phone, load_fields, normalize_phone

    field = load_fields(conn, workspace_id).phone
    if field is None:
        raise MktError(400, NO_PHONE_FIELD)
    try:
        normalized = normalize_phone(phone, field.default_region)
    except ValueError:
        raise MktError(400, PHONE_INVALID) from None
    row = contact_with_phone(conn, workspace_id, normalized, "id, created_at")
    if row is None:
        raise MktError(400, PHONE_NOT_FOUND.format(number=phone))
    return row["id"]


def track_event(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/events: record a CUSTOM_EVENT for the contact named by email or phone."""
    body = require_object(body, INVALID_BODY)
    email = _identifier(body, "email_address")
    phone = _identifier(body, "phone_number")
    if email is None and phone is None:
        raise MktError(400, IDENTIFIER_REQUIRED)
    if email is not None and phone is not None:
        raise MktError(400, NOT_BOTH)
    event_name = member(body, "event_name", str)
    if event_name is None or not event_name.strip():
        raise MktError(400, NAME_REQUIRED)
    properties = check_properties(body.get("properties"))
    with transaction(conn):
        if email is not None:
            contact_id = _contact_by_email(conn, workspace_id, email)
        else:
            contact_id = _contact_by_phone(conn, workspace_id, phone)
        if billing.remaining(conn, workspace_id, "events") < 1:
            raise billing.limit_error(conn, workspace_id, "events", ALLOWANCE_USED_UP, 429)
        append_event(conn, workspace_id, contact_id, "CUSTOM_EVENT",
                     {"event_name": event_name, "properties": properties})
        billing.bump_usage(conn, workspace_id, "events")
    return {"queued": True}

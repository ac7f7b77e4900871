"""Workspaces: creation (with built-in fields, the free plan and a first key), reading
and updating settings.

The Workspace object is the specification's; operator settings (SMS markup, whether
contacts may lack an email address, the SMS sender ID) are kept beside it and changed
only from the CLI (`update_operator_settings`).
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal, InvalidOperation
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.services.account import billing
from marketing_cli.storage.db import transaction

NAME_LENGTH = "Workspace name must be between 2 and 50 characters."
NOT_FOUND = "The workspace does not exist."
INVALID_BODY = "Invalid request body."
NO_CONVERSION_PLAN = "Your plan does not support conversion tracking. Please upgrade to enable this feature."
CONVERSION_NEEDS_INTERACTION = "Conversion tracking cannot be enabled while interaction tracking is disabled."
BAD_TIMEZONE = ("The member 'timezone' must be an IANA time zone name (for example Europe/Paris or UTC), "
                "not '{value}'.")

# Fields every workspace starts with (CONTRACT section 5).
BUILTIN_FIELDS = (
    {"label": "Email address", "merge_tag": "email_address", "immutable": 1, "required": 1},
    {"label": "First name", "merge_tag": "first_name", "immutable": 0, "required": 0},
    {"label": "Last name", "merge_tag": "last_name", "immutable": 0, "required": 0},
)


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not 2 <= len(name.strip()) <= 50:
        raise MktError(400, NAME_LENGTH)
    return name.strip()


def workspace_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "conversion_tracking": bool(row["conversion_tracking"]),
        "interaction_tracking": bool(row["interaction_tracking"]),
        "is_approved": bool(row["is_approved"]),
        "is_suspended": bool(row["is_suspended"]),
        "created_at": row["created_at"],
        # extension (docs/api.md): the workspace's own time zone, an IANA name (default UTC)
        "timezone": row["timezone"],
    }


def _row(conn: sqlite3.Connection, workspace_id: int) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row


def create_workspace(conn: sqlite3.Connection, name: Any, *, key_name: str | None = "default") -> dict[str, Any]:
    """A new workspace on the free plan with its built-in fields and first API key."""
    from marketing_cli.services.account import keys  # only creation needs them (start-up time)
    from marketing_cli.storage import field_sql

    name = _check_name(name)
    now = clock.now()
    with transaction(conn):
        workspace_id = conn.execute(
            "INSERT INTO workspaces (name, created_at) VALUES (?, ?)", (name, now)
        ).lastrowid
        for order, f in enumerate(BUILTIN_FIELDS, start=1):
            field_id = conn.execute(
                "INSERT INTO fields (workspace_id, label, merge_tag, type, \"order\", immutable, required,"
                " created_at, updated_at) VALUES (?, ?, ?, 'TEXT', ?, ?, ?, ?, ?)",
                (workspace_id, f["label"], f["merge_tag"], order, f["immutable"], f["required"], now, now),
            ).lastrowid
            if f["merge_tag"] != "email_address":  # email is a column with its own index
                field_sql.create_index(conn, field_id)
        billing.start_subscription(conn, workspace_id, "free")
        key = keys.create_key(conn, workspace_id, key_name)
        workspace = workspace_view(_row(conn, workspace_id))
    return {"workspace": workspace, "api_key": key["key"]}


# `mkt serve`'s first start on an empty database makes a workspace under these names, so that
# the API answers at once; the first `mkt init` then names that workspace instead of making a
# second one (one story however a user begins: README, "Quick start").
FIRST_START_NAME = "My workspace"
FIRST_START_KEY = "mkt serve (first start)"


def create_first_start_workspace(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """`mkt serve` on a database without a workspace: one, with its first key; None when one exists."""
    with transaction(conn):
        if conn.execute("SELECT 1 FROM workspaces LIMIT 1").fetchone() is not None:
            return None
        return create_workspace(conn, FIRST_START_NAME, key_name=FIRST_START_KEY)


def first_start_workspace(conn: sqlite3.Connection) -> int | None:
    """The id of the workspace `mkt serve` made on its first start, while it is the database's
    only workspace and still has its first-start name; else None."""
    rows = conn.execute("SELECT id, name FROM workspaces ORDER BY id LIMIT 2").fetchall()
    if len(rows) != 1 or rows[0]["name"] != FIRST_START_NAME:
        return None
    made_by_serve = conn.execute("SELECT 1 FROM api_keys WHERE workspace_id = ? AND name = ?",
                                 (rows[0]["id"], FIRST_START_KEY)).fetchone()
    return rows[0]["id"] if made_by_serve else None


def init_workspace(conn: sqlite3.Connection, name: Any) -> dict[str, Any]:
    """`mkt init --name NAME`: {"workspace", "api_key"}. On a database whose only workspace is
    the one `mkt serve` made on its first start, that workspace takes the name and a new key
    (the key serve printed keeps working); otherwise a new workspace with its first key."""
    from marketing_cli.services.account import keys

    name = _check_name(name)
    with transaction(conn):
        adopted = first_start_workspace(conn)
        if adopted is None:
            return create_workspace(conn, name)
        conn.execute("UPDATE workspaces SET name = ? WHERE id = ?", (name, adopted))
        key = keys.create_key(conn, adopted, "default")
        return {"workspace": workspace_view(_row(conn, adopted)), "api_key": key["key"]}


def list_workspaces(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [workspace_view(r) for r in conn.execute("SELECT * FROM workspaces ORDER BY id")]


_WORKSPACE_AND_SUBSCRIPTION = (
    "SELECT w.*, s.workspace_id, s.plan_id, s.status, s.current_period_start, s.current_period_end,"
    " s.cancel_at_period_end, p.name AS plan_name, p.price AS plan_price,"
    " EXISTS (SELECT 1 FROM subscription_addons sa WHERE sa.workspace_id = w.id) AS has_addons"
    " FROM workspaces w LEFT JOIN subscriptions s ON s.workspace_id = w.id LEFT JOIN plans p ON p.id = s.plan_id"
    " WHERE w.id = ?"
)


def get_workspace_info(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    """GET /v1/workspace: the workspace and its billing (the hot read: three queries in all)."""
    row = conn.execute(_WORKSPACE_AND_SUBSCRIPTION, (workspace_id,)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return {
        "workspace": workspace_view(row),
        "billing": {"subscription": billing.subscription_view(conn, row),
                    "resources": billing.resources(conn, workspace_id)},
    }


def update_workspace(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """PATCH /v1/workspace: name and conversion_tracking required, interaction_tracking optional."""
    body = require_object(body, INVALID_BODY)
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise MktError(400, "The member 'name' must be a string.")
    name = _check_name(name)
    if "conversion_tracking" not in body or body["conversion_tracking"] is None:
        raise MktError(400, "The member 'conversion_tracking' is required.")
    conversion = member(body, "conversion_tracking", bool)
    interaction = member(body, "interaction_tracking", bool)
    zone = check_timezone(body["timezone"]) if body.get("timezone") is not None else None
    with transaction(conn):
        row = _row(conn, workspace_id)
        if interaction is None:
            interaction = bool(row["interaction_tracking"])
        if conversion:
            if not billing.plan_of(conn, workspace_id)["conversion_tracking"]:
                raise MktError(400, NO_CONVERSION_PLAN)
            if not interaction:
                raise MktError(400, CONVERSION_NEEDS_INTERACTION)
        conn.execute(
            "UPDATE workspaces SET name = ?, conversion_tracking = ?, interaction_tracking = ? WHERE id = ?",
            (name, int(conversion), int(interaction), workspace_id),
        )
        if zone is not None:
            conn.execute("UPDATE workspaces SET timezone = ? WHERE id = ?", (zone, workspace_id))
        return workspace_view(_row(conn, workspace_id))


def check_timezone(value: Any) -> str:
    """A workspace time zone: an IANA name zoneinfo knows, in its own spelling."""
    from marketing_cli.kernel.localtime import canonical_zone

    zone = canonical_zone(value)
    if zone is None:
        raise MktError(400, BAD_TIMEZONE.format(value=value))
    return zone


def workspace_timezone(conn: sqlite3.Connection, workspace_id: int) -> str:
    """The workspace's zone: where times typed without an offset are read, and the last
    fallback of a contact's zone (services/contacts/zones.py)."""
    row = conn.execute("SELECT timezone FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    return row[0] if row is not None and row[0] else "UTC"


def read_typed_time(conn: sqlite3.Connection, workspace_id: int, text: str) -> str:
    """A time as a person types it (`2026-12-01 09:00` in the workspace's zone, or with an
    offset) as the RFC 3339 UTC instant understood; 400 saying which forms are read."""
    from marketing_cli.kernel.localtime import parse_typed_time

    try:
        return clock.format_ts(parse_typed_time(text, workspace_timezone(conn, workspace_id)))
    except ValueError as exc:
        raise MktError(400, str(exc)) from None


def get_operator_settings(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    from marketing_cli.services.account.rates import DEFAULT_MARKUP

    row = _row(conn, workspace_id)
    return {
        "sms_markup": row["sms_markup"] or str(DEFAULT_MARKUP),
        "allow_contacts_without_email": bool(row["allow_contacts_without_email"]),
        "sms_sender_id": row["sms_sender_id"],
        "tracking_url": tracking_base_url(conn, workspace_id),
    }


DEFAULT_TRACKING_URL = "http://127.0.0.1:8000"


def parse_tracking_url(value: str) -> str:
    """An http(s) base URL with a host and no query or fragment, without its trailing slash."""
    from urllib.parse import urlsplit

    parts = urlsplit(value.strip()) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise MktError(400, f"The tracking URL must be an http:// or https:// URL without a query, not '{value}'.")
    return value.strip().rstrip("/")


def tracking_base_url(conn: sqlite3.Connection, workspace_id: int) -> str:
    """Where tracking, unsubscribe and webhook URLs of the workspace begin (CONTRACT section 7)."""
    import os

    row = conn.execute("SELECT tracking_url FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    if row is not None and row[0]:
        return row[0]
    return (os.environ.get("MKT_PUBLIC_URL") or DEFAULT_TRACKING_URL).rstrip("/")


def parse_markup(value: Any) -> Decimal:
    try:
        markup = Decimal(str(value))
    except InvalidOperation:
        markup = Decimal("NaN")
    if not markup.is_finite() or not Decimal("0") < markup <= Decimal("100"):
        raise MktError(400, f"The SMS markup must be a number greater than 0 and at most 100, not '{value}'.")
    return markup


def update_operator_settings(
    conn: sqlite3.Connection,
    workspace_id: int,
    *,
    sms_markup: str | None = None,
    allow_contacts_without_email: bool | None = None,
    tracking_url: str | None = None,
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`mkt workspace update`: operator settings, and optionally the PATCH members too.

    `changes` holds PATCH /v1/workspace members; members it lacks keep their values.
    Everything happens in one transaction: a rejected member writes nothing.
    """
    markup = parse_markup(sms_markup) if sms_markup is not None else None
    tracking = parse_tracking_url(tracking_url) if tracking_url is not None else None
    with transaction(conn):
        row = _row(conn, workspace_id)
        if markup is not None:
            conn.execute("UPDATE workspaces SET sms_markup = ? WHERE id = ?", (str(markup), workspace_id))
        if tracking is not None:
            conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (tracking, workspace_id))
        if allow_contacts_without_email is not None:
            conn.execute(
                "UPDATE workspaces SET allow_contacts_without_email = ? WHERE id = ?",
                (int(allow_contacts_without_email), workspace_id),
            )
        if changes:
            body = {"name": row["name"], "conversion_tracking": bool(row["conversion_tracking"]), **changes}
            return update_workspace(conn, workspace_id, body)
        return workspace_view(_row(conn, workspace_id))

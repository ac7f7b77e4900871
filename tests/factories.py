"""Test data built through the services, never through raw SQL that can drift from the schema.

Each helper takes a connection and returns what its service returns. Areas add their own
helpers here (one section each), so no test module needs to import another.
"""

from __future__ import annotations

import sqlite3
from typing import Any


def workspace(conn: sqlite3.Connection, name: str = "Test workspace") -> dict[str, Any]:
    """A workspace with its first key: {"id", "api_key", ...Workspace}."""
    from marketing_cli.services import workspaces

    created = workspaces.create_workspace(conn, name)
    return {"id": created["workspace"]["id"], "api_key": created["api_key"], **created["workspace"]}


def tag(conn: sqlite3.Connection, workspace_id: int, name: str) -> int:
    from marketing_cli.services import tags

    return tags.create_tag(conn, workspace_id, {"name": name})["id"]


def field(conn: sqlite3.Connection, workspace_id: int, merge_tag: str, type_: str = "TEXT", **extra: Any) -> int:
    from marketing_cli.services import fields

    body = {"label": extra.pop("label", merge_tag.replace("_", " ").title()), "merge_tag": merge_tag,
            "type": type_, **extra}
    return fields.create_field(conn, workspace_id, body)["id"]


def contact(conn: sqlite3.Connection, workspace_id: int, email: str | None = None, *,
            status: str = "SUBSCRIBED", tags: list[int] | None = None, **values: Any) -> dict[str, Any]:
    """A contact made by POST /v1/contacts/upsert's service; `values` are merge_tag=value."""
    from marketing_cli.services import contacts

    body: dict[str, Any] = {"fields": values, "status": status}
    if email is not None:
        body["email_address"] = email
    if "phone_number" in values:
        body["phone_number"] = values.pop("phone_number")
    if tags:
        body["tags"] = tags
    return contacts.upsert_contact(conn, workspace_id, body)


def segment(conn: sqlite3.Connection, workspace_id: int, name: str, filters: dict[str, Any]) -> dict[str, Any]:
    from marketing_cli.services import segments

    return segments.create_segment(conn, workspace_id, {"name": name, "filters": filters})


# --- shared test helpers (harden-data): no test module imports another -------------------

def error_of(response: Any) -> tuple[int, str]:
    """(status, message) of an error response, checking the CONTRACT body shape."""
    body = response.json()
    assert set(body) == {"data", "error"} and body["data"] is None, body
    assert set(body["error"]) == {"status", "message"}, body
    assert body["error"]["status"] == response.status_code
    return response.status_code, body["error"]["message"]

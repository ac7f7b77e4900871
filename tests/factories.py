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


# --- SMS campaigns -------------------------------------------------------------------

SMS_TEXT = "Hi {{contact.first_name}}, our autumn sale starts today. Reply STOP to opt out."


def sms_ready(conn: sqlite3.Connection, workspace_id: int, *, balance: str | None = "50",
              sender: str | None = "ACME") -> None:
    """A phone_number field, and optionally a sender ID and a prepaid balance."""
    from marketing_cli.services import sms_ledger

    if conn.execute("SELECT 1 FROM fields WHERE workspace_id = ? AND merge_tag = 'phone_number'",
                    (workspace_id,)).fetchone() is None:
        field(conn, workspace_id, "phone_number", label="Phone")
    if sender:
        sms_ledger.set_sender_id(conn, workspace_id, sender)
    if balance:
        sms_ledger.add_balance(conn, workspace_id, balance)


def sms_contacts(conn: sqlite3.Connection, workspace_id: int, phones: list[str], **values: Any) -> list[dict[str, Any]]:
    """One contact per number (emails made up from the number)."""
    return [contact(conn, workspace_id, f"p{phone.lstrip('+')}@example.com", phone_number=phone, **values)
            for phone in phones]


def sms_campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Autumn sale", *,
                 message: str | None = SMS_TEXT, audience: Any = None) -> dict[str, Any]:
    """A DRAFT SMS campaign with a message and (by default) the entire audience."""
    from marketing_cli.services import sms_campaigns

    created = sms_campaigns.create_campaign(conn, workspace_id, {"name": name})
    body: dict[str, Any] = {"audience": audience or [{"type": "ENTIRE_AUDIENCE"}]}
    if message is not None:
        body["message"] = message
    return sms_campaigns.update_campaign(conn, workspace_id, created["id"], body)

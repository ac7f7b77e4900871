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


# --- Sending domains and sender identities (domains work) -------------------------------


def domain(conn: sqlite3.Connection, workspace_id: int, name: str = "example.com") -> dict[str, Any]:
    """A sending domain (unverified) with its DNS records: the Domain of the API.

    The free plan allows one domain; call `allow_domains` first for more.
    """
    from marketing_cli.services import domains

    return domains.add_domain(conn, workspace_id, name)


def allow_domains(conn: sqlite3.Connection, workspace_id: int, n: int = 10) -> None:
    from marketing_cli.services import billing

    billing.set_allowance(conn, workspace_id, "domains", n)


def sender(conn: sqlite3.Connection, workspace_id: int, domain_id: int | None = None, local_part: str = "news",
           display_name: str = "News Team") -> dict[str, Any]:
    """A sender identity (as get_sender_identity returns it); adds example.com when no domain is given."""
    from marketing_cli.services import senders

    if domain_id is None:
        domain_id = domain(conn, workspace_id)["id"]
    return senders.add_sender_identity(conn, workspace_id,
                                       {"domain_id": domain_id, "local_part": local_part,
                                        "display_name": display_name})


def verified_domain(conn: sqlite3.Connection, workspace_id: int, dns: Any, name: str = "example.com") -> dict[str, Any]:
    """A domain whose records `dns` (the conftest `dns_server` fixture) publishes, verified
    through the real DNS check."""
    from marketing_cli.services import domains

    added = domain(conn, workspace_id, name)
    dns.publish(added)
    return domains.verify_domain(conn, workspace_id, added["id"])

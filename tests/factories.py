"""Test data built through the services, never through raw SQL that can drift from the schema.

Each helper takes a connection and returns what its service returns. Areas add their own
helpers here (one section each), so no test module needs to import another.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli import clock, ids
from marketing_cli.ids import new_id
from marketing_cli.services import workspaces


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


# --- rows written directly (harden-data) -------------------------------------------------
# Contacts with engagement counters (deliveries, opens, clicks, last activity) and back-dated
# timestamps, which no service writes yet (the campaign and tracking work will): the
# segment filter, audience, search and event tests need them. They follow schema.sql and
# the storage design in docs/architecture.md; everything else above goes through services.

NOW = clock.utcnow()


def ago(**kw: float) -> str:
    return clock.format_ts(NOW - timedelta(**kw))


def filter_field(conn: sqlite3.Connection, ws: int, merge_tag: str, ftype: str, definition: str | None = None,
              default_region: str | None = None) -> int:
    now = clock.now()
    fid = conn.execute(
        "INSERT INTO fields (workspace_id, label, merge_tag, type, definition, default_region, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (ws, merge_tag.title(), merge_tag, ftype, definition, default_region, now, now)).lastrowid
    if merge_tag != "phone_number":
        conn.execute(f"""CREATE INDEX contacts_field_{fid} ON contacts(workspace_id, json_extract(data, '$."{fid}"'))""")
    return fid


def filter_tag(conn: sqlite3.Connection, ws: int, name: str) -> int:
    return conn.execute("INSERT INTO tags (workspace_id, name, created_at) VALUES (?, ?, ?)",
                        (ws, name, clock.now())).lastrowid


def filter_contact(conn: sqlite3.Connection, ws: int, email: str | None, *, phone: str | None = None,
                status: str = "SUBSCRIBED", sms_status: str | None = None, data: dict[int, Any] | None = None,
                tags: tuple[int, ...] = (), delivered: int = 0, opens: int = 0, clicks: int = 0,
                last_opened: str | None = None, last_clicked: str | None = None) -> str:
    cid = ids.new_id()
    now = clock.now()
    conn.execute(
        "INSERT INTO contacts (id, workspace_id, email, phone, status, sms_status, data, total_delivered,"
        " unique_opens, unique_clicks, total_opens, total_clicks, last_opened_at, last_clicked_at,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (cid, ws, email, phone, status, sms_status, json.dumps({str(k): v for k, v in (data or {}).items()}),
         delivered, opens, clicks, opens, clicks, last_opened, last_clicked, now, now))
    conn.executemany("INSERT INTO contact_tags (contact_id, tag_id) VALUES (?, ?)", [(cid, t) for t in tags])
    return cid


def build_filter_world(conn: sqlite3.Connection) -> dict[str, Any]:
    """(tests/test_segment_filters.py and the segment and audience tests) Two workspaces; in the first, five contacts (a-e) covering every operator."""
    ws = workspaces.create_workspace(conn, "Segments")["workspace"]["id"]
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    f = {
        "email": conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'email_address'",
                              (ws,)).fetchone()[0],
        "city": filter_field(conn, ws, "city", "TEXT"),
        "age": filter_field(conn, ws, "age", "NUMBER"),
        "vip": filter_field(conn, ws, "vip", "BOOLEAN"),
        "born": filter_field(conn, ws, "born", "DATE"),
        "plan": filter_field(conn, ws, "plan", "DROPDOWN_SINGLE", "free,pro,team"),
        "langs": filter_field(conn, ws, "langs", "DROPDOWN_MULTIPLE", "en,fr,de"),
        "country": filter_field(conn, ws, "country", "COUNTRY"),
        "phone": filter_field(conn, ws, "phone_number", "TEXT", default_region="GB"),
    }
    t = {name: filter_tag(conn, ws, name) for name in ("t1", "t2", "t3")}
    t["other"] = filter_tag(conn, other, "t1")
    c = {}
    c["a"] = filter_contact(conn, ws, "a@x.io", phone="+447911123401", data={
        f["city"]: "Paris", f["age"]: 30, f["vip"]: True, f["born"]: "1990-05-01", f["plan"]: "pro",
        f["langs"]: ["en", "fr"], f["country"]: "FR"}, tags=(t["t1"], t["t2"]),
        delivered=10, opens=5, clicks=1, last_opened=ago(days=2), last_clicked=ago(days=1))
    c["b"] = filter_contact(conn, ws, "b@x.io", sms_status="UNSUBSCRIBED", phone="+447911123402", data={
        f["city"]: "paris south", f["age"]: 45.5, f["vip"]: False, f["born"]: "1980-01-01", f["plan"]: "free",
        f["langs"]: ["en"], f["country"]: "US"}, tags=(t["t1"],),
        delivered=4, opens=1, clicks=0, last_opened=ago(days=300))
    c["c"] = filter_contact(conn, ws, "c@x.io", status="UNSUBSCRIBED", data={
        f["city"]: "Lyon", f["age"]: 18, f["born"]: "2000-12-31", f["plan"]: "team", f["langs"]: ["de"],
        f["country"]: "DE"})
    c["d"] = filter_contact(conn, ws, "d@x.io", phone="+447911123404", tags=(t["t2"],), delivered=2, opens=2,
                         clicks=2, last_clicked=ago(hours=1))
    c["e"] = filter_contact(conn, ws, None, phone="+447911123405", sms_status="SUBSCRIBED", data={
        f["city"]: "50%_deal", f["langs"]: ["en", "fr", "de"]}, tags=(t["t1"], t["t2"], t["t3"]),
        delivered=3, opens=1, clicks=1, last_opened=ago(days=40), last_clicked=ago(days=20))
    # A contact of another workspace that matches nearly everything: it must never show up.
    filter_contact(conn, other, "a@x.io", data={f["city"]: "Paris", f["age"]: 30}, tags=(t["other"],),
                delivered=1, opens=1, last_opened=ago(hours=1))
    return {"ws": ws, "other": other, "f": f, "t": t, "c": c}


ENGAGED = {"condition": "AND", "filters": [{"type": "open_rate", "operator": "gte", "value": 50}]}


def row_field(conn: Any, workspace_id: int, merge_tag: str, type: str = "TEXT", *,
              definition: str | None = None, default_region: str | None = None) -> int:
    now = clock.now()
    field_id = conn.execute(
        "INSERT INTO fields (workspace_id, label, merge_tag, type, definition, default_region, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (workspace_id, merge_tag.replace("_", " ").title(), merge_tag, type, definition, default_region, now, now),
    ).lastrowid
    conn.execute(f"CREATE INDEX IF NOT EXISTS contacts_field_{field_id} ON contacts(workspace_id,"
                 f" json_extract(data, '$.\"{field_id}\"'))")
    return field_id


def row_contact(conn: Any, workspace_id: int, *, email: str | None = None, phone: str | None = None,
                data: dict[str, Any] | None = None, status: str = "SUBSCRIBED",
                created_at: str | None = None, updated_at: str | None = None, tags: list[int] = ()) -> str:
    contact_id = new_id()
    now = created_at or clock.now()
    conn.execute(
        "INSERT INTO contacts (id, workspace_id, email, phone, status, data, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (contact_id, workspace_id, email, phone, status, json.dumps(data or {}), now, updated_at or now),
    )
    for tag_id in tags:
        conn.execute("INSERT INTO contact_tags (contact_id, tag_id) VALUES (?, ?)", (contact_id, tag_id))
    return contact_id


def row_tag(conn: Any, workspace_id: int, name: str) -> int:
    return conn.execute("INSERT INTO tags (workspace_id, name, created_at) VALUES (?, ?, ?)",
                        (workspace_id, name, clock.now())).lastrowid

"""The API view of a contact: rows of `contacts` turned into the shapes the endpoints answer.

Storage (schema.sql step 2): email and phone are columns (lookup keys, normalised by
values.py); every other field value lives in `contacts.data`, a JSON object keyed by the
field's id as text. `render_contacts` turns rows back into the API's shapes, keyed by
merge tag, with one query for the tags of all rows. `data` / `fields` list every field of
the workspace, null when the contact has no value (docs/api.md, "Contacts").

Every reader of contacts renders through here: the contact endpoints (records.py),
search, segment members and the JSON Lines export.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, FieldMap, load_fields

SHAPES = ("full", "detail", "search", "by_phone")


def _values_by_tag(fields: FieldMap, row: sqlite3.Row) -> dict[str, Any]:
    raw = row["data"]
    stored = json.loads(raw) if raw and raw != "{}" else {}
    out: dict[str, Any] = {}
    for f in fields.by_tag.values():
        if f.merge_tag == EMAIL_TAG:
            out[EMAIL_TAG] = row["email"]
        elif f.merge_tag == PHONE_TAG:
            out[PHONE_TAG] = row["phone"]
        else:
            out[f.merge_tag] = stored.get(str(f.id))
    return out


def _tags_of(conn: sqlite3.Connection, contact_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    tags: dict[str, list[dict[str, Any]]] = {cid: [] for cid in contact_ids}
    if not contact_ids:
        return tags
    for r in conn.execute(
        "SELECT ct.contact_id, t.id, t.name FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id"
        " WHERE ct.contact_id IN (SELECT value FROM json_each(?)) ORDER BY ct.contact_id, t.id",
        (json.dumps(contact_ids),),
    ):
        tags[r["contact_id"]].append({"id": r["id"], "name": r["name"]})
    return tags


def render_contacts(conn: sqlite3.Connection, workspace_id: int, rows: Sequence[sqlite3.Row],
                    shape: str = "full", fields: FieldMap | None = None) -> list[dict[str, Any]]:
    """The API view of contact rows (`SELECT * FROM contacts ...` rows of this workspace).

    shape: "full" (create, upsert, tags add/remove), "detail" (GET by id: full plus
    last_opened_at/last_clicked_at), "search" (no sms_status, no score), "by_phone"
    (values under `fields`). One query loads the tags of all rows.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown contact shape {shape!r}")
    fields = fields or load_fields(conn, workspace_id)
    tags = _tags_of(conn, [r["id"] for r in rows])
    out = []
    for r in rows:
        view: dict[str, Any] = {"id": r["id"], "status": r["status"]}
        if shape != "search":
            view["sms_status"] = r["sms_status"] or "SUBSCRIBED"
            view["score"] = r["score"]
        view["tags"] = tags[r["id"]]
        view["fields" if shape == "by_phone" else "data"] = _values_by_tag(fields, r)
        if shape != "by_phone":
            view["statistics"] = {
                "total_opens": r["total_opens"],
                "total_clicks": r["total_clicks"],
                "total_bounces": r["total_bounces"],
                "total_delivered": r["total_delivered"],
            }
        if shape != "full":
            view["last_opened_at"] = r["last_opened_at"]
            view["last_clicked_at"] = r["last_clicked_at"]
        view["created_at"] = r["created_at"]
        view["updated_at"] = r["updated_at"]
        out.append(view)
    return out


def render_contact(conn: sqlite3.Connection, workspace_id: int, contact_id: str, shape: str,
                   fields: FieldMap | None = None) -> dict[str, Any]:
    """The view of one contact known to exist (just written in the caller's transaction)."""
    row = conn.execute("SELECT * FROM contacts WHERE id = ? AND workspace_id = ?",
                       (contact_id, workspace_id)).fetchone()
    return render_contacts(conn, workspace_id, [row], shape, fields)[0]

"""Deleting what picks contacts: tags, fields and segments (DELETE /v1/tags|fields|segments/{id}).

A tag leaves its contacts in one DELETE of its `contact_tags` rows: no TAG_REMOVED event is
appended (a flow reacting to thousands of removals at once is not what deleting a typo'd tag
means), and the contacts' `updated_at` does not move. A field leaves every contact's `data` in
one UPDATE (phone_number's values are the `phone` column: it is emptied) and its expression
index is dropped in the same transaction; a contact's kept time zone (contacts/zone_columns.py) is
marked stale only when the field was the timezone field or the phone number, the two it is
read from. A segment goes with its queued count job and the segment-trigger state of flows
that no longer use it. Nothing is deleted while uses.py finds a user (409 naming it).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.services.contacts import fields, io_lock, segments, values, zone_columns
from marketing_cli.services.deletion import Removal, deleted, in_use, not_found, plural, uses
from marketing_cli.storage import field_sql
from marketing_cli.storage.db import transaction

TAG_INVALID_ID = "Please provide a valid tag ID."
FIELD_IMMUTABLE = "This field is immutable and cannot be deleted."


# --- tags --------------------------------------------------------------------------------------

def remove_tag(conn: sqlite3.Connection, workspace_id: int, tag_id: Any) -> Removal:
    """The tag, and its place on every contact (one statement, no events)."""
    tag_id = parse_int_id(tag_id, TAG_INVALID_ID)
    with transaction(conn):
        row = conn.execute("SELECT id, name FROM tags WHERE id = ? AND workspace_id = ?",
                           (tag_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        user = uses.tag_user(conn, workspace_id, tag_id)
        if user:
            raise in_use(user)
        tagged = conn.execute("DELETE FROM contact_tags WHERE tag_id = ?", (tag_id,)).rowcount
        conn.execute("DELETE FROM tags WHERE id = ?", (tag_id,))
    return deleted(tag_id, f"Tag {row['name']} removed from {plural(tagged, 'contact')}.")


def delete_tag(conn: sqlite3.Connection, workspace_id: int, tag_id: Any) -> dict[str, Any]:
    """DELETE /v1/tags/{id}."""
    return remove_tag(conn, workspace_id, tag_id).data


# --- fields ------------------------------------------------------------------------------------

def _clear_values(conn: sqlite3.Connection, workspace_id: int, field: sqlite3.Row) -> int:
    """Every contact's value of the field gone, in one statement; how many contacts had one."""
    if field["merge_tag"] == values.PHONE_TAG:
        return conn.execute("UPDATE contacts SET phone = NULL, zone_phone_set = NULL, zone_cached = NULL"
                            " WHERE workspace_id = ? AND phone IS NOT NULL", (workspace_id,)).rowcount
    # The index's own expression, so the statement reads the field's partial index, not every contact.
    has_value = f"{field_sql.index_expr(conn, field['id'])} IS NOT NULL"
    zone = "NULL" if field["merge_tag"] == values.TIMEZONE_TAG else zone_columns.KEEP.format(c="contacts")
    return conn.execute(f"UPDATE contacts SET data = {field_sql.remove_value_expr(conn, field['id'])},"
                        f" zone_cached = {zone} WHERE workspace_id = ? AND {has_value}", (workspace_id,)).rowcount


def remove_field(conn: sqlite3.Connection, workspace_id: int, field_id: Any) -> Removal:
    """The field, its values on every contact and its index."""
    field_id = parse_int_id(field_id, fields.NOT_FOUND, 404)
    with transaction(conn):
        row = conn.execute("SELECT * FROM fields WHERE id = ? AND workspace_id = ?", (field_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        if row["immutable"]:
            raise MktError(400, FIELD_IMMUTABLE)
        if io_lock.io_in_progress(conn, workspace_id):
            raise in_use(fields.IO_IN_PROGRESS)
        user = uses.field_user(conn, workspace_id, row)
        if user:
            raise in_use(user)
        cleared = _clear_values(conn, workspace_id, row)
        field_sql.drop_index(conn, field_id)
        conn.execute("DELETE FROM fields WHERE id = ?", (field_id,))
    return deleted(field_id, f"Field {row['merge_tag']}: values removed from {plural(cleared, 'contact')}.")


def delete_field(conn: sqlite3.Connection, workspace_id: int, field_id: Any) -> dict[str, Any]:
    """DELETE /v1/fields/{id}."""
    return remove_field(conn, workspace_id, field_id).data


# --- segments ----------------------------------------------------------------------------------

def remove_segment(conn: sqlite3.Connection, workspace_id: int, segment_id: Any) -> Removal:
    """The segment (its members are never stored: no contact changes)."""
    segment_id = segments.parse_segment_id(segment_id)
    with transaction(conn):
        row = conn.execute("SELECT id, name FROM segments WHERE id = ? AND workspace_id = ?",
                           (segment_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        user = uses.segment_user(conn, workspace_id, segment_id)
        if user:
            raise in_use(user)
        conn.execute("DELETE FROM jobs WHERE dedupe_key = ? AND status = 'queued'", (segments.count_key(segment_id),))
        conn.execute("DELETE FROM automation_segment_state WHERE segment_id = ? AND automation_id IN"
                     " (SELECT id FROM automations WHERE workspace_id = ?)", (segment_id, workspace_id))
        conn.execute("DELETE FROM segments WHERE id = ?", (segment_id,))
    return deleted(segment_id, f"Segment {row['name']} deleted; no contact changed.")


def delete_segment(conn: sqlite3.Connection, workspace_id: int, segment_id: Any) -> dict[str, Any]:
    """DELETE /v1/segments/{id}."""
    return remove_segment(conn, workspace_id, segment_id).data

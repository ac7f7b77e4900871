"""Contact field definitions: POST /v1/fields, PATCH /v1/fields/:id, GET /v1/fields.

Every 400 the specification lists for these endpoints carries the one message
`Validation error`; `FieldValidationError.detail` says which rule failed, so the CLI can
tell a person (the API body keeps the specification's exact text).

Creating a field also creates its expression index on
`json_extract(contacts.data, '$."<id>"')` in the same transaction (the id is our own
integer, never user text), so filters on the field are index lookups from the start.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.kernel.inputs import member
from marketing_cli.services.contacts import values
from marketing_cli.storage import field_sql
from marketing_cli.storage.db import transaction

VALIDATION = "Validation error"
NOT_FOUND = "We were unable to find the field."
IMMUTABLE = "This field is immutable and cannot be updated."
TYPE_CHANGE = "The type of the field cannot be changed."
IO_IN_PROGRESS = "An import or export is currently in progress."

_MERGE_TAG = re.compile(r"[a-z_]{2,16}")


class FieldValidationError(MktError):
    """400 `Validation error`, with the rule that failed in `detail`."""

    def __init__(self, detail: str) -> None:
        super().__init__(400, VALIDATION, detail)


def field_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "label": row["label"],
        "merge_tag": row["merge_tag"],
        "type": row["type"],
        "definition": row["definition"],
        "default_value": row["default_value"],
        "order": row["order"],
        "immutable": bool(row["immutable"]),
        "required": bool(row["required"]),
        "default_region": row["default_region"],
    }


def list_fields(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    """GET /v1/fields: every field of the workspace in display order."""
    return [field_view(r) for r in conn.execute(
        'SELECT * FROM fields WHERE workspace_id = ? ORDER BY "order", id', (workspace_id,))]


def _row(conn: sqlite3.Connection, workspace_id: int, field_id: Any) -> sqlite3.Row:
    field_id = parse_int_id(field_id, NOT_FOUND, 404)
    row = conn.execute("SELECT * FROM fields WHERE workspace_id = ? AND id = ?", (workspace_id, field_id)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row


def get_field(conn: sqlite3.Connection, workspace_id: int, field_id: Any) -> dict[str, Any]:
    return field_view(_row(conn, workspace_id, field_id))


def io_in_progress(conn: sqlite3.Connection, workspace_id: int) -> bool:
    """Whether a live contact import or export holds the workspace's lock right now."""
    from marketing_cli.services.contacts.io_lock import io_in_progress as held

    return held(conn, workspace_id)


def _body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise FieldValidationError("The request body must be a JSON object.")
    return body


def _check(conn: sqlite3.Connection, workspace_id: int, body: dict[str, Any], *, type_: str,
           current: sqlite3.Row | None) -> dict[str, Any]:
    """The columns to write, from a create or update body (types already settled).

    Longer than most (about 65 lines) on purpose: it reads as the list of the field rules
    in the order docs/api.md gives them, one check after another, each with its message.
    """
    label = member(body, "label", str)
    if label is None or not 1 <= len(label.strip()) <= 32:
        raise FieldValidationError("label is required and must be 1-32 characters.")
    label = label.strip()
    merge_tag = member(body, "merge_tag", str)
    if merge_tag is None or not _MERGE_TAG.fullmatch(merge_tag):
        raise FieldValidationError("merge_tag is required: 2-16 lowercase letters and underscores.")
    if member(body, "immutable", bool):
        raise FieldValidationError("Immutable fields cannot be created or made immutable through the API.")

    definition = member(body, "definition", str)
    if type_ in values.DROPDOWN_TYPES:
        if definition is None or len(values.parse_options(definition)) < 2:
            raise FieldValidationError(f"{type_} needs a definition of at least 2 unique comma-separated options.")
        definition = definition.strip()
    else:
        definition = None

    keep = current is not None
    default_value = member(body, "default_value", str) if "default_value" in body or not keep \
        else current["default_value"]
    required = member(body, "required", bool)
    if required is None:
        required = bool(current["required"]) if keep and "required" not in body else False
    region = member(body, "default_region", str) if "default_region" in body or not keep \
        else current["default_region"]
    if region is not None:
        region = region.strip().upper()
        if not values.is_phone_region(region):
            raise FieldValidationError("default_region must be an ISO 3166-1 alpha-2 country code with a "
                                       "telephone numbering plan (for example US), or null.")

    if values.PHONE_TAG in (merge_tag, current and current["merge_tag"]):
        if current is not None and merge_tag != current["merge_tag"]:
            raise FieldValidationError("The phone_number merge tag cannot be given to or taken from another field.")
        if type_ != "TEXT":
            raise FieldValidationError("The phone_number field must be of type TEXT.")
    if values.TIMEZONE_TAG in (merge_tag, current and current["merge_tag"]):
        if current is not None and merge_tag != current["merge_tag"]:
            raise FieldValidationError("The timezone merge tag cannot be given to or taken from another field.")
        if type_ != "TEXT":
            raise FieldValidationError("The timezone field must be of type TEXT.")

    if default_value is not None and default_value.strip():
        probe = values.Field(id=0, label=label, merge_tag=merge_tag, type=type_,
                             options=values.parse_options(definition), default_value=None, required=False,
                             immutable=False, default_region=region, order=0)
        try:
            if merge_tag == values.PHONE_TAG:
                values.normalize_phone(default_value, region)
            else:
                values.normalize_value(probe, default_value)
        except ValueError as exc:
            raise FieldValidationError(f"default_value is not a valid value: {exc}") from None
    elif default_value is not None:
        default_value = None

    clash = conn.execute(
        "SELECT label, merge_tag FROM fields WHERE workspace_id = ? AND id IS NOT ?"
        " AND (lower(label) = lower(?) OR merge_tag = ?) LIMIT 1",
        (workspace_id, current["id"] if current else None, label, merge_tag),
    ).fetchone()
    if clash is not None:
        which = "merge_tag" if clash["merge_tag"] == merge_tag else "label"
        raise FieldValidationError(f"Another field already has this {which}.")
    return {"label": label, "merge_tag": merge_tag, "type": type_, "definition": definition,
            "default_value": default_value, "required": int(required), "default_region": region}


def create_field(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/fields: a new custom field and its expression index."""
    body = _body(body)
    type_ = member(body, "type", str)
    if type_ not in values.FIELD_TYPES:
        raise FieldValidationError(f"type is required: one of {', '.join(values.FIELD_TYPES)}.")
    with transaction(conn):
        if io_in_progress(conn, workspace_id):
            raise FieldValidationError(IO_IN_PROGRESS)
        cols = _check(conn, workspace_id, body, type_=type_, current=None)
        now = clock.now()
        order = conn.execute('SELECT coalesce(max("order"), 0) + 1 FROM fields WHERE workspace_id = ?',
                             (workspace_id,)).fetchone()[0]
        field_id = conn.execute(
            'INSERT INTO fields (workspace_id, label, merge_tag, type, definition, default_value, "order",'
            " immutable, required, default_region, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
            (workspace_id, cols["label"], cols["merge_tag"], type_, cols["definition"], cols["default_value"],
             order, cols["required"], cols["default_region"], now, now),
        ).lastrowid
        if cols["merge_tag"] != values.PHONE_TAG:  # phone numbers live in contacts.phone, indexed there
            ensure_field_index(conn, field_id)
        if cols["merge_tag"] == values.TIMEZONE_TAG:
            # The contacts' kept zone (contacts/zone_columns.py): a new field has no values, so
            # every kept zone_field (NULL) stays right; a contact whose data holds the id anyway
            # (none should) is read anew. The field's index, just built, finds them.
            conn.execute("UPDATE contacts SET zone_cached = NULL WHERE workspace_id = ? AND zone_cached IS NOT NULL"
                         f" AND {field_sql.index_expr(conn, field_id)} IS NOT NULL", (workspace_id,))
        return get_field(conn, workspace_id, field_id)


def ensure_field_index(conn: sqlite3.Connection, field_id: int) -> None:
    """The expression index for one field's values (marketing_cli/storage/field_sql.py builds it)."""
    field_sql.create_index(conn, field_id)


def update_field(conn: sqlite3.Connection, workspace_id: int, field_id: Any, body: Any) -> dict[str, Any]:
    """PATCH /v1/fields/:id: label, merge_tag and type required; the type cannot change.

    Optional members left out keep their values (definition stays required for dropdowns).
    """
    body = _body(body)
    with transaction(conn):
        current = _row(conn, workspace_id, field_id)
        if current["immutable"]:
            raise MktError(400, IMMUTABLE)
        type_ = member(body, "type", str)
        if type_ is None:
            raise FieldValidationError("type is required (it must equal the field's type).")
        if type_ != current["type"]:
            raise MktError(400, TYPE_CHANGE)
        if io_in_progress(conn, workspace_id):
            raise FieldValidationError(IO_IN_PROGRESS)
        cols = _check(conn, workspace_id, body, type_=type_, current=current)
        conn.execute(
            "UPDATE fields SET label = ?, merge_tag = ?, definition = ?, default_value = ?, required = ?,"
            " default_region = ?, updated_at = ? WHERE id = ? AND workspace_id = ?",
            (cols["label"], cols["merge_tag"], cols["definition"], cols["default_value"], cols["required"],
             cols["default_region"], clock.now(), current["id"], workspace_id),
        )
        return get_field(conn, workspace_id, current["id"])

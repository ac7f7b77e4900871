"""The checks a contact's values pass on their way in through create and upsert.

A body's `fields` (merge tag -> value) become a contact's stored `data` (field id as text ->
value in its stored form, values.py) in steps: every merge tag must be a field of the
workspace, each value is normalised with its field's type, a new contact (or a full
replace) gets the default_value of every field left out, and every required field must
end with a value. Email and phone are normalised to their lookup keys (values.py) with
the specification's messages.

The CSV import checks its rows column by column instead (columns.py, rows.py), with the
same messages and the same setting for contacts without email.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.contacts.values import (
    EMAIL_TAG,
    PHONE_TAG,
    Field,
    FieldMap,
    normalize_email,
    normalize_phone,
    normalize_value,
)

FIELD_REQUIRED = "Field '{label}' is required."
UNKNOWN_MERGE_TAG = "We were unable to find a field with the merge_tag {tag}"
PHONE_INVALID = "phone number is invalid"


def allows_no_email(conn: sqlite3.Connection, workspace_id: int) -> bool:
    """Whether the workspace accepts contacts without an email address (found by phone)."""
    row = conn.execute("SELECT allow_contacts_without_email FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    return bool(row and row[0])


def checked_email(raw: Any) -> str:
    try:
        return normalize_email(raw)
    except ValueError as exc:
        raise MktError(400, str(exc)) from None


def checked_phone(fields: FieldMap, raw: Any, message: str = PHONE_INVALID) -> str:
    assert fields.phone is not None
    try:
        return normalize_phone(raw, fields.phone.default_region)
    except ValueError:
        raise MktError(400, message) from None


def check_merge_tags(fields: FieldMap, given: dict[str, Any]) -> None:
    for tag in given:
        if tag not in fields.by_tag:
            raise MktError(400, UNKNOWN_MERGE_TAG.format(tag=tag))


def parse_values(fields: FieldMap, given: dict[str, Any]) -> dict[str, Any]:
    """{field id as text: stored value or None} for the custom values in `given`."""
    parsed: dict[str, Any] = {}
    for tag, raw in given.items():
        if tag in (EMAIL_TAG, PHONE_TAG):
            continue
        f = fields.by_tag[tag]
        try:
            parsed[str(f.id)] = normalize_value(f, raw)
        except ValueError as exc:
            raise MktError(400, str(exc)) from None
    return parsed


def _default_of(f: Field) -> Any:
    if f.default_value is None or f.merge_tag in (EMAIL_TAG, PHONE_TAG):
        return None
    try:
        return normalize_value(f, f.default_value)
    except ValueError:  # the definition changed since the default was set
        return None


def with_defaults(fields: FieldMap, parsed: dict[str, Any]) -> dict[str, Any]:
    """Create / full replace: the given values plus defaults for fields without one."""
    data = {k: v for k, v in parsed.items() if v is not None}
    for f in fields.by_tag.values():
        key = str(f.id)
        if key not in data:
            default = _default_of(f)
            if default is not None:
                data[key] = default
    return data


def require_fields(fields: FieldMap, data: dict[str, Any], phone: str | None,
                   only: Iterable[str] | None = None) -> None:
    """Every required field (email aside: its own rules) has a value; `only` limits the check."""
    wanted = set(only) if only is not None else None
    for f in fields.by_tag.values():
        if not f.required or f.merge_tag == EMAIL_TAG or (wanted is not None and f.merge_tag not in wanted):
            continue
        has = phone is not None if f.merge_tag == PHONE_TAG else data.get(str(f.id)) is not None
        if not has:
            raise MktError(400, FIELD_REQUIRED.format(label=f.label))

"""A contact named the way a person is named on the command line: its id, its email address or
its phone number (`mkt contacts erase ID|EMAIL|PHONE`, `mkt contacts export-person ...`)."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.services.contacts.records import CONTACT_ID_INVALID
from marketing_cli.services.contacts.values import load_fields, normalize_email, normalize_phone

WHO_REQUIRED = "Please name the contact: its ID, email address or phone number."


def contact_id_of(conn: sqlite3.Connection, workspace_id: int, who: Any, not_found: str) -> str:
    """The id of the workspace's contact `who` names (24 hex characters: an id; with an @: an
    email address; else a phone number, read in the phone_number field's default region
    when it has no +); 404 `not_found` when there is none."""
    if not isinstance(who, str) or not who.strip():
        raise MktError(400, WHO_REQUIRED)
    text = who.strip()
    with contextlib.suppress(MktError):  # 24 hex characters: an id
        return parse_hex_id(text.lower(), CONTACT_ID_INVALID)
    try:
        if "@" in text:
            column, value = "email", normalize_email(text)
        else:
            phone_field = load_fields(conn, workspace_id).phone
            column, value = "phone", normalize_phone(text, phone_field.default_region if phone_field else None)
    except ValueError as exc:
        raise MktError(400, str(exc)) from None
    row = conn.execute(f"SELECT id FROM contacts WHERE workspace_id = ? AND {column} = ?"  # column: ours
                       " ORDER BY created_at, id LIMIT 1", (workspace_id, value)).fetchone()
    if row is None:
        raise MktError(404, not_found)
    return str(row["id"])

"""What a person types for a tag or a contact, resolved to the id the services take.

The API takes ids only: the specification's bodies hold tag ids (integers) and contact ids
(24 hex characters), and a client program has them. People at a terminal know their tags
by name and their contacts by email address or phone number, so every command that takes a
tag or a contact resolves what was typed here first (cli/references.py is the face's side),
then calls the same service the API calls with the id. One resolver for every command keeps
the rules and the messages the same everywhere:

- A tag: a whole number is a tag id when the workspace has a tag with that id, else the
  name of a tag (a tag may be called "2024"); any other text is a tag's name, in any letter
  case (names are unique regardless of case, tags.py). A number that is neither is passed
  on as an id, so the service answers with the message the API gives for it; a name the
  workspace lacks is 400 UNKNOWN_TAG_NAME.
- A contact: 24 hex characters are its id (the service checks that it exists); text with
  an @ is an email address and a number any way it is written (the phone_number field's
  default region reads one without +) is a phone number, both normalised the way create
  and upsert store them and looked up in the workspace. 404 when nobody has it, 400 when
  the text is none of the three.

Both are reads; the write that follows runs in its own transaction as it does for the API.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.services.contacts import values

UNKNOWN_TAG_NAME = "There is no tag named '{name}' in this workspace (`mkt tags list` shows them)."
NOT_A_CONTACT = "'{text}' is not a contact: give its id (24 hex characters), email address or phone number."
NO_CONTACT_WITH_EMAIL = "We couldn't find a contact with the email address {email}."
NO_CONTACT_WITH_PHONE = "We couldn't find a contact with the phone number {phone}."


def tag_ids(conn: sqlite3.Connection, workspace_id: int, refs: Iterable[Any]) -> list[int]:
    """The tag ids that `refs` (ids or names, as typed) name, in the order given."""
    refs = [str(r).strip() for r in refs]
    if not refs:
        return []
    numbers = [n for n in map(parse_digits, refs) if n is not None]
    by_id = {r["id"] for r in conn.execute(
        "SELECT id FROM tags WHERE workspace_id = ? AND id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))",
        (workspace_id, json.dumps(numbers)))} if numbers else set()
    # lower() in SQL, as tags.create_tag compares names (ASCII on SQLite, Unicode on PostgreSQL)
    by_name = {r["ref"]: r["id"] for r in conn.execute(
        "SELECT j.value AS ref, t.id FROM json_each(?) AS j"
        " JOIN tags t ON t.workspace_id = ? AND lower(t.name) = lower(j.value)",
        (json.dumps(refs), workspace_id))}
    found: list[int] = []
    for ref in refs:
        number = parse_digits(ref)
        if number is not None and number in by_id:
            found.append(number)
        elif ref in by_name:
            found.append(by_name[ref])
        elif number is not None:
            found.append(number)  # the service says the id does not exist, as it does for the API
        else:
            raise MktError(400, UNKNOWN_TAG_NAME.format(name=ref))
    return found


def contact_id(conn: sqlite3.Connection, workspace_id: int, ref: Any) -> str:
    """The id of the contact `ref` (an id, an email address or a phone number) names."""
    text = str(ref).strip()
    try:
        return parse_hex_id(text.lower(), NOT_A_CONTACT)
    except MktError:
        pass  # not an id: an email address or a phone number
    if "@" in text:
        try:
            email = values.normalize_email(text)
        except ValueError:
            raise MktError(400, NOT_A_CONTACT.format(text=text)) from None
        row = conn.execute("SELECT id FROM contacts WHERE workspace_id = ? AND email = ?",
                           (workspace_id, email)).fetchone()
        if row is None:
            raise MktError(404, NO_CONTACT_WITH_EMAIL.format(email=email))
        return row["id"]
    phone_field = values.load_fields(conn, workspace_id).phone
    try:
        phone = values.normalize_phone(text, phone_field.default_region if phone_field else None)
    except ValueError:
        raise MktError(400, NOT_A_CONTACT.format(text=text)) from None
    row = values.contact_with_phone(conn, workspace_id, phone, "id, created_at")
    if row is None:
        raise MktError(404, NO_CONTACT_WITH_PHONE.format(phone=phone))
    return row["id"]

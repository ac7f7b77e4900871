"""A contact named the way a person is named on the command line: its id, its email address or
its phone number (`mkt contacts erase ID|EMAIL|PHONE`, `mkt contacts export-person ...`), read
by the command line's one resolver (services/contacts/references.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import references

WHO_REQUIRED = "Please name the contact: its ID, email address or phone number."


def contact_id_of(conn: sqlite3.Connection, workspace_id: int, who: Any) -> str:
    """The id `who` names: an id as given (the caller answers 404 for one that names nothing);
    an email address or a phone number looked up, 404 naming it when no contact has it."""
    if not isinstance(who, str) or not who.strip():
        raise MktError(400, WHO_REQUIRED)
    return references.contact_id(conn, workspace_id, who)

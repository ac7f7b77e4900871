"""Sender identities: `mkt senders` and /v1/sender-identities.

A sender identity is a From address on one of the workspace's own sending domains:
`display_name <local_part@domain_name>`. The domain need not be verified to make one
(test emails work without it); sending a campaign needs it verified, so every identity
says whether its domain is (`domain_verified`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.services.email import domains
from marketing_cli.storage.db import transaction

INVALID_BODY = "Invalid request body."
INVALID_ID = "Please provide a valid sender identity ID."
NOT_FOUND = "We were unable to find the sender identity."
LOCAL_PART_REQUIRED = "Please provide the local part of the sender's address (the part before the @)."
LOCAL_PART_INVALID = "The local part '{local_part}' is not valid in an email address: {reason}"
DISPLAY_NAME_REQUIRED = "Please provide a display name for the sender identity."
DISPLAY_NAME_LENGTH = "The display name must be 100 characters or less."
DISPLAY_NAME_CONTROL = "The display name must not contain line breaks or other control characters."
ADDRESS_TOO_LONG = ("The address {address} is too long: an email address holds at most 254 characters "
                    "({over} too many); use a shorter local part or domain.")
DUPLICATE = "The sender identity {address} already exists in this workspace."
MAX_DISPLAY_NAME = 100
MAX_LOCAL_PART = 64  # RFC 5321
MAX_ADDRESS = 254  # RFC 5321's 256-octet path, less its angle brackets
_STAND_IN_DOMAIN = "example.com"  # any name email-validator accepts: it checks only the local part

_SELECT = (
    "SELECT s.id, s.display_name, s.local_part, s.domain_id, s.created_at, d.domain_name,"
    " d.verified AS domain_verified FROM sender_identities s JOIN domains d ON d.id = s.domain_id"
)


def sender_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "display_name": row["display_name"],
        "local_part": row["local_part"],
        "domain_name": row["domain_name"],
        "domain_id": row["domain_id"],
        "domain_verified": bool(row["domain_verified"]),
        "created_at": row["created_at"],
    }


def _display_name(value: Any) -> str:
    name = value.strip() if isinstance(value, str) else ""
    if not name:
        raise MktError(400, DISPLAY_NAME_REQUIRED)
    if len(name) > MAX_DISPLAY_NAME:
        raise MktError(400, DISPLAY_NAME_LENGTH)
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in name):
        raise MktError(400, DISPLAY_NAME_CONTROL)
    return name


def _local_part(value: Any, domain_name: str) -> str:
    """The local part as written, if email-validator accepts it: ASCII only (mail servers
    without SMTPUTF8 would refuse anything else), no quoted forms, at most 64 characters;
    with the domain, an address of at most 254 characters.

    Only the local part is given to email-validator, on a stand-in domain it accepts. The
    domain was checked when it was added (domains.normalise_domain_name), and it may be a
    reserved name such as `news.example.test` or `mail.localhost`, on which email-validator
    refuses every address whatever its options ("special-use or reserved name"): a staging
    setup against a local SMTP catcher uses exactly those. So whatever email-validator
    refuses here is the local part's fault, and the message says so.
    """
    local = value.strip() if isinstance(value, str) else ""
    if not local:
        raise MktError(400, LOCAL_PART_REQUIRED)
    if "@" in local:
        raise MktError(400, LOCAL_PART_INVALID.format(local_part=local, reason="it must not contain an @."))
    if len(local) > MAX_LOCAL_PART:
        raise MktError(400, LOCAL_PART_INVALID.format(local_part=local, reason="it is longer than 64 characters."))
    from email_validator import EmailNotValidError, validate_email

    try:
        validate_email(f"{local}@{_STAND_IN_DOMAIN}", check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
        raise MktError(400, LOCAL_PART_INVALID.format(local_part=local, reason=str(exc))) from None
    address = f"{local}@{domain_name}"
    if len(address) > MAX_ADDRESS:
        raise MktError(400, ADDRESS_TOO_LONG.format(address=address, over=len(address) - MAX_ADDRESS))
    return local  # as written: email-validator would lower-case it


def add_sender_identity(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """`mkt senders add` / POST /v1/sender-identities {"domain_id", "local_part", "display_name"}."""
    body = require_object(body, INVALID_BODY)
    domain_id = parse_int_id(body.get("domain_id"), domains.INVALID_ID)
    local_value = member(body, "local_part", str)
    display_value = member(body, "display_name", str)
    display_name = _display_name(display_value)
    now = clock.now()
    with transaction(conn):
        domain = conn.execute("SELECT id, domain_name FROM domains WHERE id = ? AND workspace_id = ?",
                              (domain_id, workspace_id)).fetchone()
        if domain is None:
            raise MktError(404, domains.NOT_FOUND)
        local_part = _local_part(local_value, domain["domain_name"])
        if conn.execute("SELECT 1 FROM sender_identities WHERE domain_id = ? AND lower(local_part) = lower(?)",
                        (domain_id, local_part)).fetchone() is not None:
            raise MktError(400, DUPLICATE.format(address=f"{local_part}@{domain['domain_name']}"))
        sender_id = conn.execute(
            "INSERT INTO sender_identities (workspace_id, domain_id, local_part, display_name, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (workspace_id, domain_id, local_part, display_name, now, now),
        ).lastrowid
        return sender_view(conn.execute(f"{_SELECT} WHERE s.id = ?", (sender_id,)).fetchone())


def list_sender_identities(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    """GET /v1/sender-identities: the workspace's identities, oldest first."""
    rows = conn.execute(f"{_SELECT} WHERE s.workspace_id = ? ORDER BY s.id", (workspace_id,))
    return [sender_view(r) for r in rows]


def get_sender_identity(conn: sqlite3.Connection, workspace_id: int, sender_id: Any) -> dict[str, Any] | None:
    """The identity with this id in the workspace, or None (any id that is not one of its own)."""
    try:
        sender_id = parse_int_id(sender_id, INVALID_ID)
    except MktError:
        return None
    row = conn.execute(f"{_SELECT} WHERE s.id = ? AND s.workspace_id = ?", (sender_id, workspace_id)).fetchone()
    return None if row is None else sender_view(row)


def show_sender_identity(conn: sqlite3.Connection, workspace_id: int, sender_id: Any) -> dict[str, Any]:
    """GET /v1/sender-identities/:id: 400 for a malformed id, 404 outside the workspace."""
    parse_int_id(sender_id, INVALID_ID)
    sender = get_sender_identity(conn, workspace_id, sender_id)
    if sender is None:
        raise MktError(404, NOT_FOUND)
    return sender

"""The suppression list: people a workspace must not bring back (`mkt suppressions`,
/v1/suppressions; docs/privacy.md "The suppression list").

What is stored is never the address: a keyed hash (HMAC-SHA256 under the instance secret
'suppression', a secret of its own, storage/db.instance_secret) of the normalised email
address (lower case, the domain in its IDNA form as kernel/addresses sends it, so
`ann@bücher.de` and `ann@xn--bcher-kva.de` are one person) and of the E.164 phone number,
per workspace. A keyed hash, not a plain one: a plain SHA-256 of an address is reversed by
hashing a list of addresses; this one only by someone who also holds the database's secret.
The list answers one question, "is this the person who asked?", for the address in hand.

An erase with suppression adds the person's hashes (reason `erased`); an operator adds a
person who asked never to be contacted and is not a contact (reason `added`). Creating or
upserting a contact whose email address or phone number is on the list is refused with 409
SUPPRESSED unless the contact is written UNCONFIRMED (a signup form starting a new double
opt-in: the person asking again); the confirmation (services/delivery/confirmation.py) lifts
it. An import refuses every such row, each with its line: a list is not the person asking.
The import checks a batch with one lookup (`suppressed_in_batch`: the batch's addresses
hashed in Python, their digests looked up in one statement), and none at all while the
workspace's list is empty.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.addresses import wire_address
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.services.contacts.values import load_fields, normalize_email, normalize_phone
from marketing_cli.storage.db import instance_secret, transaction

SECRET = "suppression"  # the instance secret the hashes are keyed with
KINDS = ("email", "phone")
ERASED, ADDED = "erased", "added"  # reasons: an erase, `suppressions add`

SUPPRESSED = "This person asked to be erased: a new double opt-in confirmation is needed."
NOT_FOUND = "Not found."
INVALID_BODY = "Invalid request body."
ADDRESS_REQUIRED = "Please provide an email address or a phone number."
NOT_BOTH = "Please provide an email address or a phone number, not both."
HELD = ("Contact {id} holds this {what}: erase it instead (mkt contacts erase {id}, or DELETE /v1/contacts/{id}"
        "?suppress=true), which deletes it and keeps it on the suppression list.")
ALREADY = "This {what} is already on the suppression list (suppression {id})."
PAGE_INVALID = "The page must be a positive integer."
MAX_PAGE = 1_000_000_000  # as contact search's: the offset of any page fits 64 bits
PAGE_TOO_LARGE = "The page must be at most 1000000000."
LIMIT_INVALID = "The limit must be an integer from 1 to {max}."
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
_WHAT = {"email": "email address", "phone": "phone number"}
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def email_key(email: str) -> str:
    """The form of a (normalised) address that is hashed: lower case, the domain in IDNA form."""
    try:
        return wire_address(email).lower()
    except ValueError:  # a domain without an IDNA form: hashed as stored
        return email.lower()


class Hasher:
    """The keyed hashes of one workspace's addresses (the secret read once)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.secret = instance_secret(conn, SECRET)

    def __call__(self, kind: str, value: str) -> str:
        text = email_key(value) if kind == "email" else value
        return hmac.new(self.secret, f"{kind}:{text}".encode(), hashlib.sha256).hexdigest()

    def person(self, email: str | None, phone: str | None) -> list[tuple[str, str]]:
        """(kind, digest) of the person's email address and phone number, where known."""
        return [(kind, self(kind, value)) for kind, value in (("email", email), ("phone", phone)) if value]


def _match(keys: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """A condition matching any of `keys` ((kind, digest) pairs), with its parameters."""
    return (" OR ".join(["(kind = ? AND digest = ?)"] * len(keys)), [x for key in keys for x in key])


def _found(conn: sqlite3.Connection, workspace_id: int, keys: list[tuple[str, str]]) -> list[sqlite3.Row]:
    if not keys:
        return []
    where, params = _match(keys)
    return conn.execute(f"SELECT * FROM suppressions WHERE workspace_id = ? AND ({where}) ORDER BY id",
                        (workspace_id, *params)).fetchall()


def suppressions_of(conn: sqlite3.Connection, workspace_id: int, email: str | None,
                    phone: str | None) -> list[dict[str, Any]]:
    """The list's entries for this person's email address and phone number (none: []))."""
    if (not email and not phone) or not _any(conn, workspace_id):
        return []
    return [suppression_view(r) for r in _found(conn, workspace_id, Hasher(conn).person(email, phone))]


def _any(conn: sqlite3.Connection, workspace_id: int) -> bool:
    """Whether the workspace's list has an entry: while it has none, nothing is hashed."""
    row = conn.execute("SELECT 1 FROM suppressions WHERE workspace_id = ? LIMIT 1", (workspace_id,)).fetchone()
    return row is not None


def refuse_suppressed(conn: sqlite3.Connection, workspace_id: int, *, email: str | None, phone: str | None,
                      status: str | None) -> None:
    """Create and upsert (inside their transaction): 409 SUPPRESSED when the contact would hold
    an address on the list, unless it is written UNCONFIRMED (a new double opt-in starting)."""
    if status != "UNCONFIRMED" and suppressions_of(conn, workspace_id, email, phone):
        raise MktError(409, SUPPRESSED)


def suppressed_in_batch(conn: sqlite3.Connection, workspace_id: int, emails: list[str],
                        phones: list[str]) -> set[tuple[str, str]]:
    """An import batch's addresses on the list, as (kind, address): one lookup for the batch
    (its digests computed here), none while the workspace's list is empty."""
    if (not emails and not phones) or not _any(conn, workspace_id):
        return set()
    hasher = Hasher(conn)
    wanted = {hasher("email", e): ("email", e) for e in emails}
    wanted.update({hasher("phone", p): ("phone", p) for p in phones})
    rows = conn.execute("SELECT kind, digest FROM suppressions WHERE workspace_id = ?"
                        " AND digest IN (SELECT value FROM json_each(?))", (workspace_id, _dumps(list(wanted))))
    return {wanted[r["digest"]] for r in rows if wanted[r["digest"]][0] == r["kind"]}


def suppress(conn: sqlite3.Connection, workspace_id: int, email: str | None, phone: str | None,
             reason: str) -> None:
    """Put the person's email address and phone number on the list (inside the caller's transaction)."""
    now = clock.now()
    conn.executemany("INSERT OR IGNORE INTO suppressions (workspace_id, kind, digest, reason, created_at)"
                     " VALUES (?, ?, ?, ?, ?)",
                     [(workspace_id, kind, digest, reason, now) for kind, digest in Hasher(conn).person(email, phone)])


def lift(conn: sqlite3.Connection, workspace_id: int, email: str | None, phone: str | None) -> int:
    """Take the person off the list (a new double opt-in confirmed: inside its transaction)."""
    keys = Hasher(conn).person(email, phone) if (email or phone) and _any(conn, workspace_id) else []
    if not keys:
        return 0
    where, params = _match(keys)
    return conn.execute(f"DELETE FROM suppressions WHERE workspace_id = ? AND ({where})",
                        (workspace_id, *params)).rowcount


# --- the faces' operations ---------------------------------------------------------------

def suppression_view(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "kind": row["kind"], "reason": row["reason"], "created_at": row["created_at"]}


def _address(conn: sqlite3.Connection, workspace_id: int, email: Any, phone: Any) -> tuple[str, str]:
    """(kind, normalised value) of the one address given; 400 for none, both or an invalid one."""
    given = [(k, v) for k, v in (("email", email), ("phone", phone)) if v is not None and str(v).strip()]
    if not given:
        raise MktError(400, ADDRESS_REQUIRED)
    if len(given) > 1:
        raise MktError(400, NOT_BOTH)
    kind, raw = given[0]
    try:
        if kind == "email":
            return kind, normalize_email(raw)
        phone_field = load_fields(conn, workspace_id).phone
        return kind, normalize_phone(raw, phone_field.default_region if phone_field else None)
    except ValueError as exc:
        raise MktError(400, str(exc)) from None


def split_address(text: str) -> tuple[str | None, str | None]:
    """A command line's EMAIL|PHONE argument as (email, phone): an @ makes it an email address."""
    return (text, None) if "@" in text else (None, text)


def list_suppressions(conn: sqlite3.Connection, workspace_id: int, *, email_address: Any = None,
                      phone_number: Any = None, page: Any = None, limit: Any = None) -> list[dict[str, Any]]:
    """GET /v1/suppressions: the list, oldest first (a page of it); with an address (or both), its entries."""
    page_number = 1 if page in (None, "") else parse_int_id(page, PAGE_INVALID)
    if page_number > MAX_PAGE:
        raise MktError(400, PAGE_TOO_LARGE)
    per_page = DEFAULT_LIMIT if limit in (None, "") else parse_int_id(limit, LIMIT_INVALID.format(max=MAX_LIMIT))
    if per_page > MAX_LIMIT:
        raise MktError(400, LIMIT_INVALID.format(max=MAX_LIMIT))
    given = [(email_address, None), (None, phone_number)]
    addresses = [_address(conn, workspace_id, e, p) for e, p in given if (e if p is None else p) not in (None, "")]
    if addresses:  # the entries of the address (or of both addresses) given
        hasher = Hasher(conn)
        return [suppression_view(r) for r in _found(conn, workspace_id, [(k, hasher(k, v)) for k, v in addresses])]
    rows = conn.execute("SELECT * FROM suppressions WHERE workspace_id = ? ORDER BY id LIMIT ? OFFSET ?",
                        (workspace_id, per_page, (page_number - 1) * per_page)).fetchall()
    return [suppression_view(r) for r in rows]


def add_suppression(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/suppressions {email_address | phone_number}: 201 with the entry (never the address)."""
    body = require_object(body, INVALID_BODY)
    email, phone = member(body, "email_address", str), member(body, "phone_number", str)
    kind, value = _address(conn, workspace_id, email, phone)
    with transaction(conn):
        column = "email" if kind == "email" else "phone"  # one of two names of ours
        holder = conn.execute(f"SELECT id FROM contacts WHERE workspace_id = ? AND {column} = ? LIMIT 1",
                              (workspace_id, value)).fetchone()
        if holder is not None:
            raise MktError(409, HELD.format(id=holder["id"], what=_WHAT[kind]))
        digest = Hasher(conn)(kind, value)
        existing = _found(conn, workspace_id, [(kind, digest)])
        if existing:
            raise MktError(409, ALREADY.format(what=_WHAT[kind], id=existing[0]["id"]))
        new_id = conn.execute("INSERT INTO suppressions (workspace_id, kind, digest, reason, created_at)"
                              " VALUES (?, ?, ?, ?, ?)", (workspace_id, kind, digest, ADDED, clock.now())).lastrowid
        return suppression_view(conn.execute("SELECT * FROM suppressions WHERE id = ?", (new_id,)).fetchone())


def remove_suppression(conn: sqlite3.Connection, workspace_id: int, key: Any, *,
                       by_address: bool = False) -> dict[str, Any]:
    """DELETE /v1/suppressions/{id}: {"id", "deleted": true}; 404 `Not found.` for an id that is
    not the workspace's. With `by_address` (the command line), `key` may also be the address."""
    with transaction(conn):
        suppression_id = parse_digits(str(key), 19) if by_address else parse_int_id(key, NOT_FOUND, 404)
        removed = suppression_id is not None and conn.execute(
            "DELETE FROM suppressions WHERE id = ? AND workspace_id = ?", (suppression_id, workspace_id)).rowcount
        if not removed and by_address:  # not an entry's id: the address it holds (digits: a phone number)
            try:
                kind, value = _address(conn, workspace_id, *split_address(str(key).strip()))
            except MktError:
                if suppression_id is None:  # neither an id nor an address
                    raise
                raise MktError(404, NOT_FOUND) from None
            rows = _found(conn, workspace_id, [(kind, Hasher(conn)(kind, value))])
            if rows:
                suppression_id = rows[0]["id"]
                removed = conn.execute("DELETE FROM suppressions WHERE id = ?", (suppression_id,)).rowcount
        if not removed:
            raise MktError(404, NOT_FOUND)
        return {"id": suppression_id, "deleted": True}

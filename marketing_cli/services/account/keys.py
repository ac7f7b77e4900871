"""API keys: stored only as SHA-256 hashes, with a short visible prefix.

A secret is `mkt_` followed by 32 URL-safe random characters (192 bits). Looking a key
up by its hash and then comparing the hashes with `hmac.compare_digest` leaks nothing
about the secret through timing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.storage import versioned
from marketing_cli.storage.db import transaction

MISSING = "Please provide an API key."
INVALID = "The API key you provided is invalid or has been revoked."
PREFIX_LENGTH = 12


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def key_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "prefix": row["prefix"],
        "created_at": row["created_at"],
        "last_used_at": row["last_used_at"],
        "revoked_at": row["revoked_at"],
    }


def create_key(conn: sqlite3.Connection, workspace_id: int, name: str | None = None) -> dict[str, Any]:
    """A new key; the secret is in the answer and nowhere else."""
    if name is not None and len(name) > 100:
        raise MktError(400, "The key name must be 100 characters or less.")
    secret = "mkt_" + secrets.token_urlsafe(24)
    now = clock.now()
    with transaction(conn):
        if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone() is None:
            raise MktError(404, "The workspace does not exist.")
        key_id = conn.execute(
            "INSERT INTO api_keys (workspace_id, name, prefix, key_hash, created_at) VALUES (?, ?, ?, ?, ?)",
            (workspace_id, name, secret[:PREFIX_LENGTH], _hash(secret), now),
        ).lastrowid
    return {"id": key_id, "name": name, "key": secret, "created_at": now}


def list_keys(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT * FROM api_keys WHERE workspace_id = ? ORDER BY id", (workspace_id,))
    return [key_view(r) for r in rows]


def revoke_key(conn: sqlite3.Connection, workspace_id: int, key_id: int) -> dict[str, Any]:
    with transaction(conn):
        row = conn.execute(
            "SELECT * FROM api_keys WHERE id = ? AND workspace_id = ?", (key_id, workspace_id)
        ).fetchone()
        if row is None:
            raise MktError(404, f"No API key with id {key_id} in this workspace.")
        if row["revoked_at"] is None:
            conn.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (clock.now(), key_id))
        row = conn.execute("SELECT * FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    return key_view(row)


_CHECK = object()  # authenticate's default: check the connection's versioned.entries itself


def authenticate(conn: sqlite3.Connection, authorization: str | None, cache: Any = _CHECK) -> int:
    """The workspace id of an `Authorization: Bearer <key>` header value, or a 401.

    `cache`: `versioned.entries(conn)` when the caller has it already (one check per request).
    """
    if authorization is None:
        raise MktError(401, MISSING)
    scheme, _, secret = authorization.strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise MktError(401, MISSING if not authorization.strip() else INVALID)
    digest = _hash(secret)
    if cache is _CHECK:
        cache = versioned.entries(conn)
    found = None if cache is None else cache.get(("api_key", digest))
    if found is None:
        row = conn.execute(
            "SELECT id, workspace_id, key_hash, last_used_at FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
            (digest,),
        ).fetchone()
        if row is None or not hmac.compare_digest(row["key_hash"], digest):
            raise MktError(401, INVALID)  # not kept: a key created next is found by the next request
        found = (row["id"], row["workspace_id"], row["last_used_at"])
        if cache is not None:
            # Kept only while the database is unchanged (storage/versioned.py): a revocation,
            # from this process or `mkt keys revoke` in another, is a commit, and the next
            # request reads the key again and gets its 401.
            cache[("api_key", digest)] = found
    _note_use(conn, found[0], found[2])
    return found[1]


_threshold: tuple[int, str] = (0, "")


def _a_minute_before(now: datetime) -> str:
    """format_ts(now - 60 s), computed once per second: it is on every request's path."""
    global _threshold
    second = int(now.timestamp())
    if _threshold[0] != second:
        _threshold = (second, clock.format_ts(now.replace(microsecond=0) - timedelta(seconds=60)))
    return _threshold[1]


def _note_use(conn: sqlite3.Connection, key_id: int, last_used_at: str | None) -> None:
    """Record when a key was last used, at most once a minute, never waiting for a lock.

    A read request must not queue behind another process's write just to stamp a key, so
    the update is tried once without the busy timeout and skipped if the file is busy.
    """
    now = clock.utcnow()
    if last_used_at is not None and last_used_at > _a_minute_before(now):
        return
    if conn.in_transaction:
        return
    from marketing_cli.storage.db import BUSY_TIMEOUT_MS

    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (clock.format_ts(now), key_id))
    except (sqlite3.OperationalError, sqlite3.IntegrityError):
        pass  # busy, or read-only or retired (its trigger: IntegrityError on SQLite): reads go on
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

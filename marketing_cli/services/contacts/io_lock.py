"""The workspace's contacts import/export lock: one bulk import or export at a time.

A running import or export holds the workspace's row in `contact_io_locks`, so field
definitions cannot change under it (services/contacts/fields.py asks `io_in_progress`) and a
second import or export is refused with 409.

The lock is held by a live process. It expires LOCK_SECONDS after its last renewal, and
while the work runs a thread of the holder renews it every RENEW_SECONDS
(marketing_cli/jobs/leases.py), however long one step takes (a batch, a slow export client).
When the holder dies (SIGKILL, power cut), renewals stop: within LOCK_SECONDS the lock is
expired, and the next import, export or field change takes it over.
tests/contacts/test_data_paths.py kills an import with SIGKILL and shows it.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from marketing_cli.errors import MktError
from marketing_cli.jobs.leases import Renewer
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id
from marketing_cli.storage.db import transaction

LOCK_SECONDS = 10
RENEW_SECONDS = LOCK_SECONDS / 3
LOCKED = "Another contact {kind} is running in this workspace (started {started}); try again when it has finished."


def lock_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()}"


def _expiry() -> str:
    return clock.format_ts(clock.utcnow() + timedelta(seconds=LOCK_SECONDS))


def acquire_io_lock(conn: sqlite3.Connection, workspace_id: int, kind: str, owner: str) -> None:
    """Take the workspace's import/export lock, or raise 409 when a live one is held."""
    now = clock.now()
    with transaction(conn):
        row = conn.execute(
            "SELECT kind, started_at, expires_at FROM contact_io_locks WHERE workspace_id = ?", (workspace_id,)
        ).fetchone()
        if row is not None and row["expires_at"] > now:
            raise MktError(409, LOCKED.format(kind=row["kind"], started=row["started_at"]))
        conn.execute(
            "INSERT INTO contact_io_locks (workspace_id, kind, owner, started_at, expires_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (workspace_id) DO UPDATE SET kind = excluded.kind, owner = excluded.owner,"
            " started_at = excluded.started_at, expires_at = excluded.expires_at",
            (workspace_id, kind, owner, now, _expiry()),
        )


def renew_io_lock(conn: sqlite3.Connection, workspace_id: int, owner: str) -> bool:
    """Push the lock's expiry forward; False when this owner no longer holds it."""
    with transaction(conn):
        return conn.execute(
            "UPDATE contact_io_locks SET expires_at = ? WHERE workspace_id = ? AND owner = ?",
            (_expiry(), workspace_id, owner),
        ).rowcount == 1


def release_io_lock(conn: sqlite3.Connection, workspace_id: int, owner: str) -> None:
    if conn.in_transaction:  # an error escaped mid-batch: the batch is already rolled back
        conn.execute("ROLLBACK")
    with transaction(conn):
        conn.execute("DELETE FROM contact_io_locks WHERE workspace_id = ? AND owner = ?", (workspace_id, owner))


def io_in_progress(conn: sqlite3.Connection, workspace_id: int) -> bool:
    """Whether a live import or export holds the workspace's lock."""
    return conn.execute(
        "SELECT 1 FROM contact_io_locks WHERE workspace_id = ? AND expires_at > ?", (workspace_id, clock.now())
    ).fetchone() is not None


class HeldLock:
    """The lock taken and kept alive by a renewer thread until `release` (idempotent)."""

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, kind: str) -> None:
        self.workspace_id = workspace_id
        self.owner = lock_owner()
        acquire_io_lock(conn, workspace_id, kind, self.owner)
        self.renewer = Renewer(conn, lambda c: renew_io_lock(c, workspace_id, self.owner), RENEW_SECONDS).start()

    def release(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")  # before stopping the renewer, which may wait for this lock
        self.renewer.stop()
        release_io_lock(conn, self.workspace_id, self.owner)


@contextmanager
def held_io_lock(conn: sqlite3.Connection, workspace_id: int, kind: str) -> Iterator[HeldLock]:
    """`with held_io_lock(conn, ws, "import"):` the lock for the block's length (409 if taken)."""
    lock = HeldLock(conn, workspace_id, kind)
    try:
        yield lock
    finally:
        lock.release(conn)

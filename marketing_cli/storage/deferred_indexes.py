"""Field indexes a large import drops while it loads and builds again after it (SQLite).

Each custom field has an expression index, `contacts_field_<id>` (field_sql.create_index).
Kept up row by row, a load pays a JSON read and a random b-tree insert per field per row; a
CREATE INDEX afterwards reads the table once and sorts. 200,000 rows of issue 42's list
(four field indexes, CPU of the whole import, two runs each): 12.3 and 12.4 s with them, 10.1
and 9.8 s without; building the four afterwards 0.83 s (services/contacts/batches.py says
when an import defers them).

Crash-safe by a marker: `defer` drops the indexes in the caller's transaction (an import
batch's) and records a row in `deferred_field_indexes` in the same transaction, naming the
import's io lock owner (services/contacts/io_lock.py); `build` creates every field's index
again and deletes the row, in one transaction. If the import dies in between, its row
stays and its lock expires (LOCK_SECONDS after its last renewal): the next connection that
opens the file (`repair`, from storage/db.connect) builds the indexes. A live import's row
is left alone. Until then the indexes are only missing, never wrong: every query still
answers, by scanning.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.storage import field_sql


def field_index_names(conn: Any) -> list[str]:
    """The field indexes the file has now."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'contacts' AND name LIKE 'contacts_field_%'"
    )]


def defer(conn: Any, owner: str, now: str) -> None:
    """Drop the field indexes and record it, inside the caller's write transaction."""
    conn.execute("INSERT INTO deferred_field_indexes (owner, deferred_at) VALUES (?, ?) ON CONFLICT (owner) DO NOTHING",
                 (owner, now))
    for name in field_index_names(conn):
        conn.execute(f"DROP INDEX IF EXISTS {name}")  # name: read from sqlite_master, contacts_field_<id>


def field_ids(conn: Any) -> list[int]:
    """The fields that have an expression index (all but email and phone)."""
    return [r[0] for r in conn.execute("SELECT id FROM fields WHERE merge_tag NOT IN ('email_address', 'phone_number')")]


def build(conn: Any, owner: str) -> None:
    """Every field's index again (those still missing) and the record gone, inside the caller's
    write transaction."""
    for field_id in field_ids(conn):
        field_sql.create_index(conn, field_id)
    conn.execute("DELETE FROM deferred_field_indexes WHERE owner = ?", (owner,))


_ABANDONED = ("SELECT owner FROM deferred_field_indexes d WHERE NOT EXISTS (SELECT 1 FROM contact_io_locks l"
              " WHERE l.owner = d.owner AND l.expires_at > ?)")


def repair(conn: sqlite3.Connection, now: str | None = None) -> bool:
    """Build the indexes an import dropped and did not build again (it died): whether it did.
    One read when there is nothing to repair; a file that cannot be written (or an older
    schema) is left for a later connection."""
    now = now or clock.now()
    try:
        if conn.execute(_ABANDONED + " LIMIT 1", (now,)).fetchone() is None:
            return False
        conn.execute("BEGIN IMMEDIATE")
        try:
            abandoned = [r[0] for r in conn.execute(_ABANDONED, (now,))]  # again, under the write lock
            if abandoned:
                for field_id in field_ids(conn):
                    field_sql.create_index(conn, field_id)
                conn.executemany("DELETE FROM deferred_field_indexes WHERE owner = ?", [(o,) for o in abandoned])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return bool(abandoned)
    except sqlite3.OperationalError:  # read-only, locked past the timeout, or the table not there yet
        return False

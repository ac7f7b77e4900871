"""A copy's source before and after: is it still live (`live_reasons`), and retiring it once the
copy is verified (`retire`, `mkt db copy --retire-source`; docs/deploy.md "Moving to PostgreSQL").

**Live.** A copy reads one snapshot; whatever a `mkt serve` or `mkt jobs run` writes to the
source after it is not in the copy, and nothing says so. `mkt db copy` therefore refuses (or
asks, on a terminal) when the source looks live, unless `--force`:
- a job lease that has not expired: a worker (`mkt serve`, `mkt jobs run`) is running a job;
- SQLite: the file or its -wal was modified in the last minute (every commit touches one);
- PostgreSQL: another session on the database ran a statement in the last minute
  (pg_stat_activity; a serve's job worker polls every second, so an idle serve shows too).
  PostgreSQL shows when a session of another role last ran a statement only to a role with
  pg_read_all_stats: the servers are expected to connect as the role the copy uses.

**Retired.** After a verified copy of every workspace, `--retire-source` writes one row in
`mkt_copy_retired` (schema step 34: when, where the data went, the message) and puts on
every table of the source a trigger that refuses any write with that message: SQLite
`BEFORE INSERT/UPDATE/DELETE ... RAISE(ABORT, message)`, PostgreSQL a row-level `BEFORE
INSERT OR UPDATE OR DELETE` and a statement-level `BEFORE TRUNCATE` trigger per table whose
function raises it (SQLSTATE 25006, read-only transaction). Row-level on both engines: a
write that changes no row (a job worker's claim when nothing is due) goes through, so an
idle reader is not disturbed. A trigger is part of the database, so every
process honours it at once, a `mkt serve` that is still running included, and an older mkt
too; the faces answer it as a storage error (db.STORAGE_ERRORS: 503, exit 1, one line).
Reads go on working. `mkt serve` will not start on a retired database (storage/serving.py).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.storage import db, postgres

RECENT_SECONDS = 60
MARK = "mkt_copy_retired"
PHRASE = db.RETIRED  # db.storage_error finds a refused write of a retired database by it


def retirement_message(at: str, successor: str) -> str:
    return (f"This database {PHRASE} on {at}: its data is now in {successor}. "
            f"Use that database (--db or MKT_DB); this one refuses every write.")


def retired_message(conn: Any) -> str | None:
    """The message of a retired database, or None (a database whose schema predates step 34 is not)."""
    try:
        row = conn.execute(f"SELECT message FROM {MARK} WHERE id = 1").fetchone()
    except sqlite3.DatabaseError as exc:  # the table is missing before step 34: never retired
        if MARK in str(exc):
            return None
        raise
    return row[0] if row else None


def live_reasons(target: Any) -> list[str]:
    """Why the database `target` looks in use right now (empty: it does not)."""
    resolved = db.resolve_db_path(target)
    # the file's times before opening it: opening a WAL database creates its -wal anew
    age = None if isinstance(resolved, postgres.DatabaseUrl) else _seconds_since_write(Path(resolved))
    conn = db.connect(target, upgrade=False, create=False)
    try:
        reasons = []
        leased = conn.execute("SELECT count(*) FROM jobs WHERE status = 'running' AND lease_expires_at > ?",
                              (clock.now(),)).fetchone()[0]
        if leased:
            reasons.append(f"{leased} job(s) held by a running worker (an unexpired lease)")
        if db.is_postgresql(conn):
            sessions = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                f" AND query_start > now() - interval '{RECENT_SECONDS} seconds'").fetchone()[0]
            if sessions:
                reasons.append(f"{sessions} other session(s) used it in the last minute")
        elif age is not None and age < RECENT_SECONDS:
            reasons.append(f"it was written {max(0, round(age))} s ago")
        return reasons
    finally:
        conn.close()


def _seconds_since_write(path: Path) -> float | None:
    times = [os.stat(p).st_mtime for p in (path, Path(f"{path}-wal")) if p.exists()]
    return time.time() - max(times) if times else None


def retire(target: Any, successor: Any) -> str:
    """Mark the database `target` retired in favour of `successor` (a path, named absolute, or a
    URL, named without its password); returns the message its refused writes now carry."""
    taken_by = db.resolve_db_path(successor)
    if not isinstance(taken_by, postgres.DatabaseUrl):
        successor = os.path.abspath(taken_by)  # the message is read from anywhere
    message = retirement_message(clock.now(), successor)
    resolved = db.resolve_db_path(target)
    try:
        if isinstance(resolved, postgres.DatabaseUrl):
            _retire_postgresql(resolved, successor, message)
        else:
            _retire_sqlite(resolved, successor, message)
    except MktError:
        raise
    except Exception as exc:  # noqa: BLE001 - psycopg's or sqlite3's: one line (no privilege, read-only)
        raise MktError(503, str(exc).strip().splitlines()[0]) from None
    return message


def _retire_sqlite(path: Path, successor: str, message: str) -> None:
    conn = db.connect(path, upgrade=False, create=False)
    try:
        literal = "'" + message.replace("'", "''") + "'"
        with db.transaction(conn):
            if retired_message(conn) is not None:
                return
            conn.execute(f"INSERT INTO {MARK} (id, retired_at, successor, message) VALUES (1, ?, ?, ?)",
                         (clock.now(), successor, message))
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                " AND sql NOT LIKE 'CREATE VIRTUAL%'")]
            for table in tables:
                for action in ("INSERT", "UPDATE", "DELETE"):
                    conn.execute(f'CREATE TRIGGER "mkt_retired_{table}_{action.lower()}" BEFORE {action}'
                                 f' ON "{table}" BEGIN SELECT RAISE(ABORT, {literal}); END')
    finally:
        conn.close()


REFUSE = f"""CREATE OR REPLACE FUNCTION mkt_copy_refuse_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = (SELECT message FROM {MARK} WHERE id = 1), ERRCODE = 'read_only_sql_transaction';
END $$"""


def _retire_postgresql(url: postgres.DatabaseUrl, successor: str, message: str) -> None:
    from marketing_cli.storage.copy.source import connect

    conn = connect(url)  # autocommit: transaction() below is the real BEGIN ... COMMIT
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (postgres.WRITE_LOCK,))
            if conn.execute(f"SELECT 1 FROM {MARK} WHERE id = 1").fetchone() is not None:
                return
            conn.execute(f"INSERT INTO {MARK} (id, retired_at, successor, message) VALUES (1, %s, %s, %s)",
                         (clock.now(), successor, message))
            conn.execute(REFUSE)
            tables = [r[0] for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = (SELECT oid FROM pg_namespace"
                " WHERE nspname = current_schema()) AND relkind IN ('r', 'p') ORDER BY relname")]
            for table in tables:  # per row, as SQLite's: a write that changes no row goes through
                conn.execute(f'CREATE TRIGGER mkt_retired BEFORE INSERT OR UPDATE OR DELETE ON "{table}"'
                             " FOR EACH ROW EXECUTE FUNCTION mkt_copy_refuse_write()")
                conn.execute(f'CREATE TRIGGER mkt_retired_truncate BEFORE TRUNCATE ON "{table}"'
                             " FOR EACH STATEMENT EXECUTE FUNCTION mkt_copy_refuse_write()")
    finally:
        conn.close()

"""The schema's version on PostgreSQL and the steps that bring it up to date (schema.postgresql.sql,
read by db.postgresql_schema_steps): one transaction under the writers' lock, so concurrent first
starts apply it once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from marketing_cli.storage.postgres.connection import WRITE_LOCK, Connection
from marketing_cli.storage.postgres.errors import mapped

VERSION_TABLE = "mkt_schema_version"
_lock = threading.Lock()


def current_version(conn: Connection) -> int:
    import psycopg

    if not conn.in_transaction:  # one round trip; a missing table (a new database) is version 0
        try:
            return conn._conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()[0]
        except psycopg.errors.UndefinedTable:
            return 0
    row = conn._conn.execute("SELECT to_regclass(%s)", (VERSION_TABLE,)).fetchone()  # an error would end the transaction
    if row[0] is None:
        return 0
    return conn._conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()[0]


def migrate(conn: Connection, steps: Sequence[tuple[int, str]], target: int) -> int:
    """Apply the PostgreSQL steps above the database's version, under the write lock."""
    import psycopg

    if current_version(conn) >= target:
        return target
    with _lock:
        try:
            with conn._conn.transaction():
                # No statement timeout for a migration, nor for the wait for another process's:
                # a step may rewrite a big table (step 30 on 1,000,000 contacts with 7 field
                # indexes: 54 s), which must not fail half-way at the sessions' 60 s.
                conn._conn.execute("SET LOCAL statement_timeout = 0")
                conn._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                conn._conn.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version BIGINT NOT NULL)")
                row = conn._conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()
                current = row[0] if row else 0
                if row is None:
                    conn._conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (0)")
                for version, sql in steps:
                    if current < version <= target:
                        conn._conn.execute(sql)
                        conn._conn.execute(f"UPDATE {VERSION_TABLE} SET version = %s", (version,))
        except psycopg.Error as exc:
            raise mapped(exc) from None
    conn.schema_changed()
    return target

"""Reading the source: a SQLite file or a PostgreSQL database, in one read snapshot held from the first
read to the end (BEGIN on SQLite, REPEATABLE READ on PostgreSQL), so that the check pass and the load
read the same rows. Rows come in key order, from a given key on (a resumed load), by batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage import db, postgres
from marketing_cli.storage.copy.tables import Table, postgresql_tables, select_sql, sqlite_tables


class SqliteSource:
    """A SQLite file read in one snapshot: a read transaction held from the first read to the end."""

    engine = "sqlite"

    def __init__(self, path: Path) -> None:
        self.label = str(path)
        self.conn = db.connect(path, upgrade=False, create=False)
        self.conn.row_factory = None
        self.conn.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
        self.version = db.schema_version(self.conn)
        self.conn.execute("BEGIN")
        self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts here
        self.tables = sqlite_tables(self.conn)

    def rows(self, table: Table, after: tuple[Any, ...] | None = None) -> Iterator[tuple[Any, ...]]:
        cursor = self.conn.execute(select_sql(table, after, "?"), after or ())
        while batch := cursor.fetchmany(5000):
            yield from batch

    def scalar(self, sql: str) -> Any:
        return self.conn.execute(sql).fetchone()[0]

    def close(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.conn.close()


def connect(url: postgres.DatabaseUrl, autocommit: bool = True) -> Any:
    """A psycopg connection of the copy's own (source or target): no statement or idle timeout, which a
    copy of a big workspace outlasts (the services' sessions have both: postgres.configure)."""
    import psycopg

    try:
        conn = psycopg.connect(url.url, autocommit=autocommit, prepare_threshold=None, connect_timeout=10)
    except psycopg.Error as exc:
        raise MktError(503, f"Cannot connect to the database {url}: {str(exc).strip().splitlines()[0]}.") from None
    conn.execute("SET statement_timeout = 0")
    conn.execute("SET idle_in_transaction_session_timeout = 0")
    return conn


class PostgresSource:
    """A PostgreSQL database read in one REPEATABLE READ, READ ONLY transaction."""

    engine = "postgresql"

    def __init__(self, url: postgres.DatabaseUrl) -> None:
        self.label = str(url)
        check = db.connect(url, upgrade=False, create=False)
        try:
            self.version = db.schema_version(check)
        finally:
            check.close()
        self.conn = connect(url)
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self.tables = postgresql_tables(self.conn)
        self._cursors = 0

    def rows(self, table: Table, after: tuple[Any, ...] | None = None) -> Iterator[tuple[Any, ...]]:
        self._cursors += 1
        with self.conn.cursor(name=f"mkt_copy_{self._cursors}") as cursor:
            cursor.itersize = 5000
            cursor.execute(select_sql(table, after, "%s"), after or None)
            yield from cursor

    def scalar(self, sql: str) -> Any:
        return self.conn.execute(sql).fetchone()[0]

    def close(self) -> None:
        self.conn.close()


def open_source(target: Any) -> SqliteSource | PostgresSource:
    resolved = db.resolve_db_path(target)
    if isinstance(resolved, postgres.DatabaseUrl):
        return PostgresSource(resolved)
    return SqliteSource(resolved)


def workspaces(source: SqliteSource | PostgresSource, workspace_ids: list[int] | None) -> list[int]:
    """The ids of the workspaces to copy (None: all of the source's), once the source is found able to give
    them: its schema is this mkt's, and it holds every workspace asked for."""
    if source.version != db.latest_version():
        raise MktError(409, f"The source {source.label} has schema version {source.version}, this mkt "
                            f"{db.latest_version()}: run `mkt db upgrade` on it first.")
    if workspace_ids is None:
        return [r[0] for r in source.conn.execute("SELECT id FROM workspaces ORDER BY id")]
    found = {r[0] for r in source.conn.execute(
        "SELECT id FROM workspaces WHERE id IN (" + ", ".join(str(int(i)) for i in workspace_ids) + ")")}
    missing = [i for i in workspace_ids if i not in found]
    if missing:
        raise MktError(404, f"No workspace {', '.join(map(str, missing))} in {source.label}.")
    return workspace_ids

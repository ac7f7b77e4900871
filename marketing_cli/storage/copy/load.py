"""Stage 2, the load: the workspace rows go, in batches, to a staging area in the target: the schema
`mkt_copy_staging` on PostgreSQL (COPY), a `FILE.mkt-copy-partial` file on SQLite. Each batch commits
with its table's progress (`mkt_copy_state`), so a rerun after a kill goes on from there: a table whose
source checksum is unchanged keeps what it has, any other restarts. Nothing is live yet: publish.py
makes the staged rows the target's.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage import db, postgres
from marketing_cli.storage.copy.check import Plan
from marketing_cli.storage.copy.fixes import Fixer
from marketing_cli.storage.copy.report import Progress
from marketing_cli.storage.copy.source import connect
from marketing_cli.storage.copy.tables import Table, postgresql_tables, quoted, sqlite_tables

STAGING = "mkt_copy_staging"
STATE = "mkt_copy_state"
PARTIAL_SUFFIX = ".mkt-copy-partial"
BATCH = 20_000


@dataclass
class Loaded:
    """A table's progress in the staging area: rows written, the last key read, the source checksum it
    was loaded with, and whether it is whole."""

    rows: int
    last_key: tuple[Any, ...] | None
    checksum: str
    done: bool


def _key_text(key: tuple[Any, ...] | None) -> str | None:
    import json

    return None if key is None else json.dumps(list(key))


def _key_of_text(text: str | None) -> tuple[Any, ...] | None:
    import json

    return None if text is None else tuple(json.loads(text))


class PostgresStaging:
    """The schema mkt_copy_staging of the target database: the live tables' shape, loaded by COPY."""

    engine = "postgresql"

    def __init__(self, url: postgres.DatabaseUrl) -> None:
        self.label = str(url)
        db.connect(url).close()  # the schema, made or brought up to date
        self.conn = connect(url)
        self.live = self.conn.execute("SELECT current_schema()").fetchone()[0]
        self.tables = {t.name: t for t in postgresql_tables(self.conn)}

    def existing_workspaces(self, ids: list[int]) -> list[int]:
        rows = self.conn.execute(f'SELECT id FROM "{self.live}".workspaces WHERE id = ANY(%s) ORDER BY id',
                                 (ids,)).fetchall()
        return [r[0] for r in rows]

    def open_run(self, run: str, tables: list[Table], restart: bool) -> bool:
        """Make (or find) the staging area of this run; True when it already held one (a resume)."""
        conn = self.conn
        exists = conn.execute("SELECT to_regclass(%s)", (f"{STAGING}.{STATE}",)).fetchone()[0] is not None
        if exists:
            row = conn.execute(f"SELECT last_key FROM {STAGING}.{STATE} WHERE table_name = ''").fetchone()
            if restart or row is None or row[0] != run:
                if not restart:
                    raise MktError(409, f"The target holds the staging area ({STAGING}) of another copy "
                                        f"({row[0] if row else 'unknown'}): rerun that copy to finish it, "
                                        "or add --restart to drop it.")
                conn.execute(f"DROP SCHEMA {STAGING} CASCADE")
                exists = False
        with conn.transaction():
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {STAGING}")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {STAGING}.{STATE} (table_name TEXT PRIMARY KEY, rows BIGINT,"
                         " last_key TEXT, checksum TEXT, done BOOLEAN NOT NULL DEFAULT false)")
            conn.execute(f"INSERT INTO {STAGING}.{STATE} (table_name, last_key) VALUES ('', %s)"
                         " ON CONFLICT DO NOTHING", (run,))
            for table in tables:
                if not table.instance:
                    conn.execute(f'CREATE TABLE IF NOT EXISTS {STAGING}."{table.name}"'
                                 f' (LIKE "{self.live}"."{table.name}")')
        return exists

    def loaded(self, table: Table) -> Loaded | None:
        row = self.conn.execute(f"SELECT rows, last_key, checksum, done FROM {STAGING}.{STATE}"
                                " WHERE table_name = %s", (table.name,)).fetchone()
        return None if row is None else Loaded(row[0], _key_of_text(row[1]), row[2], row[3])

    def reset(self, table: Table, checksum: str) -> None:
        with self.conn.transaction():
            self.conn.execute(f'TRUNCATE {STAGING}."{table.name}"')
            self._state(table, Loaded(0, None, checksum, False))

    def _state(self, table: Table, state: Loaded) -> None:
        self.conn.execute(
            f"INSERT INTO {STAGING}.{STATE} (table_name, rows, last_key, checksum, done) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (table_name) DO UPDATE SET rows = EXCLUDED.rows, last_key = EXCLUDED.last_key,"
            " checksum = EXCLUDED.checksum, done = EXCLUDED.done",
            (table.name, state.rows, _key_text(state.last_key), state.checksum, state.done))

    def write(self, table: Table, rows: list[tuple[Any, ...]], state: Loaded) -> None:
        with self.conn.transaction():
            if rows:
                with self.conn.cursor().copy(f'COPY {STAGING}."{table.name}" ({quoted(table.columns)})'
                                             " FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            self._state(table, state)

    def close(self) -> None:
        self.conn.close()


class SqliteStaging:
    """A new SQLite file, loaded as FILE.mkt-copy-partial with its triggers off (kept in mkt_copy_triggers)."""

    engine = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        if path.exists():
            raise MktError(409, f"{path} already exists: a copy to SQLite makes a new file (choose another name).")
        self.partial = Path(f"{path}{PARTIAL_SUFFIX}")
        self.conn: sqlite3.Connection | None = None
        schema = db.connect(":memory:")  # the file it will be: this mkt's schema
        self.tables = {t.name: t for t in sqlite_tables(schema)}
        schema.close()

    def existing_workspaces(self, ids: list[int]) -> list[int]:
        return []

    def open_run(self, run: str, tables: list[Table], restart: bool) -> bool:
        resumed = self.partial.exists()
        if resumed:
            conn = sqlite3.connect(self.partial, isolation_level=None)
            try:
                row = conn.execute(f"SELECT last_key FROM {STATE} WHERE table_name = ''").fetchone()
            except sqlite3.Error:
                row = None
            conn.close()
            if restart or row is None or row[0] != run:
                if not restart:
                    raise MktError(409, f"{self.partial} holds another copy ({row[0] if row else 'unknown'}): "
                                        "rerun that copy to finish it, or add --restart to start over.")
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(f"{self.partial}{suffix}").unlink(missing_ok=True)
                resumed = False
        if not resumed:
            db.connect(self.partial).close()
        conn = sqlite3.connect(self.partial, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        self.conn = conn
        if not resumed:
            conn.execute("BEGIN")
            conn.execute(f"CREATE TABLE {STATE} (table_name TEXT PRIMARY KEY, rows INTEGER, last_key TEXT,"
                         " checksum TEXT, done INTEGER NOT NULL DEFAULT 0)")
            conn.execute("CREATE TABLE mkt_copy_triggers (name TEXT PRIMARY KEY, sql TEXT NOT NULL)")
            conn.execute(f"INSERT INTO {STATE} (table_name, last_key) VALUES ('', ?)", (run,))
            for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall():
                conn.execute("INSERT INTO mkt_copy_triggers (name, sql) VALUES (?, ?)", (name, sql))
                conn.execute(f'DROP TRIGGER "{name}"')
            conn.execute("COMMIT")
        return resumed

    def loaded(self, table: Table) -> Loaded | None:
        row = self.conn.execute(f"SELECT rows, last_key, checksum, done FROM {STATE} WHERE table_name = ?",
                                (table.name,)).fetchone()
        return None if row is None else Loaded(row[0], _key_of_text(row[1]), row[2], bool(row[3]))

    def _state(self, table: Table, state: Loaded) -> None:
        self.conn.execute(f"INSERT OR REPLACE INTO {STATE} (table_name, rows, last_key, checksum, done)"
                          " VALUES (?, ?, ?, ?, ?)",
                          (table.name, state.rows, _key_text(state.last_key), state.checksum, int(state.done)))

    def reset(self, table: Table, checksum: str) -> None:
        self.conn.execute("BEGIN")
        self.conn.execute(f'DELETE FROM "{table.name}"')
        self._state(table, Loaded(0, None, checksum, False))
        self.conn.execute("COMMIT")

    def write(self, table: Table, rows: list[tuple[Any, ...]], state: Loaded) -> None:
        marks = ", ".join(["?"] * len(table.columns))
        self.conn.execute("BEGIN")
        try:
            self.conn.executemany(f'INSERT INTO "{table.name}" ({quoted(table.columns)}) VALUES ({marks})', rows)
            self._state(table, state)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def fits(target: PostgresStaging | SqliteStaging, tables: list[Table], chosen: list[int]) -> None:
    """The target can take the copy: its tables are the source's, and it holds none of the workspaces."""
    for table in tables:
        have = target.tables.get(table.name)
        if have is None or have.columns != table.columns:
            raise MktError(409, f"The target's table {table.name} differs from the source's "
                                "(run `mkt db upgrade` on both).")
    taken = target.existing_workspaces(chosen)
    if taken:
        raise MktError(409, f"The target already holds workspace(s) {', '.join(map(str, taken))}: "
                            "a copy never merges into an existing workspace.")


def load(source: Any, target: PostgresStaging | SqliteStaging, plan: Plan, fixer: Fixer, batch: int,
         progress: Progress) -> int:
    """Stage the copy's rows of every workspace table (the instance-wide ones wait for the publish), each as
    `fixer` writes it, `batch` rows a commit, going on from where an earlier run stopped; the number of
    rows that run had already loaded."""
    copied = [t for t in plan.tables if not t.instance]
    progress.phase("Copying", sum(plan.counts[t.name] for t in copied))
    resumed_rows = 0
    for table in copied:
        checksum = plan.sums[table.name][1]
        state = target.loaded(table)
        if state is None or state.checksum != checksum or (not table.pks and not state.done):
            target.reset(table, checksum)  # (a table without a key cannot go on after its last row)
            state = Loaded(0, None, checksum, False)
        resumed_rows += state.rows
        progress.table(table.name, plan.counts[table.name], state.rows)
        progress.advance(state.rows)
        if state.done:
            continue
        rows: list[tuple[Any, ...]] = []
        last = state.last_key
        for row in source.rows(table, state.last_key):
            fixed = fixer.fix(table, row, None)
            last = table.key_of(row)
            if fixed is not None:
                rows.append(fixed)
            if len(rows) >= batch:
                state = Loaded(state.rows + len(rows), last, checksum, False)
                target.write(table, rows, state)
                progress.advance(len(rows))
                rows = []
        state = Loaded(state.rows + len(rows), last, checksum, True)
        target.write(table, rows, state)
        progress.advance(len(rows))
    return resumed_rows

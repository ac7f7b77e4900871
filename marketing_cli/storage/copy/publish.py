"""Stage 3, the publish, at once, and the verification inside it: the staged rows become the target's.

On PostgreSQL one transaction, under the writers' lock, checks that no copied key exists in the
live tables, moves the staged rows in (INSERT ... SELECT, the triggers off: the counters they
maintain are copied as rows), merges the instance-wide rows, sets every identity sequence past its
largest id, verifies each table's count and checksum against the source (verify.py), and drops the
staging schema. On SQLite the partial file gets the instance rows, its AUTOINCREMENT counters and
its triggers back, is verified, and is renamed onto the target.

The instance-wide rows: a target without any workspace takes the source's (they replace its seeded
ones); a target that already holds workspaces keeps its own and only gains the rows it lacks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage import db, postgres
from marketing_cli.storage.copy.load import STAGING, STATE, PostgresStaging, SqliteStaging
from marketing_cli.storage.copy.tables import Table, quoted
from marketing_cli.storage.copy.verify import verify


class PostgresTarget(PostgresStaging):
    """The staging schema (load.py), published into the live tables in one transaction."""

    def publish(self, tables: list[Table], instance_rows: dict[str, list[tuple[Any, ...]]],
                sums: dict[str, tuple[int, str]], workspace_ids: list[int]) -> dict[str, Any]:
        """Move the staged rows into the live tables, verified, in one transaction; the publish's figures."""
        import psycopg

        conn, live = self.conn, self.live
        notes: list[str] = []
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (postgres.WRITE_LOCK,))
                taken = self.existing_workspaces(workspace_ids)
                if taken:
                    raise MktError(409, f"The target already holds workspace(s) {', '.join(map(str, taken))}: "
                                        "nothing was published.")
                fresh = conn.execute(f'SELECT count(*) FROM "{live}".workspaces').fetchone()[0] == 0
                for table in tables:
                    if not table.instance:
                        keys = quoted(table.pks)
                        clash = conn.execute(
                            f'SELECT count(*) FROM "{live}"."{table.name}" WHERE ({keys}) IN'
                            f' (SELECT {keys} FROM {STAGING}."{table.name}")').fetchone()[0]
                        if clash:
                            raise MktError(409, f"{clash} row(s) of {table.name} already exist in the target with the "
                                                "same keys (a copy keeps the ids): nothing was published.")
                # ENABLE TRIGGER USER below makes every trigger ORIGIN: the ALWAYS ones (schema step 42,
                # services/contacts/batch_checks.py) are made ALWAYS again after it.
                always = {table.name: [r[0] for r in conn.execute(
                    "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal"
                    " AND tgenabled = 'A'", (f'"{live}"."{table.name}"',))] for table in tables}
                for table in tables:
                    conn.execute(f'ALTER TABLE "{live}"."{table.name}" DISABLE TRIGGER USER')
                for table in tables:
                    columns = quoted(table.columns)
                    if table.instance:
                        rows = instance_rows.get(table.name, [])
                        if not rows:
                            continue
                        others = [c for c in table.columns if c not in table.pks]
                        action = ("DO UPDATE SET " + ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in others)
                                  if fresh and others else "DO NOTHING")
                        marks = ", ".join(["%s"] * len(table.columns))
                        with conn.cursor() as cursor:
                            cursor.executemany(
                                f'INSERT INTO "{live}"."{table.name}" ({columns}) VALUES ({marks})'
                                f" ON CONFLICT ({quoted(table.pks)}) {action}", rows)
                    else:
                        conn.execute(f'INSERT INTO "{live}"."{table.name}" ({columns})'
                                     f' SELECT {columns} FROM {STAGING}."{table.name}"')
                for table in tables:
                    conn.execute(f'ALTER TABLE "{live}"."{table.name}" ENABLE TRIGGER USER')
                    for name in always[table.name]:
                        conn.execute(f'ALTER TABLE "{live}"."{table.name}" ENABLE ALWAYS TRIGGER "{name}"')
                sequences = self._set_sequences()
                verified = verify(tables, instance_rows, sums, notes, self._published, self._instance_row)
                conn.execute(f"DROP SCHEMA {STAGING} CASCADE")
        except psycopg.errors.IntegrityError as exc:
            raise MktError(409, "The target refused the copy (nothing was published): "
                                f"{str(exc).strip().splitlines()[0]}.") from None
        return {"sequences": sequences, "verified": verified, "notes": notes, "fresh_target": fresh}

    def _set_sequences(self) -> int:
        """Every identity sequence of the target past its table's largest id; how many were set."""
        count = 0
        for table in self.tables.values():
            if not table.identity:
                continue
            sequence = self.conn.execute("SELECT pg_get_serial_sequence(%s, 'id')",
                                         (f'"{self.live}"."{table.name}"',)).fetchone()[0]
            if sequence is None:
                continue
            top = self.conn.execute(f'SELECT max(id) FROM "{self.live}"."{table.name}"').fetchone()[0]
            if top is not None:
                self.conn.execute("SELECT setval(%s, %s)", (sequence, top))
                count += 1
        return count

    def _published(self, table: Table) -> Iterator[tuple[Any, ...]]:
        """The live rows whose keys are staged: the copy's rows, as published (verify.py sums them)."""
        keys = quoted(table.pks)
        with self.conn.cursor(name=f"verify_{table.name}") as cursor:
            cursor.itersize = 5000
            cursor.execute(f'SELECT {quoted(table.columns)} FROM "{self.live}"."{table.name}" WHERE ({keys}) IN'
                           f' (SELECT {keys} FROM {STAGING}."{table.name}")')
            yield from cursor

    def _instance_row(self, table: Table, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        where = " AND ".join(f'"{pk}" = %s' for pk in table.pks)
        return self.conn.execute(f'SELECT {quoted(table.columns)} FROM "{self.live}"."{table.name}" WHERE {where}',
                                 key).fetchone()


class SqliteTarget(SqliteStaging):
    """The partial file (load.py), verified and renamed onto the target."""

    def publish(self, tables: list[Table], instance_rows: dict[str, list[tuple[Any, ...]]],
                sums: dict[str, tuple[int, str]], workspace_ids: list[int]) -> dict[str, Any]:
        """Complete the partial file, verify it, and rename it onto the target; the publish's figures."""
        conn, notes = self.conn, []
        conn.execute("BEGIN")
        try:
            for table in tables:
                if table.instance and instance_rows.get(table.name):
                    marks = ", ".join(["?"] * len(table.columns))
                    conn.executemany(f'INSERT OR REPLACE INTO "{table.name}" ({quoted(table.columns)})'
                                     f" VALUES ({marks})", instance_rows[table.name])
            sequences = 0
            for table in tables:  # AUTOINCREMENT keys: sqlite_sequence past the largest id
                sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                   (table.name,)).fetchone()[0] or ""
                if not (table.identity and "AUTOINCREMENT" in sql.upper()):
                    continue
                top = conn.execute(f'SELECT max(id) FROM "{table.name}"').fetchone()[0]
                if top is not None:
                    if not conn.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?",
                                        (top, table.name)).rowcount:
                        conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table.name, top))
                    sequences += 1
            verified = verify(tables, instance_rows, sums, notes, self._published, self._instance_row)
            for _, sql in conn.execute("SELECT name, sql FROM mkt_copy_triggers").fetchall():
                conn.execute(sql)
            conn.execute(f"DROP TABLE {STATE}")
            conn.execute("DROP TABLE mkt_copy_triggers")
            broken = conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise MktError(500, f"The copy breaks {len(broken)} foreign key(s) (first: {tuple(broken[0])}); "
                                    f"nothing was published ({self.partial} is kept).")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("PRAGMA journal_mode = DELETE")  # folds the -wal in: one file to rename
        conn.close()
        self.conn = None
        os.chmod(self.partial, 0o600)
        os.rename(self.partial, self.path)
        return {"sequences": sequences, "verified": verified, "notes": notes, "fresh_target": True}

    def _published(self, table: Table) -> Iterator[tuple[Any, ...]]:
        """The partial file's rows of the table (it holds the copy's only)."""
        return self.conn.execute(f'SELECT {quoted(table.columns)} FROM "{table.name}"')

    def _instance_row(self, table: Table, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        where = " AND ".join(f'"{pk}" = ?' for pk in table.pks)
        return self.conn.execute(f'SELECT {quoted(table.columns)} FROM "{table.name}" WHERE {where}', key).fetchone()


def open_target(target: str) -> PostgresTarget | SqliteTarget:
    resolved = db.resolve_db_path(target)
    if isinstance(resolved, postgres.DatabaseUrl):
        return PostgresTarget(resolved)
    return SqliteTarget(Path(resolved))


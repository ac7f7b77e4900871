"""`mkt db copy`: move workspaces between the engines (docs/cli.md, docs/architecture.md "Two engines").

SQLite file -> PostgreSQL URL (moving over), PostgreSQL -> a new SQLite file (a local copy for
debugging); either engine on either side works. Generic over the tables: the table list,
columns, keys and foreign keys are read from the source's schema (sqlite-utils on a SQLite
file, the catalogs on PostgreSQL) and the tables are taken parents first.

The steps, all in the source's one read snapshot (BEGIN on SQLite, REPEATABLE READ on
PostgreSQL):

1. Check: every row of the selection is read once; what the target would refuse or change is
   a `Problem` with the row's key (NUL bytes in text, text that is not UTF-8, a value of the
   wrong type for its column, emails that differ only in case within a workspace). A problem
   without a `--fix` stops the copy before anything is written. The same pass counts and
   checksums the rows as they will be written.
2. Load: the workspace rows go, in batches, to a staging area: the schema `mkt_copy_staging`
   on PostgreSQL (COPY), a `FILE.mkt-copy-partial` file on SQLite. Each batch commits with its
   table's progress (`mkt_copy_state`), so a rerun after a kill goes on from there: a table
   whose source checksum is unchanged keeps what it has, any other restarts.
3. Publish, at once: on PostgreSQL one transaction checks that no copied key exists in the
   live tables, moves the staged rows in (INSERT ... SELECT, the triggers off: the counters
   they maintain are copied as rows), merges the instance-wide rows, sets every identity
   sequence past its largest id, verifies each table's count and checksum against the source,
   and drops the staging schema; on SQLite the partial file gets its triggers back and is
   renamed onto the target.

What one workspace's copy holds: each table's rows whose `workspace_id` is that workspace,
or, for a table without the column, whose parent (a foreign key, followed up) is in it. The
tables no foreign key ties to a workspace (plans, plan_allowances, addons, sms_rates,
instance_secrets, phone_zone_sets, whose ids are a hash of their zone list, the same on every
database) are the instance's: a target without any workspace takes the source's rows
(they replace its seeded ones); a target that already holds workspaces keeps its own and only
gains the rows it lacks. Rows with no workspace at all (a job of the instance) go with `--all`
only. Ids are kept (they are in URLs, webhooks and exports), so a target where one is taken
refuses the copy.

Checksums: each row's values in one canonical text form (the repr of the tuple of its values:
both engines return int, str, bytes or None here, so the text is the same whichever read it),
its md5 as a 128-bit number, summed mod 2^128: the same figure on both engines, whatever order
each returns the rows in.
"""

from __future__ import annotations

import csv
import hashlib
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage import db, postgres

STAGING = "mkt_copy_staging"
STATE = "mkt_copy_state"
PARTIAL_SUFFIX = ".mkt-copy-partial"
BATCH = 20_000
MOD = 1 << 128
# Unique per workspace when compared case-blind: the services store emails lower-cased, so two
# values that differ only in case are one address that the target's lookups would find twice.
CASE_BLIND = {"contacts": "email"}
FIXES = {"nul": ("strip", "replace"), "utf8": ("replace",), "type": ("null", "convert"),
         "case": ("keep", "keep-first")}
_SKIPPED_TABLES = ("sqlite_", "mkt_copy_", postgres.VERSION_TABLE)


# --- Schema -----------------------------------------------------------------------------------


@dataclass
class Table:
    name: str
    columns: list[str]
    types: list[str]  # INTEGER, TEXT or BLOB (SQLite's declared types; bigint, text, bytea)
    notnull: list[bool]
    pks: list[str]
    fks: list[tuple[str, str, str]]  # (column, parent table, parent column)
    scope: str | None = None  # the WHERE that selects the copy's rows ("" = all); None: instance-wide
    identity: bool = False

    @property
    def instance(self) -> bool:
        return self.scope is None

    def key_of(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(row[self.columns.index(pk)] for pk in self.pks)


_PG_TYPES = {"bigint": "INTEGER", "integer": "INTEGER", "smallint": "INTEGER", "text": "TEXT", "bytea": "BLOB"}


def _skipped(name: str) -> bool:
    return name.startswith(_SKIPPED_TABLES)


def sqlite_tables(conn: sqlite3.Connection) -> list[Table]:
    """The tables of a SQLite file, read with sqlite-utils."""
    import sqlite_utils

    database = sqlite_utils.Database(conn)
    tables = []
    for name in database.table_names():
        if _skipped(name):
            continue
        table = database[name]
        columns = table.columns
        pks = [pk for pk in table.pks if pk != "rowid"]
        tables.append(Table(
            name, [c.name for c in columns], [(c.type or "").upper() for c in columns],
            [bool(c.notnull) or c.name in pks for c in columns], pks,
            [(fk.column, fk.other_table, fk.other_column) for fk in table.foreign_keys],
            identity=pks == ["id"] and [c.type for c in columns if c.name == "id"] == ["INTEGER"]))
    return tables


def postgresql_tables(conn: Any) -> list[Table]:
    """The tables of a PostgreSQL database's current schema, read from pg_catalog (three queries in
    all: information_schema's views take seconds per table on a busy server)."""
    here = "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
    columns: dict[str, list[tuple[str, str, bool, bool]]] = {}
    for table, name, kind, notnull, identity in conn.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, NULL), a.attnotnull, a.attidentity <> ''"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            f" WHERE c.relnamespace = {here} AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped"
            " AND a.attgenerated = ''"  # contacts.data_doc: PostgreSQL computes it from data
            " ORDER BY c.relname, a.attnum").fetchall():
        columns.setdefault(table, []).append((name, kind, notnull, identity))
    pks: dict[str, list[str]] = {}
    for table, name in conn.execute(
            "SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
            " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
            f" WHERE c.relnamespace = {here} AND i.indisprimary"
            " ORDER BY c.relname, array_position(i.indkey::int2[], a.attnum)").fetchall():
        pks.setdefault(table, []).append(name)
    fks: dict[str, list[tuple[str, str, str]]] = {}
    for table, name, parent, parent_column in conn.execute(
            "SELECT c.relname, a.attname, p.relname, pa.attname FROM pg_constraint k"
            " JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid"
            " JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]"
            " JOIN pg_attribute pa ON pa.attrelid = k.confrelid AND pa.attnum = k.confkey[1]"
            f" WHERE k.contype = 'f' AND c.relnamespace = {here} ORDER BY 1, 2").fetchall():
        fks.setdefault(table, []).append((name, parent, parent_column))
    return [Table(name, [c[0] for c in cols], [_PG_TYPES.get(c[1], c[1].upper()) for c in cols],
                  [c[2] for c in cols], pks.get(name, []), fks.get(name, []),
                  identity=any(c[0] == "id" and c[3] for c in cols))
            for name, cols in sorted(columns.items()) if not _skipped(name)]


def ordered(tables: list[Table]) -> list[Table]:
    """Parents before children (foreign keys; a table's references to itself do not count)."""
    by_name = {t.name: t for t in tables}
    done: dict[str, Table] = {}

    def visit(table: Table, path: tuple[str, ...]) -> None:
        if table.name in done or table.name in path:
            return
        for _, parent, _ in sorted(table.fks):
            if parent != table.name and parent in by_name:
                visit(by_name[parent], (*path, table.name))
        done[table.name] = table

    for table in sorted(tables, key=lambda t: t.name):
        visit(table, ())
    return list(done.values())


def scope(tables: list[Table], workspace_ids: list[int] | None) -> list[Table]:
    """Give each table the WHERE that selects the copy's rows (None: an instance-wide table)."""
    chosen = "" if workspace_ids is None else ", ".join(str(int(i)) for i in workspace_ids)
    scoped: dict[str, Table] = {}
    for table in tables:  # parents first
        if table.name == "workspaces":
            table.scope = "" if workspace_ids is None else f"id IN ({chosen})"
        elif "workspace_id" in table.columns:
            table.scope = "" if workspace_ids is None else f"workspace_id IN ({chosen})"
        else:
            for column, parent, parent_column in sorted(table.fks):
                if parent in scoped and not scoped[parent].instance:
                    above = scoped[parent].scope
                    table.scope = "" if workspace_ids is None else (
                        f'"{column}" IN (SELECT "{parent_column}" FROM "{parent}" WHERE {above})')
                    break
        scoped[table.name] = table
    return tables


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _where(table: Table, after: tuple[Any, ...] | None, placeholder: str) -> str:
    parts = [table.scope] if table.scope else []
    if after is not None and table.pks:
        keys = _quoted(table.pks)
        marks = ", ".join([placeholder] * len(table.pks))
        parts.append(f"({keys}) > ({marks})" if len(table.pks) > 1 else f"{keys} > {marks}")
    return (" WHERE " + " AND ".join(parts)) if parts else ""


def select_sql(table: Table, after: tuple[Any, ...] | None, placeholder: str) -> str:
    order = _quoted(table.pks) if table.pks else "1"
    return f'SELECT {_quoted(table.columns)} FROM "{table.name}"{_where(table, after, placeholder)} ORDER BY {order}'


# --- Checksums --------------------------------------------------------------------------------


def canonical(value: Any) -> str:
    """A value's text in the report (a row id): NULL as \\N, bytes as \\x + hex, anything else as text."""
    if value is None:
        return "\\N"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    return str(value)


def row_digest(row: Sequence[Any]) -> int:
    """A row's md5 as a number: of the repr of its values (int, str, bytes or None on both engines, so
    the same text whichever returned it; a str's repr escapes what it must, an undecodable byte included)."""
    return int.from_bytes(hashlib.md5(repr(tuple(row)).encode("utf-8", "surrogateescape")).digest(), "big")


def hexsum(total: int) -> str:
    return f"{total % MOD:032x}"


# --- Checks and fixes -------------------------------------------------------------------------


@dataclass
class Problem:
    table: str
    row_id: str
    column: str
    problem: str
    action: str = "stopped"


def parse_fixes(items: Sequence[str]) -> dict[str, str]:
    """`nul=strip,case=keep-first` (repeatable) -> {"nul": "strip", "case": "keep-first"}."""
    fixes: dict[str, str] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            kind, _, how = part.partition("=")
            if kind not in FIXES or how not in FIXES[kind]:
                choices = "; ".join(f"{k}={'|'.join(v)}" for k, v in FIXES.items())
                raise MktError(422, f"Unknown fix {part!r}: choose from {choices}.")
            fixes[kind] = how
    return fixes


class Fixer:
    """What the check pass finds in a row, and the row as it will be written (None: dropped)."""

    def __init__(self, fixes: dict[str, str]) -> None:
        self.fixes = fixes
        self.dropped_keys: dict[tuple[str, str], set[Any]] = {}  # (table, column) -> values dropped
        self.case_dropped: dict[tuple[Any, ...], str] = {}  # contact key -> why
        self.referenced: set[tuple[str, str]] = set()  # (table, column) some foreign key points at

    def fix(self, table: Table, row: Sequence[Any], problems: list[Problem] | None) -> tuple[Any, ...] | None:
        types = table.types
        for i, value in enumerate(row):  # the common case: every value fits its column
            if value is not None and not _fits(types[i], value):
                break
        else:
            if not (self.dropped_keys or self.case_dropped):
                return tuple(row)
        key = table.key_of(row) if table.pks else ()
        why = None
        if table.name in CASE_BLIND and key in self.case_dropped:
            why = self.case_dropped[key]
        else:
            for column, parent, parent_column in table.fks:
                dropped = self.dropped_keys.get((parent, parent_column))
                if dropped:
                    value = row[table.columns.index(column)]
                    if value in dropped:
                        why = f"depends on a dropped {parent} row ({parent_column} {value})"
                        break
        if why is not None:
            if problems is not None:
                problems.append(Problem(table.name, _row_id(key), "", why, "dropped"))
            self._drop(table, row)
            return None
        out = list(row)
        for i, value in enumerate(row):
            if value is None:
                continue
            column, kind = table.columns[i], table.types[i]
            found = self._check(kind, value)
            if found is None:
                continue
            problem, fix_kind = found
            fixed, action = self._apply(fix_kind, kind, value, table.notnull[i])
            if action != "stopped":
                out[i] = fixed
            if problems is not None:
                problems.append(Problem(table.name, _row_id(key), column, problem, action))
        return tuple(out)

    def _drop(self, table: Table, row: Sequence[Any]) -> None:
        """Remember a dropped row's referenced values, so that the rows that depend on it go too."""
        for i, column in enumerate(table.columns):
            if (table.name, column) in self.referenced:
                self.dropped_keys.setdefault((table.name, column), set()).add(row[i])

    @staticmethod
    def _check(kind: str, value: Any) -> tuple[str, str] | None:
        if kind == "INTEGER" and not isinstance(value, int):
            what = "text" if isinstance(value, str) else "a real number" if isinstance(value, float) else "a blob"
            return f"{what} in an INTEGER column", "type"
        if kind == "TEXT":
            if not isinstance(value, str):
                what = "a blob" if isinstance(value, bytes) else "a number"
                return f"{what} in a TEXT column", "type"
            if "\x00" in value:
                return "NUL byte in text", "nul"
            if _has_surrogates(value):
                return "text that is not UTF-8", "utf8"
        if kind == "BLOB" and not isinstance(value, bytes):
            return "text in a BLOB column", "type"
        return None

    def _apply(self, fix_kind: str, kind: str, value: Any, notnull: bool) -> tuple[Any, str]:
        how = self.fixes.get(fix_kind)
        if how is None:
            return value, "stopped"
        if fix_kind == "nul":
            value = value.replace("\x00", "" if how == "strip" else "\ufffd")
            if _has_surrogates(value):  # both at once: fixed only when utf8 is too
                return value, "stopped" if "utf8" not in self.fixes else "NUL stripped, UTF-8 replaced"
            return value, "NUL bytes stripped" if how == "strip" else "NUL bytes replaced by U+FFFD"
        if fix_kind == "utf8":
            return _utf8_replaced(value), "invalid bytes replaced by U+FFFD"
        if how == "convert":
            converted = _converted(kind, value)
            if converted is not None:
                return converted, f"converted to {kind}"
        if notnull:
            return value, "stopped"
        return None, "set to NULL"


def _fits(kind: str, value: Any) -> bool:
    kind_of = type(value)
    if kind == "TEXT":
        return kind_of is str and "\x00" not in value and (value.isascii() or not _has_surrogates(value))
    if kind == "INTEGER":
        return kind_of is int
    if kind == "BLOB":
        return kind_of is bytes
    return True


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _utf8_replaced(text: str) -> str:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _converted(kind: str, value: Any) -> Any:
    try:
        if kind == "INTEGER":
            return int(value) if isinstance(value, (str, float)) and float(value) == int(float(value)) else None
        if kind == "TEXT":
            return value.decode("utf-8") if isinstance(value, bytes) else str(value)
        if kind == "BLOB":
            return str(value).encode("utf-8", "surrogateescape")
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None
    return None


def _row_id(key: tuple[Any, ...]) -> str:
    return "/".join(canonical(k) for k in key)


# --- Sources ----------------------------------------------------------------------------------


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


def _psycopg(url: postgres.DatabaseUrl, autocommit: bool = True) -> Any:
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
        self.conn = _psycopg(url)
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


# --- Targets ----------------------------------------------------------------------------------


@dataclass
class Loaded:
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


class PostgresTarget:
    """Load into the schema mkt_copy_staging, publish into the live tables in one transaction."""

    engine = "postgresql"

    def __init__(self, url: postgres.DatabaseUrl) -> None:
        self.label = str(url)
        db.connect(url).close()  # the schema, made or brought up to date
        self.conn = _psycopg(url)
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
                with self.conn.cursor().copy(f'COPY {STAGING}."{table.name}" ({_quoted(table.columns)})'
                                             " FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            self._state(table, state)

    def publish(self, tables: list[Table], instance_rows: dict[str, list[tuple[Any, ...]]],
                sums: dict[str, tuple[int, str]], workspace_ids: list[int]) -> dict[str, Any]:
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
                        keys = _quoted(table.pks)
                        clash = conn.execute(
                            f'SELECT count(*) FROM "{live}"."{table.name}" WHERE ({keys}) IN'
                            f' (SELECT {keys} FROM {STAGING}."{table.name}")').fetchone()[0]
                        if clash:
                            raise MktError(409, f"{clash} row(s) of {table.name} already exist in the target with the "
                                                "same keys (a copy keeps the ids): nothing was published.")
                for table in tables:
                    conn.execute(f'ALTER TABLE "{live}"."{table.name}" DISABLE TRIGGER USER')
                for table in tables:
                    columns = _quoted(table.columns)
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
                                f" ON CONFLICT ({_quoted(table.pks)}) {action}", rows)
                    else:
                        conn.execute(f'INSERT INTO "{live}"."{table.name}" ({columns})'
                                     f' SELECT {columns} FROM {STAGING}."{table.name}"')
                for table in tables:
                    conn.execute(f'ALTER TABLE "{live}"."{table.name}" ENABLE TRIGGER USER')
                sequences = self._set_sequences()
                verified = self._verify(tables, instance_rows, sums, notes)
                conn.execute(f"DROP SCHEMA {STAGING} CASCADE")
        except psycopg.errors.IntegrityError as exc:
            raise MktError(409, "The target refused the copy (nothing was published): "
                                f"{str(exc).strip().splitlines()[0]}.") from None
        return {"sequences": sequences, "verified": verified, "notes": notes, "fresh_target": fresh}

    def _set_sequences(self) -> int:
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

    def _verify(self, tables: list[Table], instance_rows: dict[str, list[tuple[Any, ...]]],
                sums: dict[str, tuple[int, str]], notes: list[str]) -> int:
        verified = 0
        for table in tables:
            if table.instance:
                _verify_instance(table, instance_rows.get(table.name, []), self._instance_row, notes)
                continue
            keys = _quoted(table.pks)
            total, count = 0, 0
            with self.conn.cursor(name=f"verify_{table.name}") as cursor:
                cursor.itersize = 5000
                cursor.execute(f'SELECT {_quoted(table.columns)} FROM "{self.live}"."{table.name}" WHERE ({keys}) IN'
                               f' (SELECT {keys} FROM {STAGING}."{table.name}")')
                for row in cursor:
                    total += row_digest(row)
                    count += 1
            _compare(table, sums[table.name], (count, hexsum(total)))
            verified += 1
        return verified

    def _instance_row(self, table: Table, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        where = " AND ".join(f'"{pk}" = %s' for pk in table.pks)
        return self.conn.execute(f'SELECT {_quoted(table.columns)} FROM "{self.live}"."{table.name}" WHERE {where}',
                                 key).fetchone()

    def close(self) -> None:
        self.conn.close()


class SqliteTarget:
    """A new SQLite file: loaded as FILE.mkt-copy-partial (triggers off), renamed into place when verified."""

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
            self.conn.executemany(f'INSERT INTO "{table.name}" ({_quoted(table.columns)}) VALUES ({marks})', rows)
            self._state(table, state)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def publish(self, tables: list[Table], instance_rows: dict[str, list[tuple[Any, ...]]],
                sums: dict[str, tuple[int, str]], workspace_ids: list[int]) -> dict[str, Any]:
        conn, notes = self.conn, []
        conn.execute("BEGIN")
        try:
            for table in tables:
                if table.instance and instance_rows.get(table.name):
                    marks = ", ".join(["?"] * len(table.columns))
                    conn.executemany(f'INSERT OR REPLACE INTO "{table.name}" ({_quoted(table.columns)})'
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
            verified = 0
            for table in tables:
                if table.instance:
                    _verify_instance(table, instance_rows.get(table.name, []), self._instance_row, notes)
                    continue
                total, count = 0, 0
                for row in conn.execute(f'SELECT {_quoted(table.columns)} FROM "{table.name}"'):
                    total += row_digest(row)
                    count += 1
                _compare(table, sums[table.name], (count, hexsum(total)))
                verified += 1
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

    def _instance_row(self, table: Table, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        where = " AND ".join(f'"{pk}" = ?' for pk in table.pks)
        return self.conn.execute(f'SELECT {_quoted(table.columns)} FROM "{table.name}" WHERE {where}', key).fetchone()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def _compare(table: Table, source: tuple[int, str], target: tuple[int, str]) -> None:
    if tuple(source) != tuple(target):
        raise MktError(500, f"Verification failed for {table.name}: the source has {source[0]} row(s), checksum "
                            f"{source[1]}; the target {target[0]}, checksum {target[1]}. Nothing was published.")


def _verify_instance(table: Table, rows: list[tuple[Any, ...]], fetch: Callable[..., Any], notes: list[str]) -> None:
    missing = differ = 0
    for row in rows:
        got = fetch(table, table.key_of(row))
        if got is None:
            missing += 1
        elif row_digest(got) != row_digest(row):
            differ += 1
    if missing:
        raise MktError(500, f"Verification failed for {table.name}: {missing} instance row(s) are missing in the "
                            "target. Nothing was published.")
    if differ:
        notes.append(f"{table.name}: the target kept its own version of {differ} row(s)")


# --- The copy ---------------------------------------------------------------------------------


class Progress:
    """What the copy tells its face as it goes (the CLI draws rich bars; the default says nothing)."""

    def phase(self, text: str, total: int) -> None: ...

    def table(self, name: str, total: int, done: int) -> None: ...

    def advance(self, rows: int) -> None: ...


@dataclass
class Plan:
    tables: list[Table]
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, tuple[int, str]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    instance_rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)


def open_source(target: Any) -> Any:
    resolved = db.resolve_db_path(target)
    if isinstance(resolved, postgres.DatabaseUrl):
        return PostgresSource(resolved)
    return SqliteSource(resolved)


def open_target(target: str) -> Any:
    resolved = db.resolve_db_path(target)
    if isinstance(resolved, postgres.DatabaseUrl):
        return PostgresTarget(resolved)
    return SqliteTarget(Path(resolved))


def _case_variants(source: Any, table: Table, column: str, fixer: Fixer, problems: list[Problem]) -> None:
    """Contacts whose email differs only in case from another of the same workspace (the lowest id is first)."""
    position, ws = table.columns.index(column), table.columns.index("workspace_id")
    first: dict[tuple[Any, str], tuple[Any, ...]] = {}
    keep_first = fixer.fixes.get("case") == "keep-first"
    action = {"keep": "kept as it is", "keep-first": "dropped"}.get(fixer.fixes.get("case", ""), "stopped")
    for row in source.rows(table):
        value = row[position]
        if not isinstance(value, str):
            continue
        folded = (row[ws], value.casefold())
        key = table.key_of(row)
        if folded not in first:
            first[folded] = key
            continue
        why = f"{column} differs only in case from {table.name} {_row_id(first[folded])}"
        if keep_first:
            fixer.case_dropped[key] = why
        else:
            problems.append(Problem(table.name, _row_id(key), column, why, action))


def check(source: Any, tables: list[Table], fixer: Fixer, progress: Progress) -> Plan:
    plan = Plan(tables)
    fixer.referenced = {(parent, parent_column) for t in tables for _, parent, parent_column in t.fks}
    for table in tables:
        if table.name in CASE_BLIND and not table.instance:
            _case_variants(source, table, CASE_BLIND[table.name], fixer, plan.problems)
    totals = {t.name: source.scalar(f'SELECT count(*) FROM "{t.name}"{_where(t, None, "?")}') for t in tables}
    progress.phase("Checking", sum(totals.values()))
    for table in tables:
        progress.table(table.name, totals[table.name], 0)
        total, count, kept = 0, 0, []
        for row in source.rows(table):
            fixed = fixer.fix(table, row, plan.problems)
            progress.advance(1)
            if fixed is None:
                continue
            total += row_digest(fixed)
            count += 1
            if table.instance:
                kept.append(fixed)
        plan.counts[table.name] = count
        plan.sums[table.name] = (count, hexsum(total))
        if table.instance:
            plan.instance_rows[table.name] = kept
    return plan


def write_report(path: str, problems: list[Problem]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["table", "row_id", "column", "problem", "action"])
        for p in problems:
            writer.writerow([p.table, p.row_id.encode("utf-8", "replace").decode("utf-8"), p.column, p.problem,
                             p.action])


def summary(problems: list[Problem]) -> list[dict[str, Any]]:
    counted = Counter((p.table, p.column, p.problem.split(" from ")[0], p.action) for p in problems)
    return [{"table": t, "column": c, "problem": pr, "action": a, "rows": n}
            for (t, c, pr, a), n in sorted(counted.items())]


def copy(source_target: Any, to: str, *, workspace_ids: list[int] | None, fixes: dict[str, str],
         report: str | None = None, restart: bool = False, batch: int = BATCH,
         progress: Progress | None = None) -> dict[str, Any]:
    """Copy the workspaces (None: all of them) from the database `source_target` to `to`; returns the report."""
    progress = progress or Progress()
    source = open_source(source_target)
    target = None
    try:
        if source.version != db.latest_version():
            raise MktError(409, f"The source {source.label} has schema version {source.version}, this mkt "
                                f"{db.latest_version()}: run `mkt db upgrade` on it first.")
        if workspace_ids is not None:
            found = {r[0] for r in source.conn.execute(
                "SELECT id FROM workspaces WHERE id IN (" + ", ".join(str(int(i)) for i in workspace_ids) + ")")}
            missing = [i for i in workspace_ids if i not in found]
            if missing:
                raise MktError(404, f"No workspace {', '.join(map(str, missing))} in {source.label}.")
        chosen = workspace_ids if workspace_ids is not None else [
            r[0] for r in source.conn.execute("SELECT id FROM workspaces ORDER BY id")]
        if str(db.resolve_db_path(to)) == source.label:
            raise MktError(422, "The target is the source: choose another database.")
        tables = scope(ordered(source.tables), workspace_ids)
        fixer = Fixer(fixes)
        plan = check(source, tables, fixer, progress)
        stopped = [p for p in plan.problems if p.action == "stopped"]
        if report:
            write_report(report, plan.problems)
        result: dict[str, Any] = {
            "source": source.label, "target": str(db.resolve_db_path(to)),
            "workspaces": chosen, "fixes": fixes, "problems": summary(plan.problems),
            "rows_touched": len({(p.table, p.row_id) for p in plan.problems if p.action != "stopped"}),
            "report": report}
        if stopped:
            shown = "; ".join(f"{p.table} {p.row_id} {p.column}: {p.problem}".replace("  ", " ")
                              for p in stopped[:5])
            more = f" (and {len(stopped) - 5} more)" if len(stopped) > 5 else ""
            where = f"every one is in {report}" if report else "add --report FILE.csv for the list"
            raise MktError(422, f"The source has {len(stopped)} value(s) the target would refuse or change: "
                                f"{shown}{more}. Nothing was copied; {where}, and choose what to do with "
                                "--fix (nul=strip|replace, utf8=replace, type=null|convert, case=keep|keep-first).")
        target = open_target(to)
        for table in tables:
            have = target.tables.get(table.name)
            if have is None or have.columns != table.columns:
                raise MktError(409, f"The target's table {table.name} differs from the source's "
                                    "(run `mkt db upgrade` on both).")
        taken = target.existing_workspaces(chosen)
        if taken:
            raise MktError(409, f"The target already holds workspace(s) {', '.join(map(str, taken))}: "
                                "a copy never merges into an existing workspace.")
        run = f"{source.label} workspaces={'all' if workspace_ids is None else ','.join(map(str, chosen))}" \
              f" fixes={','.join(f'{k}={v}' for k, v in sorted(fixes.items()))}"
        resumed = target.open_run(run, tables, restart)
        result["resumed"] = resumed
        copied = [t for t in tables if not t.instance]
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
        progress.phase("Publishing", 0)
        published = target.publish(tables, plan.instance_rows, plan.sums, chosen)
        result.update(published)
        result["resumed_rows"] = resumed_rows
        result["tables"] = [{"table": t.name, "rows": plan.counts[t.name], "checksum": plan.sums[t.name][1],
                             "scope": "instance" if t.instance else "workspace"} for t in tables]
        result["rows"] = sum(plan.counts[t.name] for t in copied)
        return result
    finally:
        source.close()
        if target is not None:
            target.close()

"""What a copy takes, and in which order: the tables, read from the source's schema, parents first,
each with the WHERE that selects the copy's rows (marketing_cli/storage/copy/__init__.py draws the stages).

Generic over the tables: the table list, columns, keys and foreign keys are read from the
source's schema (sqlite-utils on a SQLite file, the catalogs on PostgreSQL). What one
workspace's copy holds: each table's rows whose `workspace_id` is that workspace, or, for a
table without the column, whose parent (a foreign key, followed up) is in it. The tables no
foreign key ties to a workspace are the instance's (`Table.instance`: no scope).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marketing_cli.storage import postgres

# deferred_field_indexes: the source's own indexes an import dropped for its load (storage/
# deferred_indexes.py), rebuilt by the connection the copy opens on it; the copy makes its own.
_SKIPPED_TABLES = ("sqlite_", "mkt_copy_", "deferred_field_indexes", postgres.VERSION_TABLE)


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


def quoted(names: Sequence[str]) -> str:
    """Column names as a quoted SQL list."""
    return ", ".join(f'"{n}"' for n in names)


def where_sql(table: Table, after: tuple[Any, ...] | None, placeholder: str) -> str:
    """The WHERE of the copy's rows of `table`, those past the key `after` only when given (a resumed load)."""
    parts = [table.scope] if table.scope else []
    if after is not None and table.pks:
        keys = quoted(table.pks)
        marks = ", ".join([placeholder] * len(table.pks))
        parts.append(f"({keys}) > ({marks})" if len(table.pks) > 1 else f"{keys} > {marks}")
    return (" WHERE " + " AND ".join(parts)) if parts else ""


def select_sql(table: Table, after: tuple[Any, ...] | None, placeholder: str) -> str:
    """The copy's rows of `table` in key order (the order a resumed load goes on in)."""
    order = quoted(table.pks) if table.pks else "1"
    return f'SELECT {quoted(table.columns)} FROM "{table.name}"{where_sql(table, after, placeholder)} ORDER BY {order}'

"""The one builder of a field value's SQL: its JSON path, its expression and its index.

A contact's custom field values live in `contacts.data`, a JSON object keyed by the
field's integer id as text (docs/architecture.md, "How field values are stored").
Every query that reads a value (contact search, segment filters, the importer) and the
per-field expression index that answers them are written here, so they always spell
the expression the same way: SQLite uses an expression index only for a query that
writes exactly the indexed expression.

The id is an integer we read from our own `fields` table (`int()` here makes sure),
never user text: it is the only thing pasted into the SQL.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.storage.dialect import postgresql


def path(field_id: Any) -> str:
    """The SQL string literal of the field's JSON path: '$."7"'."""
    return f"""'$."{int(field_id)}"'"""


def value_expr(field_id: Any, table: str = "") -> str:
    """`json_extract(data, '$."7"')` (`table`: an alias or table name to qualify `data`)."""
    column = f"{table}.data" if table else "data"
    return f"json_extract({column}, {path(field_id)})"


def extract_expr(conn: Any, field_id: Any, table: str = "") -> str:
    """`value_expr`'s answer (json_extract's, whatever the stored type), in an expression the
    engine computes fastest per row: PostgreSQL's mkt_field_extract, which the planner inlines
    (json_extract there: 62 us a call before step 23 inlined it, 9 us after; schema.postgresql.sql step 24),
    reading the parsed document (`data_doc`)."""
    if not postgresql(conn):
        return value_expr(field_id, table)
    return f"mkt_field_extract({_document(table)}, '{int(field_id)}')"


def data_columns(conn: Any, table: str) -> str:
    """The columns a subquery over contacts passes on for field expressions over its rows:
    `c.data`, and on PostgreSQL also `c.data_doc`, which they read there."""
    return f"{table}.data, {table}.data_doc" if postgresql(conn) else f"{table}.data"


def _document(table: str) -> str:
    """PostgreSQL's parsed copy of a contact's data, `data_doc` (schema.postgresql.sql step 30):
    what the typed and extracted values read there, so no expression parses the text again."""
    return f"{table}.data_doc" if table else "data_doc"



def set_value_expr(conn: Any, field_id: Any) -> str:
    """SQL of a contact's data with the field's member set to the JSON text of the one
    parameter, as SQLite's json_set (the member keeps its place)."""
    if postgresql(conn):
        return f"(data::jsonb || jsonb_build_object('{int(field_id)}', ?::jsonb))::text"
    return f"json_set(data, {path(field_id)}, json(?))"


def remove_value_expr(conn: Any, field_id: Any) -> str:
    """SQL of a contact's data without the field's member, as SQLite's json_remove."""
    if postgresql(conn):
        return f"(data::jsonb - '{int(field_id)}')::text"
    return f"json_remove(data, {path(field_id)})"

def array_length_expr(field_id: Any, table: str = "") -> str:
    """How many options a multi-select value holds (NULL when it has none stored)."""
    column = f"{table}.data" if table else "data"
    return f"json_array_length({column}, {path(field_id)})"


def each_expr(field_id: Any, table: str) -> str:
    """`json_each(<table>.data, '$."7"')`: the options of a multi-select value, as rows."""
    return f"json_each({table}.data, {path(field_id)})"


# A custom field's value (contacts.data keyed by the field's id). SQLite's json_extract answers
# in the stored JSON type; PostgreSQL's is text, so there the value is typed by the field's
# type (mkt_field_number / mkt_field_boolean / mkt_field_text in schema.postgresql.sql): a
# number compares as a number, a boolean as 1/0. The per-field expression index is built on
# the same expression (create_index), so the planner uses it on both engines. These read
# `data_doc`, the document PostgreSQL parses once when a contact is written (step 30).
_PG_FIELD_FUNCTIONS = {"NUMBER": "mkt_field_number", "BOOLEAN": "mkt_field_boolean"}


def typed_value_expr(conn: Any, field_id: Any, field_type: str, table: str = "") -> str:
    """The SQL expression of one field's value: `json_extract(data, '$."7"')` on SQLite,
    typed by `field_type` on PostgreSQL (`mkt_field_number(data_doc, '7')` for a NUMBER)."""
    if not postgresql(conn):
        return value_expr(field_id, table)
    function = _PG_FIELD_FUNCTIONS.get(field_type, "mkt_field_text")
    return f"{function}({_document(table)}, '{int(field_id)}')"


def index_expr(conn: Any, field_id: Any) -> str:
    """The field's value as its index `contacts_field_<id>` filters it (typed_value_expr of the
    field's type; SQLite's needs no look-up): `<index_expr> IS NOT NULL` is the index's predicate."""
    return typed_value_expr(conn, field_id, _field_type(conn, field_id))


def _field_type(conn: Any, field_id: Any) -> str:
    if not postgresql(conn):
        return "TEXT"
    row = conn.execute("SELECT type FROM fields WHERE id = ?", (int(field_id),)).fetchone()
    return row[0] if row else "TEXT"


# --- values of any length in the index ------------------------------------------------------
#
# A PostgreSQL btree entry holds at most 2704 bytes (a third of a page; a longer one fails the
# write: "index row size ... exceeds btree version 4 maximum 2704"), and the API accepts a text
# value of any length up to its body limit (1 MiB: the specification sets no length for a
# field's value). So on PostgreSQL the index of a text-valued field (every type but NUMBER and
# BOOLEAN) holds the value's first PREFIX characters, in code point order (COLLATE "C", SQLite's
# order, in which a prefix keeps the order of the values), and a comparison reads the index by
# the prefix, then rechecks the whole value (`compare`). 256 characters (at most 1 KiB of UTF-8)
# hold every name, city or date whole, so for them the index answers alone. SQLite's index
# entries have no size limit: there the index holds the whole value and nothing changes.
PREFIX = 256


def prefixed(conn: Any, field_type: str) -> bool:
    """Whether the field's index holds a prefix of the value (PostgreSQL, a text-valued type)."""
    return postgresql(conn) and field_type not in _PG_FIELD_FUNCTIONS


def key_expr(conn: Any, field_id: Any, field_type: str, table: str = "") -> str:
    """The expression the field's index `contacts_field_<id>` holds: the typed value, or on
    PostgreSQL for a text-valued field its first PREFIX characters in code point order."""
    expr = typed_value_expr(conn, field_id, field_type, table)
    return f'left({expr}, {PREFIX}) COLLATE "C"' if prefixed(conn, field_type) else expr


_PREFIX_BOUND = {"=": "=", ">": ">=", ">=": ">=", "<": "<=", "<=": "<="}


def compare(conn: Any, field_id: Any, field_type: str, operator: str, value: Any,
            table: str = "") -> tuple[str, list[Any]]:
    """SQL and parameters of `<field's value> <operator> <value>` (=, <, >, <=, >=) that the
    field's index answers. On PostgreSQL, for a text value, in code point order (SQLite's):
    a value shorter than PREFIX compares with a stored value as with its prefix (`v > p` exactly
    when `left(v, 256) > p`), so the index answers alone; a longer one reads the index by the
    prefix's bound (`v > p` implies `left(v, 256) >= left(p, 256)`), then compares the whole value."""
    expr = typed_value_expr(conn, field_id, field_type, table)
    if not prefixed(conn, field_type) or not isinstance(value, str):
        return f"{expr} {operator} ?", [value]
    key = key_expr(conn, field_id, field_type, table)
    if len(value) < PREFIX:
        return f"{key} {operator} ?", [value]
    return f"({key} {_PREFIX_BOUND[operator]} ? AND {expr} COLLATE \"C\" {operator} ?)", [value[:PREFIX], value]


def is_in(conn: Any, field_id: Any, field_type: str, values: list[Any], table: str = "") -> tuple[str, list[Any]]:
    """SQL and parameters of `<field's value> IN (<values>)`, read from the field's index as `compare` does."""
    expr = typed_value_expr(conn, field_id, field_type, table)
    marks = ", ".join("?" for _ in values)
    if not prefixed(conn, field_type) or not all(isinstance(v, str) for v in values):
        return f"{expr} IN ({marks})", list(values)
    bound = f"{key_expr(conn, field_id, field_type, table)} IN ({marks})"
    if all(len(v) < PREFIX for v in values):
        return bound, list(values)
    return f"({bound} AND {expr} IN ({marks}))", [*(v[:PREFIX] for v in values), *values]


def index_name(field_id: Any) -> str:
    return f"contacts_field_{int(field_id)}"


def create_index(conn: sqlite3.Connection, field_id: Any) -> None:
    """The expression index for one field's values.

    Partial on `IS NOT NULL`: it holds only contacts that have a value for the field, which
    are contacts of the field's own workspace, so a file with many workspaces (or sparse
    fields) does not pay an index entry per field for every contact. SQLite still uses it
    for =, <, >, LIKE and IN on the same expression, since each implies IS NOT NULL.
    """
    field_type = _field_type(conn, field_id)  # the value typed by it on PostgreSQL
    expr = typed_value_expr(conn, field_id, field_type)
    key = f"({key_expr(conn, field_id, field_type)})" if prefixed(conn, field_type) else expr
    conn.execute(f"CREATE INDEX IF NOT EXISTS {index_name(field_id)} ON contacts(workspace_id, {key})"
                 f" WHERE {expr} IS NOT NULL")


def drop_index(conn: sqlite3.Connection, field_id: Any) -> None:
    """The field's expression index goes with the field (deleting it, services/deletion/audience.py)."""
    conn.execute(f"DROP INDEX IF EXISTS {index_name(field_id)}")


def create_all_indexes(conn: sqlite3.Connection) -> None:
    """Indexes for every field that keeps its values in `data` (after an upgrade)."""
    for row in conn.execute(
        "SELECT id FROM fields WHERE merge_tag NOT IN ('email_address', 'phone_number')"
    ).fetchall():
        create_index(conn, row[0])

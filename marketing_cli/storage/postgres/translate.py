"""SQLite's spelling of a statement as PostgreSQL's: every statement the services run passes once
through `translate` (cached per text):

- `?` and `:name` placeholders become psycopg's `%s` and `%(name)s` (a literal `%` is doubled);
- `temp.name` (a temporary table) becomes `pg_temp.name`, and `WITHOUT ROWID` goes;
- `INSERT OR IGNORE` becomes `INSERT ... ON CONFLICT DO NOTHING`;
- `IS` / `IS NOT` between values become `IS [NOT] DISTINCT FROM`, and SQLite's `+column` (an index
  hint) a plain column.

Its parameters are bound as SQLite would take them (`bind`), and an INSERT into a table whose key
is generated answers `lastrowid` through `RETURNING id` (`returning_id`). `BEGIN` and `PRAGMA` are
not translated: the connection answers them itself (connection.py).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_QUOTED = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")""")
_PLACEHOLDER = re.compile(r"\?(\d+)?|%|(?<![:\w]):([A-Za-z_]\w*)|--[^\n]*")
# SQLite's `+column` (an ORDER BY that must not use the column's index) is a plain column here.
_UNARY_PLUS = re.compile(r"((?:ORDER|GROUP)\s+BY\s+|,\s*|\(\s*)\+(?=[A-Za-z_])", re.I)
_IS_NOT = re.compile(r"\bIS\s+NOT\s+(?!NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_IS = re.compile(r"\bIS\s+(?!NOT\b|NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
# SQLite's `temp.table` (the connection's temporary database) is PostgreSQL's `pg_temp.table`.
_TEMP = re.compile(r"(?<![\w.])temp\.(?=[A-Za-z_])", re.I)
# A table `WITHOUT ROWID` (SQLite's clustered-by-key storage) is an ordinary table here.
_WITHOUT_ROWID = re.compile(r"\)\s*WITHOUT\s+ROWID\b", re.I)


@lru_cache(maxsize=4096)
def translate(sql: str) -> tuple[str, bool]:
    """SQLite's spelling of a statement as PostgreSQL's (see the module docstring), and whether its
    placeholders are numbered (`?1`: the parameters are then passed by name, p1, p2, ...)."""
    numbered = False

    def placeholder(match: re.Match[str]) -> str:
        nonlocal numbered
        token = match.group(0)
        if token == "%":
            return "%%"
        if token.startswith("--"):
            return ""
        if token.startswith("?"):
            if match.group(1):
                numbered = True
                return f"%(p{match.group(1)})s"
            return "%s"
        return f"%({match.group(2)})s"

    parts = _QUOTED.split(sql)
    for i in range(0, len(parts), 2):  # the even parts are outside quotes
        text = _PLACEHOLDER.sub(placeholder, parts[i])
        text = _UNARY_PLUS.sub(r"\1", text)
        text = _IS_NOT.sub("IS DISTINCT FROM ", text)
        text = _TEMP.sub("pg_temp.", text)
        text = _WITHOUT_ROWID.sub(")", text)
        parts[i] = _IS.sub("IS NOT DISTINCT FROM ", text)
    for i in range(1, len(parts), 2):
        parts[i] = parts[i].replace("%", "%%")
    text = "".join(parts)
    if re.match(r"\s*INSERT\s+OR\s+IGNORE\s+", text, re.I):
        text = re.sub(r"^\s*INSERT\s+OR\s+IGNORE\s+", "INSERT ", text, count=1, flags=re.I)
        returning = re.search(r"\sRETURNING\s", text, re.I)
        if returning:
            text = text[:returning.start()] + " ON CONFLICT DO NOTHING" + text[returning.start():]
        else:
            text = text.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    return text, numbered


_INT64 = (-(2**63), 2**63 - 1)


def bind(params: Any, numbered: bool) -> Any:
    # A whole number beyond 64 bits is SQLite's OverflowError (the faces answer it "out of
    # range"), not a numeric that PostgreSQL would compare and find nothing for.
    for value in (params.values() if isinstance(params, dict) else params):
        if type(value) is int and not _INT64[0] <= value <= _INT64[1]:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
    if numbered and not isinstance(params, dict):
        return {f"p{i}": value for i, value in enumerate(params, 1)}
    return params


_INSERT_INTO = re.compile(r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\w+)", re.I)


def returning_id(sql: str, generated: frozenset[str]) -> str | None:
    """The INSERT with `RETURNING id` when it writes one row of a table whose id is generated."""
    match = _INSERT_INTO.match(sql)
    if not match or match.group(1) not in generated or re.search(r"\bRETURNING\b", sql, re.I):
        return None
    if re.search(r"\bSELECT\b", sql, re.I):
        return None
    return sql.rstrip().rstrip(";") + " RETURNING id"


"""What a statement gives back, in sqlite3's shapes: rows read by name or by position (`Row`, as
sqlite3.Row), cursors, the empty answer of a statement PostgreSQL has no use for, and values in
SQLite's types (`adapt`): booleans are 0/1 both ways, a whole number that PostgreSQL computes as
`numeric` (SUM) comes back as an int, jsonb as its text.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any


class Row(tuple):
    """A row read by position or by column name, as sqlite3.Row is (dict(row) works)."""

    __slots__ = ()
    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@lru_cache(maxsize=2048)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    index: dict[str, int] = {}
    for position, name in enumerate(names):
        index.setdefault(name, position)
    return type("Row", (Row,), {"__slots__": (), "_index": index})


def row_factory(cursor: Any) -> Any:
    description = cursor.description
    if description is None:
        return None
    cls = _row_class(tuple(column.name for column in description))
    return lambda values: cls(values)


class Cursor:
    def __init__(self, cursor: Any, lastrowid: int | None = None, rowcount: int | None = None) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self.rowcount = cursor.rowcount if rowcount is None else rowcount
        self.description = cursor.description

    def fetchone(self) -> Any:
        if self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def fetchmany(self, size: int = 1) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchmany(size)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._cursor.close()


class Empty:
    """The cursor of a statement PostgreSQL has no use for (a SQLite PRAGMA that sets a knob)."""

    rowcount = -1
    lastrowid = None
    description = None

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())



class Counted(Empty):
    def __init__(self, count: int) -> None:
        self.rowcount = count


class Constant(Empty):
    def __init__(self, value: Any) -> None:
        self._value = value

    def fetchone(self) -> tuple[Any]:
        return (self._value,)


def adapt(conn: Any) -> None:
    """SQLite's value types on the way in and out: 0/1 for booleans, int for whole numerics,
    text for jsonb."""
    from psycopg.adapt import Loader
    from psycopg.types.numeric import IntDumper

    class BoolAsInt(Loader):
        def load(self, data: Any) -> int:
            return 1 if bytes(data) == b"t" else 0

    class NumericAsSQLite(Loader):
        def load(self, data: Any) -> int | float:
            text = bytes(data).decode()
            try:
                return int(text)
            except ValueError:
                return float(text)

    class JsonbAsText(Loader):  # contacts.data_doc in a `SELECT *` row: the JSON text, unparsed
        def load(self, data: Any) -> str:
            return bytes(data).decode()

    class BoolDumper(IntDumper):
        def dump(self, obj: Any) -> bytes:
            return b"1" if obj else b"0"

    conn.adapters.register_loader("bool", BoolAsInt)
    conn.adapters.register_loader("numeric", NumericAsSQLite)
    conn.adapters.register_loader("jsonb", JsonbAsText)
    conn.adapters.register_dumper(bool, BoolDumper)

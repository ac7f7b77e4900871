"""What the target would refuse or change in a row, and what `--fix` does about it: the rules of the
check pass (check.py), applied again to each row as the load writes it (load.py).

A value the target would refuse or change is a `Problem` with the row's key: NUL bytes in text,
text that is not UTF-8, a value of the wrong type for its column, emails that differ only in
case within a workspace (found by check.py, which reads the whole column first). A problem
without a `--fix` stops the copy before anything is written; with one, the `Fixer` gives the
row as it will be written, or drops it (and the rows that depend on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage.copy.tables import Table

# Unique per workspace when compared case-blind: the services store emails lower-cased, so two
# values that differ only in case are one address that the target's lookups would find twice.
CASE_BLIND = {"contacts": "email"}
FIXES = {"nul": ("strip", "replace"), "utf8": ("replace",), "type": ("null", "convert"),
         "case": ("keep", "keep-first")}


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
                problems.append(Problem(table.name, row_id(key), "", why, "dropped"))
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
                problems.append(Problem(table.name, row_id(key), column, problem, action))
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


def row_id(key: tuple[Any, ...]) -> str:
    """A row's key as the report shows it (the parts of a composite key joined by /)."""
    return "/".join(canonical(k) for k in key)


def canonical(value: Any) -> str:
    """A value's text in the report (a row id): NULL as \\N, bytes as \\x + hex, anything else as text."""
    if value is None:
        return "\\N"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    return str(value)

"""A CSV file's columns: the header mapped to merge tags, and one normaliser per column.

The header is mapped once, before any row is read: a column name matches a field's merge
tag or label (case, spaces and hyphens do not matter), an alias (`email`, `phone`), or one
of the contact columns `status`, `sms_status`, `tags`; `created_at`, `updated_at` and `id`
are read and ignored, so an export imports back as it is. Each column then gets its own
normaliser (values.py's check for the field's type, memoised for the low-cardinality
types), so the import's row loop never switches on types.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import values
from marketing_cli.services.contacts.checks import UNKNOWN_MERGE_TAG
from marketing_cli.services.contacts.dates import date_reader
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, Field, FieldMap

META_COLUMNS = ("status", "sms_status", "tags")
IGNORED_COLUMNS = ("id", "created_at", "updated_at")
TAG_SEPARATOR = ";"
ALIASES = {"email": EMAIL_TAG, "e_mail": EMAIL_TAG, "phone": PHONE_TAG}
MEMO_LIMIT = 100_000
_SEPARATORS = re.compile(r"[\s-]+")


def parse_column_map(items: Iterable[str]) -> dict[str, str]:
    """`'Column Name=merge_tag'` items (CLI --map, API ?map=) as {column: merge tag}.

    ValueError saying which item is malformed; the faces turn it into their usage error.
    """
    mapping: dict[str, str] = {}
    for item in items:
        column, sep, tag = item.rpartition("=")
        if not sep or not column.strip():
            raise ValueError(f"expected 'Column Name=merge_tag', got {item!r}")
        mapping[column] = tag
    return mapping



# --- header mapping -------------------------------------------------------------------

def column_key(name: str) -> str:
    """How column names and labels compare: case, spaces and hyphens do not matter."""
    return _SEPARATORS.sub("_", name.strip().lower())


def map_columns(
    header: list[str], fields: FieldMap, mapping: dict[str, str] | None = None, ignore_unknown: bool = False
) -> dict[int, str]:
    """{column index: merge tag or meta column} for the header, or MktError(400).

    A column matches a merge tag, a field label or an alias ('email', 'phone'), ignoring
    case, spaces and hyphens ('First Name' is first_name); a merge tag wins over a label,
    a field over a meta column of the same name. `mapping` {column name: merge tag}
    overrides (an empty merge tag skips the column).
    """
    by_name: dict[str, str] = {}
    for alias, tag in ALIASES.items():
        if tag in fields.by_tag:
            by_name[alias] = tag
    for f in fields.by_id.values():
        by_name.setdefault(column_key(f.label), f.merge_tag)
    for name in (*META_COLUMNS, *IGNORED_COLUMNS):
        by_name[name] = name
    for f in fields.by_id.values():
        by_name[f.merge_tag] = f.merge_tag
    overrides: dict[str, str] = {}
    for column, tag in (mapping or {}).items():
        target = tag.strip().lower()
        if target and target not in fields.by_tag and target not in META_COLUMNS:
            raise MktError(400, UNKNOWN_MERGE_TAG.format(tag=tag.strip()))
        overrides[column_key(column)] = target
    names = [column_key(cell) for cell in header]
    missing = [column for column, key in ((c, column_key(c)) for c in (mapping or {})) if key not in names]
    if missing:
        raise MktError(400, "A column mapping (--map / map=) names a column the file does not have: "
                            f"{', '.join(repr(m) for m in missing)}.")
    columns: dict[int, str] = {}
    unknown: list[str] = []
    seen: dict[str, str] = {}
    for index, (cell, name) in enumerate(zip(header, names)):
        target = overrides[name] if name in overrides else by_name.get(name)
        if target is None:
            if not ignore_unknown:
                unknown.append(cell)
            continue
        if not target or target in IGNORED_COLUMNS:
            continue
        if target in seen:
            raise MktError(400, f"The columns '{seen[target]}' and '{cell}' both map to '{target}'.")
        seen[target] = cell
        columns[index] = target
    if unknown:
        raise MktError(
            400,
            f"No field matches the column(s) {', '.join(repr(u) for u in unknown)}: map them with "
            "--map 'Column=merge_tag' (API: map=Column=merge_tag), or skip them with --ignore-unknown "
            "(API: ignore_unknown=true). Nothing was imported.",
        )
    return columns


# --- per-column normalisers -------------------------------------------------------------

def column_normaliser(f: Field, date_format: str | None = None,
                      day_first: bool | None = None) -> Callable[[str], Any]:
    """CSV text -> stored value for field `f` (None: no value); ValueError when invalid.

    The check is values.normalize_value, chosen once per column (a DATE column also reads
    the dates services/contacts/dates.py describes). Types with few distinct values (all but
    TEXT) are memoised: a million rows of countries cost a dict lookup each.
    """
    if f.type == "TEXT":
        return lambda raw: values.normalize_value(f, raw)
    check: Callable[[str], Any] = lambda raw: values.normalize_value(f, raw)
    if f.type == "DATE":
        check = date_reader(f.merge_tag, check, date_format, day_first)
    memo: dict[str, Any] = {}

    def normalise(raw: str) -> Any:
        try:
            return memo[raw]
        except KeyError:
            value = check(raw)
            if len(memo) < MEMO_LIMIT:
                memo[raw] = value
            return value

    return normalise


def status_normaliser(allowed: tuple[str, ...], message: str) -> Callable[[str], str | None]:
    def normalise(raw: str) -> str | None:
        text = raw.strip().upper()
        if not text:
            return None
        if text not in allowed:
            raise ValueError(message)
        return text

    return normalise


def split_tag_names(raw: str) -> list[str]:
    return [name.strip() for name in raw.split(TAG_SEPARATOR) if name.strip()]

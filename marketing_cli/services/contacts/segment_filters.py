"""Segment filters: validation (the specification's messages) and compilation to SQL.

A segment's filters object `{"condition": "AND"|"OR", "filters": [...]}` becomes ONE
parameterised SQL boolean expression over the alias `c` of `contacts`; callers put it in
`SELECT ... FROM contacts c WHERE c.workspace_id = ? AND (<expression>)`. Nothing loops
over contacts in Python. Field ids, tag ids and operators are checked against the
workspace's own definitions first; the only text pasted into the SQL is an integer field
id we looked up ourselves (it forms the JSON path, so the expression index
`contacts_field_<id>` on `(workspace_id, json_extract(data, '$."<id>"'))` is used).

Meaning of the operators (docs/api.md "Segments and audiences" says the same):

- Field filters compare the stored value (`contacts.data` keyed by field id; the built-in
  email_address and phone_number fields are the `email` and `phone` columns).
  eq, gt, lt, gte, lte, in, contains, starts_with, ends_with never match a contact that
  has no value. ne, not_in and not_contains are the exact complement of eq, in and
  contains: a contact with no value matches them.
  TEXT eq/ne/in/not_in compare exactly (case-sensitive; the email_address value is
  lower-cased first, as addresses are stored lower case); contains/not_contains/
  starts_with/ends_with ignore ASCII case. NUMBER compares numbers, DATE compares
  YYYY-MM-DD dates, BOOLEAN true/false, COUNTRY upper-case alpha-2 codes.
- DROPDOWN_MULTIPLE and tags filters take a set: eq = exactly that set; ne = not exactly
  that set; contains = has every one of them; not_contains = has none of them.
- open_rate / click_rate: unique_opens (unique_clicks) * 100 / total_delivered as an
  exact percentage; a contact with no deliveries has rate 0.
- last_activity: the later of last_opened_at and last_clicked_at; a contact that never
  opened nor clicked matches none of is_after, is_before, within_last_days.
  within_last_days N means at or after now - N * 24 hours, now being evaluation time.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, limits
from marketing_cli.kernel.inputs import is_type
from marketing_cli.services.contacts import values
from marketing_cli.storage import dialect, field_sql
from marketing_cli.storage.db import marks

CONDITION = "Filter condition must be AND or OR"
AT_LEAST_ONE = "At least one filter is required"
FIELD_ID = "Please provide a valid field_id"
FIELD_MISSING = "The specified field_id does not exist"
TAGS_VALUE = "Tags filter value must be an array of tag IDs."
RATE_RANGE = "Value must be between 0 and 100"

FILTER_TYPES = ("field", "tags", "open_rate", "click_rate", "last_activity")
FIELD_OPERATORS: dict[str, tuple[str, ...]] = {
    "TEXT": ("eq", "ne", "contains", "not_contains", "starts_with", "ends_with", "in", "not_in"),
    "NUMBER": ("eq", "ne", "gt", "lt", "gte", "lte"),
    "BOOLEAN": ("eq", "ne"),
    "DATE": ("eq", "ne", "gt", "lt", "gte", "lte"),
    "DROPDOWN_SINGLE": ("eq", "ne", "in", "not_in"),
    "DROPDOWN_MULTIPLE": ("eq", "ne", "contains", "not_contains"),
    "COUNTRY": ("eq", "ne", "in", "not_in"),
}
TAG_OPERATORS = ("eq", "ne", "contains", "not_contains")
RATE_OPERATORS = ("eq", "gt", "lt", "gte", "lte")
ACTIVITY_OPERATORS = ("is_after", "is_before", "within_last_days")
MAX_FILTERS = limits.SEGMENT_FILTERS
MAX_VALUES = limits.FILTER_VALUES
INT64 = 2**63

_COMPARE = {"eq": "=", "gt": ">", "lt": "<", "gte": ">=", "lte": "<="}
# Built-in fields whose values are columns, not members of `data` (schema.sql step 2).
_COLUMNS = {"email_address": "c.email", "phone_number": "c.phone"}
_RATE_COLUMNS = {"open_rate": "c.unique_opens", "click_rate": "c.unique_clicks"}
_LAST_ACTIVITY = "COALESCE(MAX(c.last_opened_at, c.last_clicked_at), c.last_opened_at, c.last_clicked_at)"


@dataclass
class Compiled:
    """A boolean SQL expression over `contacts c` and its positional parameters."""

    sql: str
    params: list[Any] = field(default_factory=list)


def _error(n: int, message: str) -> MktError:
    return MktError(400, f"Filter #{n}: {message}")


# -- validation ------------------------------------------------------------------------

def _scalar(n: int, f: values.Field, operator: str, raw: Any) -> Any:
    """One value normalised exactly as contacts store it (values.normalize_value)."""
    if f.merge_tag == values.PHONE_TAG:
        if not isinstance(raw, str) or not raw.strip():
            raise _error(n, "Value must be a non-empty string")
        if operator in ("eq", "ne", "in", "not_in"):  # whole numbers compare in E.164, as stored
            try:
                return values.normalize_phone(raw, f.default_region)
            except ValueError as exc:
                raise _error(n, str(exc).rstrip(".")) from None
        return raw.strip()
    if f.type == "TEXT" and not isinstance(raw, str):
        raise _error(n, "Value must be a string")
    try:
        value = values.normalize_value(f, raw)
    except ValueError as exc:
        raise _error(n, str(exc).rstrip(".")) from None
    if value is None:
        raise _error(n, "Please provide a value")
    if isinstance(value, int) and not isinstance(value, bool) and not -INT64 <= value < INT64:
        value = float(value)  # SQLite integers are 64-bit; compare such a number as a real
    if f.merge_tag == values.EMAIL_TAG and isinstance(value, str):
        value = value.lower()  # addresses are stored lower case
    return value


def _field_value(n: int, f: values.Field, operator: str, value: Any) -> Any:
    if f.type == "DROPDOWN_MULTIPLE":
        chosen = _scalar(n, f, operator, value)
        if len(chosen) > MAX_VALUES:
            raise _error(n, f"Value can hold at most {MAX_VALUES} options")
        return chosen
    if operator in ("in", "not_in"):
        if not isinstance(value, list) or not value or len(value) > MAX_VALUES:
            raise _error(n, "Value must be a non-empty array of values")
        out: list[Any] = []
        for item in value:
            item = _scalar(n, f, operator, item)
            if item not in out:
                out.append(item)
        return out
    return _scalar(n, f, operator, value)


def _int_value(value: Any) -> int | None:
    """An integer, also written as 40.0; None otherwise."""
    if is_type(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _check_shape(filters: Any) -> tuple[str, list[Any]]:
    """The condition and the list of filters, with the limits checked (before any SQL)."""
    if filters is not None and not isinstance(filters, dict):
        raise MktError(400, "The member 'filters' must be an object.")
    filters = filters or {}
    condition = filters.get("condition")
    if not isinstance(condition, str) or condition.strip().upper() not in ("AND", "OR"):
        raise MktError(400, CONDITION)
    items = filters.get("filters")
    if items is not None and not isinstance(items, list):
        raise MktError(400, "The member 'filters.filters' must be an array.")
    if not items:
        raise MktError(400, AT_LEAST_ONE)
    if len(items) > MAX_FILTERS:
        raise MktError(400, f"A segment can have at most {MAX_FILTERS} filters")
    values_in_all = sum(len(f["value"]) for f in items if isinstance(f, dict) and isinstance(f.get("value"), list))
    limits.check_count(values_in_all, limits.SEGMENT_VALUES,
                       f"A segment's filters can hold at most {limits.SEGMENT_VALUES} values in all")
    return condition.strip().upper(), items


def validate_filters(conn: sqlite3.Connection, workspace_id: int, filters: Any) -> dict[str, Any]:
    """The filters object checked against the workspace; returns it normalised for storage.

    Raises MktError(400) with the specification's message (`Filter #N:` prefix, N counted
    from 1) for the first problem found.
    """
    condition, items = _check_shape(filters)
    dicts = [f for f in items if isinstance(f, dict)]
    field_ids = {i for i in (_int_value(f.get("field_id")) for f in dicts) if i is not None}
    tag_ids = {t for f in dicts if isinstance(f.get("value"), list) for t in f["value"] if is_type(t, int)}
    fields = {i: values.field_from_row(r) for i, r in _lookup(
        conn, "SELECT * FROM fields WHERE workspace_id = ? AND id IN", workspace_id, field_ids).items()}
    tags = _lookup(conn, "SELECT id FROM tags WHERE workspace_id = ? AND id IN", workspace_id, tag_ids)
    out = []
    for n, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise _error(n, "Each filter must be an object")
        ftype = item.get("type")
        ftype = ftype.strip().lower() if isinstance(ftype, str) else ftype
        operator = item.get("operator")
        operator = operator.strip().lower() if isinstance(operator, str) else operator
        value = item.get("value")
        if ftype == "field":
            out.append(_check_field_filter(n, item, operator, value, fields))
        elif ftype == "tags":
            out.append(_check_tags_filter(n, operator, value, tags))
        elif ftype in ("open_rate", "click_rate"):
            out.append(_check_rate_filter(n, ftype, operator, value))
        elif ftype == "last_activity":
            out.append(_check_activity_filter(n, operator, value))
        else:
            raise _error(n, f"Invalid filter type. Must be one of: {', '.join(FILTER_TYPES)}")
    return {"condition": condition, "filters": out}


def _check_field_filter(n: int, item: dict[str, Any], operator: Any, value: Any,
                        fields: dict[int, values.Field]) -> dict[str, Any]:
    field_id = _int_value(item.get("field_id"))
    if field_id is None or field_id <= 0:
        raise _error(n, FIELD_ID)
    row = fields.get(field_id)
    if row is None:
        raise _error(n, FIELD_MISSING)
    allowed = FIELD_OPERATORS.get(row.type, FIELD_OPERATORS["TEXT"])
    if operator not in allowed:
        raise _error(n, f"Invalid operator for field filter. Must be one of: {', '.join(allowed)}")
    value = _field_value(n, row, operator, value)
    return {"type": "field", "field_id": field_id, "operator": operator, "value": value}


def _check_tags_filter(n: int, operator: Any, value: Any, tags: dict[int, sqlite3.Row]) -> dict[str, Any]:
    if (not isinstance(value, list) or not value or len(value) > MAX_VALUES
            or not all(is_type(t, int) for t in value)):
        raise _error(n, TAGS_VALUE)
    if operator not in TAG_OPERATORS:
        raise _error(n, f"Invalid operator for tags filter. Must be one of: {', '.join(TAG_OPERATORS)}")
    for tag_id in value:
        if tag_id not in tags:
            raise _error(n, f"Tag ID {tag_id} does not exist in this workspace")
    return {"type": "tags", "operator": operator, "value": list(dict.fromkeys(value))}


def _check_rate_filter(n: int, ftype: str, operator: Any, value: Any) -> dict[str, Any]:
    if operator not in RATE_OPERATORS:
        raise _error(n, f"Invalid operator for {ftype} filter. Must be one of: {', '.join(RATE_OPERATORS)}")
    number = _int_value(value)
    if number is None:
        if is_type(value, float):  # a fraction: in range or not, it is not an integer
            raise _error(n, RATE_RANGE if not 0 <= value <= 100 else "Value must be a whole number")
        raise _error(n, "Value must be an integer between 0 and 100")
    if not 0 <= number <= 100:
        raise _error(n, RATE_RANGE)
    return {"type": ftype, "operator": operator, "value": number}


def _check_activity_filter(n: int, operator: Any, value: Any) -> dict[str, Any]:
    if operator not in ACTIVITY_OPERATORS:
        raise _error(n, "Invalid operator for last activity filter. Must be one of: " + ", ".join(ACTIVITY_OPERATORS))
    if operator == "within_last_days":
        days = _int_value(value)
        if days is None or days <= 0:
            raise _error(n, "Value must be an integer greater than 0")
        if days > 36500:
            raise _error(n, "Value must be 36500 days or less")
        return {"type": "last_activity", "operator": operator, "value": days}
    try:
        moment = clock.parse_ts(value)
    except (ValueError, TypeError):
        raise _error(n, "Value must be an RFC 3339 timestamp, for example 2026-01-31T00:00:00Z") from None
    return {"type": "last_activity", "operator": operator, "value": clock.format_ts(moment)}


def _lookup(conn: sqlite3.Connection, sql: str, workspace_id: int, ids: set[int]) -> dict[int, sqlite3.Row]:
    ids_list = sorted(i for i in ids if -INT64 <= i < INT64)  # larger ones cannot exist (nor bind)
    if not ids_list:
        return {}
    return {row["id"]: row for row in conn.execute(
        f"{sql} ({', '.join('?' * len(ids_list))})", (workspace_id, *ids_list))}


# -- compilation -----------------------------------------------------------------------

def _like(value: str, operator: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return {"contains": f"%{escaped}%", "not_contains": f"%{escaped}%",
            "starts_with": f"{escaped}%", "ends_with": f"%{escaped}"}[operator]


def _field_sql(conn: sqlite3.Connection, f: dict[str, Any], row: sqlite3.Row) -> Compiled:
    op, value, ftype = f["operator"], f["value"], row["type"]
    if row["merge_tag"] in _COLUMNS:
        col = _COLUMNS[row["merge_tag"]]
    else:
        # The id is an integer read from our own fields table, never user text.
        col = field_sql.typed_value_expr(conn, row["id"], ftype, "c")
    if ftype == "DROPDOWN_MULTIPLE":
        path = field_sql.path(row["id"])
        each = f"{field_sql.each_expr(row['id'], 'c')} AS j"
        has_all = f"(SELECT COUNT(DISTINCT j.value) FROM {each} WHERE j.value IN ({marks(value)})) = {len(value)}"
        has_none = f"NOT EXISTS (SELECT 1 FROM {each} WHERE j.value IN ({marks(value)}))"
        only = f"NOT EXISTS (SELECT 1 FROM {each} WHERE j.value NOT IN ({marks(value)}))"
        if op == "contains":
            return Compiled(has_all, list(value))
        if op == "not_contains":
            return Compiled(has_none, list(value))
        exact = f"(json_type(c.data, {path}) = 'array' AND {has_all} AND {only})"
        if op == "eq":
            return Compiled(exact, [*value, *value])
        return Compiled(f"NOT COALESCE({exact}, FALSE)", [*value, *value])
    if ftype == "BOOLEAN":
        value = 1 if value else 0
    if op == "ne":
        return Compiled(f"{col} IS NOT ?", [value])
    # A field's value (not a column) is compared through field_sql.compare and is_in, which read
    # its index (on PostgreSQL a prefix of a text value, then the whole value).
    in_data = row["merge_tag"] not in _COLUMNS
    if op in _COMPARE:
        sql, params = (field_sql.compare(conn, row["id"], ftype, _COMPARE[op], value, "c") if in_data
                       else (f"{col} {_COMPARE[op]} ?", [value]))
        if op == "eq":
            return Compiled(sql, params)
        # Guard the stored JSON type: in SQLite text sorts above every number.
        kinds = ("integer", "real") if ftype == "NUMBER" else ("text",)
        return Compiled(f"({sql} AND {dialect.contacts_stored_as(conn, col, kinds)})", params)
    if op == "in":
        return Compiled(*field_sql.is_in(conn, row["id"], ftype, list(value), "c")) if in_data else Compiled(
            f"{col} IN ({marks(value)})", list(value))
    if op == "not_in":
        return Compiled(f"NOT COALESCE({col} IN ({marks(value)}), FALSE)", list(value))
    if op == "not_contains":
        return Compiled(f"NOT COALESCE({dialect.contacts_like(conn, col)}, FALSE)", [_like(value, op)])
    return Compiled(dialect.contacts_like(conn, col), [_like(value, op)])


def _tags_sql(f: dict[str, Any]) -> Compiled:
    op, ids = f["operator"], f["value"]
    if len(ids) == 1:
        has_all = "c.id IN (SELECT contact_id FROM contact_tags WHERE tag_id = ?)"
    else:
        has_all = (f"c.id IN (SELECT contact_id FROM contact_tags WHERE tag_id IN ({marks(ids)})"
                   f" GROUP BY contact_id HAVING COUNT(*) = {len(ids)})")
    if op == "contains":
        return Compiled(has_all, list(ids))
    if op == "not_contains":
        return Compiled(f"c.id NOT IN (SELECT contact_id FROM contact_tags WHERE tag_id IN ({marks(ids)}))",
                        list(ids))
    exact = (f"({has_all} AND NOT EXISTS (SELECT 1 FROM contact_tags x WHERE x.contact_id = c.id"
             f" AND x.tag_id NOT IN ({marks(ids)})))")
    return Compiled(exact if op == "eq" else f"NOT {exact}", [*ids, *ids])


def _rate_sql(f: dict[str, Any]) -> Compiled:
    hits = _RATE_COLUMNS[f["type"]]
    rate = f"(CASE WHEN c.total_delivered > 0 THEN {hits} * 100.0 / c.total_delivered ELSE 0 END)"
    return Compiled(f"{rate} {_COMPARE[f['operator']]} ?", [f["value"]])


def _activity_sql(f: dict[str, Any]) -> Compiled:
    op, value = f["operator"], f["value"]
    if op == "within_last_days":
        cutoff = clock.format_ts(clock.utcnow() - dt.timedelta(days=value))
        return Compiled(f"{_LAST_ACTIVITY} >= ?", [cutoff])
    return Compiled(f"{_LAST_ACTIVITY} {'>' if op == 'is_after' else '<'} ?", [value])


def compile_filters(conn: sqlite3.Connection, workspace_id: int, filters: Any) -> Compiled:
    """The filters as one boolean SQL expression over `contacts c` (not yet workspace-scoped).

    The filters are validated again against the workspace's current definitions, so a
    stored segment whose field or tag was deleted since fails with the usual message.
    """
    checked = validate_filters(conn, workspace_id, filters)
    field_ids = {f["field_id"] for f in checked["filters"] if f["type"] == "field"}
    fields = _lookup(conn, "SELECT id, type, merge_tag FROM fields WHERE workspace_id = ? AND id IN",
                     workspace_id, field_ids)
    parts: list[str] = []
    params: list[Any] = []
    for f in checked["filters"]:
        if f["type"] == "field":
            piece = _field_sql(conn, f, fields[f["field_id"]])
        elif f["type"] == "tags":
            piece = _tags_sql(f)
        elif f["type"] in _RATE_COLUMNS:
            piece = _rate_sql(f)
        else:
            piece = _activity_sql(f)
        parts.append(f"({piece.sql})")
        params.extend(piece.params)
    joiner = f" {checked['condition']} "
    return Compiled(f"({joiner.join(parts)})", params)


def member_query(conn: sqlite3.Connection, workspace_id: int, filters: Any, select: str = "c.id") -> Compiled:
    """`SELECT <select> FROM contacts c WHERE <workspace> AND <filters>` with its parameters."""
    where = compile_filters(conn, workspace_id, filters)
    return Compiled(f"SELECT {select} FROM contacts c WHERE c.workspace_id = ? AND {where.sql}",
                    [workspace_id, *where.params])


def count_matching(conn: sqlite3.Connection, workspace_id: int, filters: Any) -> int:
    query = member_query(conn, workspace_id, filters, "COUNT(*)")
    return conn.execute(query.sql, query.params).fetchone()[0]


def filters_json(filters: dict[str, Any]) -> str:
    return json.dumps(filters, separators=(",", ":"))

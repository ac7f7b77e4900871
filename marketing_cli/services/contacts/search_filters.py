"""A contact search's field filters (`fields` of POST /v1/contacts/search) compiled to SQL.

search.py turns the whole body into ONE COUNT and ONE page SELECT; each field filter of
it is checked here against the workspace's own field definitions and compiled to a
condition:

- custom fields compare `json_extract(data, '$."<field id>"')`, written exactly like the
  expression index `contacts_field_<id>` on (workspace_id, json_extract(...)), so EQUALS,
  GREATER_THAN and LESS_THAN are answered from that index; the id in the JSON path is the
  integer we looked up, never user text;
- `email_address` and `phone_number` compare the `email` / `phone` columns (the unique
  (workspace_id, email) index answers EQUALS on email).

Filter values are normalised with the field's type exactly as stored values are
(services/contacts/values.py): NUMBER compares as numbers, DATE as 'YYYY-MM-DD', BOOLEAN as
true/false, dropdown options and countries in their stored spelling, email addresses in
lower case and phone numbers in E.164.

Semantics (docs/api.md has the table):

- A contact has no value for a field when the key is absent from its data or null (and,
  for text, when it is ''; for a multi-select, when the array is empty).
- NOT_EQUALS and NOT_CONTAINS are the exact complements of EQUALS and CONTAINS: a contact
  without a value matches them. GREATER_THAN / LESS_THAN never match a missing value.
- EXISTS with value true (or no value) matches contacts that have a value; with value
  false, contacts that have none.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import limits
from marketing_cli.kernel.inputs import member, type_error
from marketing_cli.services.contacts.values import (
    EMAIL_TAG,
    PHONE_TAG,
    load_fields,
    normalize_email,
    normalize_phone,
    normalize_value,
)
from marketing_cli.storage import dialect, field_sql

OPERATORS = ("EQUALS", "NOT_EQUALS", "CONTAINS", "NOT_CONTAINS", "EXISTS", "GREATER_THAN", "LESS_THAN")
INT64 = (-(2**63), 2**63 - 1)  # SQLite's integers: a larger number cannot be stored nor bound


# Field definitions per (connection, workspace), kept until anything is written to the
# database: `PRAGMA data_version` moves when another connection commits, `total_changes`
# when this one writes. Loading them was a third of a search by email (about 50 us).
_FIELDS_CACHE: OrderedDict[tuple[int, int], tuple[sqlite3.Connection, tuple[int, int], Any]] = OrderedDict()
_FIELDS_CACHE_SIZE = 32
_fields_lock = threading.Lock()


def workspace_fields(conn: sqlite3.Connection, workspace_id: int) -> Any:
    """values.load_fields(conn, workspace_id), remembered while the database is unchanged."""
    stamp = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
    key = (id(conn), workspace_id)
    with _fields_lock:
        entry = _FIELDS_CACHE.get(key)
        if entry is not None and entry[0] is conn and entry[1] == stamp:
            _FIELDS_CACHE.move_to_end(key)
            return entry[2]
    fields = load_fields(conn, workspace_id)
    with _fields_lock:
        _FIELDS_CACHE[key] = (conn, stamp, fields)
        _FIELDS_CACHE.move_to_end(key)
        while len(_FIELDS_CACHE) > _FIELDS_CACHE_SIZE:
            _FIELDS_CACHE.popitem(last=False)
    return fields


class FilterCompiler:
    """A search's SQL conditions and their parameters; `filter` turns one `fields` filter into one."""

    def __init__(self, conn: sqlite3.Connection, workspace_id: int) -> None:
        self.conn = conn
        self.fields = workspace_fields(conn, workspace_id)
        self.where: list[str] = []
        self.params: list[Any] = []
        # Whether a condition can be answered from an index (EQUALS on email, phone or a
        # custom field; GREATER_THAN / LESS_THAN on a custom field).
        self.indexed = False

    def add(self, sql: str, *params: Any) -> None:
        self.where.append(sql)
        self.params.extend(params)

    # Every operator works with every kind of field (docs/api.md, the operator table):
    # CONTAINS on a single-valued field matches its text (numbers as written, dates as
    # YYYY-MM-DD, booleans as true/false); GREATER_THAN / LESS_THAN order numbers and dates
    # by value, booleans false < true, text, options, country codes, email and phone by
    # text, and a multi-select by how many options it holds.
    def filter(self, index: int, item: Any) -> None:
        path = f"fields[{index}]"
        if not isinstance(item, dict):
            raise type_error(path, dict)
        merge_tag = member(item, "merge_tag", str, path=f"{path}.merge_tag")
        if not merge_tag:
            raise MktError(400, f"The member '{path}.merge_tag' is required.")
        operator = member(item, "operator", str, path=f"{path}.operator")
        if not operator:
            raise MktError(400, f"The member '{path}.operator' is required. Operators: {', '.join(OPERATORS)}.")
        operator = operator.upper()
        if operator not in OPERATORS:
            raise MktError(400, f"The member '{path}.operator' must be one of: {', '.join(OPERATORS)}.")
        field = self.fields.by_tag.get(merge_tag)
        if field is None:
            raise MktError(400, f"We were unable to find a field with the merge_tag {merge_tag} ({path}.merge_tag).")
        kind = merge_tag if merge_tag in (EMAIL_TAG, PHONE_TAG) else field.type
        value = item.get("value")
        vpath = f"{path}.value"
        if operator == "EXISTS":
            if value is not None and not isinstance(value, bool):
                raise MktError(400, f"The member '{vpath}' must be true or false (or omitted) with EXISTS.")
            present = self._present(kind, field)
            self.add(present if value is not False else f"NOT COALESCE(({present}), FALSE)")
            return
        if value is None or (isinstance(value, str) and not value.strip()) or value == []:
            raise MktError(400, f"The member '{vpath}' is required with {operator}.")
        if kind == EMAIL_TAG:
            self._email(operator, value, vpath)
        elif kind == PHONE_TAG:
            self._phone(operator, value, vpath, field.default_region)
        else:
            self._custom(operator, value, vpath, field)

    def _expr(self, field: Any) -> str:
        # Must read exactly like the index contacts_field_<id> for the planner to use it.
        return field_sql.typed_value_expr(self.conn, field.id, field.type)

    def _present(self, kind: str, field: Any) -> str:
        if kind == "email_address":
            return "email IS NOT NULL AND email <> ''"
        if kind == "phone_number":
            return "phone IS NOT NULL AND phone <> ''"
        if kind == "DROPDOWN_MULTIPLE":
            return f"{field_sql.array_length_expr(field.id)} > 0"
        expr = self._expr(field)
        if field.type in ("NUMBER", "BOOLEAN"):  # never text, so never '' (and typed on PostgreSQL)
            return f"{expr} IS NOT NULL"
        return f"{expr} IS NOT NULL AND {expr} <> ''"

    def _add_op(self, operator: str, positive: str, *params: Any, indexed: bool = False) -> None:
        """EQUALS/CONTAINS as given; NOT_* as their exact complement (missing values match)."""
        if operator.startswith("NOT_"):
            self.add(f"NOT COALESCE(({positive}), FALSE)", *params)
        else:
            self.add(positive, *params)
            self.indexed = self.indexed or indexed

    def _string(self, value: Any, vpath: str, *, strip: bool = True) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise MktError(400, f"The member '{vpath}' must be a string.")
        return str(value).strip() if strip else str(value)

    def _email(self, operator: str, value: Any, vpath: str) -> None:
        text = self._string(value, vpath)
        if operator in ("CONTAINS", "NOT_CONTAINS"):
            self._add_op(operator, "instr(email, ?) > 0", text.lower())
            return
        if operator in ("GREATER_THAN", "LESS_THAN"):  # text order of the stored (lower-case) address
            self.add(f"email {'>' if operator == 'GREATER_THAN' else '<'} ?", text.lower())
            self.indexed = True
            return
        try:
            email = normalize_email(text)
        except ValueError:
            raise MktError(400, f"The member '{vpath}' must be a valid email address; '{text}' is not.") from None
        self._add_op(operator, "email = ?", email, indexed=True)

    def _phone(self, operator: str, value: Any, vpath: str, region: str | None) -> None:
        text = self._string(value, vpath)
        if operator in ("CONTAINS", "NOT_CONTAINS"):
            digits = "".join(ch for ch in text if ch in "0123456789")
            if not digits:
                raise MktError(400, f"The member '{vpath}' must hold digits of a phone number.")
            needle = ("+" if text.startswith("+") else "") + digits
            self._add_op(operator, "instr(phone, ?) > 0", needle)
            return
        try:
            phone = normalize_phone(text, region)
        except ValueError as exc:
            raise MktError(400, f"The member '{vpath}' must be a valid phone number: {exc}") from None
        if operator in ("GREATER_THAN", "LESS_THAN"):  # text order of E.164 numbers
            self.add(f"phone {'>' if operator == 'GREATER_THAN' else '<'} ?", phone)
            return
        self._add_op(operator, "phone = ?", phone, indexed=True)

    def _normalize(self, field: Any, value: Any, vpath: str, operator: str) -> Any:
        if isinstance(value, list):
            limits.check_count(len(value), limits.CONDITION_VALUES,
                               f"The member '{vpath}' can hold at most {limits.CONDITION_VALUES} options.")
        if isinstance(value, (dict, list)) and field.type != "DROPDOWN_MULTIPLE":
            raise MktError(400, f"The member '{vpath}' must be a single value for field '{field.merge_tag}'"
                                f" ({field.type}), not {'an object' if isinstance(value, dict) else 'an array'}.")
        try:
            normalized = normalize_value(field, value)
        except ValueError as exc:
            raise MktError(400, f"The member '{vpath}' does not fit the field: {exc}") from None
        if normalized is None:  # e.g. "," for a multi-select: no option at all
            raise MktError(400, f"The member '{vpath}' is required with {operator}.")
        if isinstance(normalized, int) and not isinstance(normalized, bool) and not (
            INT64[0] <= normalized <= INT64[1]
        ):
            normalized = float(normalized)  # SQLite integers are 64-bit; compare as a real
        return normalized

    def _custom(self, operator: str, value: Any, vpath: str, field: Any) -> None:
        expr = self._expr(field)
        fid = int(field.id)
        if field.type == "DROPDOWN_MULTIPLE" and operator in ("GREATER_THAN", "LESS_THAN"):
            # How many options are selected: 'interests GREATER_THAN 2'. Missing never compares.
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
                raise MktError(400, f"The member '{vpath}' must be a whole number of options with {operator}"
                                    f" on field '{field.merge_tag}' (DROPDOWN_MULTIPLE).")
            self.add(f"{field_sql.array_length_expr(fid)} {'>' if operator == 'GREATER_THAN' else '<'} ?", value)
            return
        if field.type == "DROPDOWN_MULTIPLE":
            options = self._normalize(field, value, vpath, operator)
            marks = ", ".join("?" for _ in options)
            if operator in ("CONTAINS", "NOT_CONTAINS"):
                # The array holds every given option (one option: the usual case).
                positive = " AND ".join(
                    f"EXISTS (SELECT 1 FROM {field_sql.each_expr(fid, 'contacts')} WHERE value = ?)"
                    for _ in options
                )
            else:
                # The same set of options, in any order (stored arrays hold no duplicates).
                positive = (
                    f"{field_sql.array_length_expr(fid)} = {len(options)} AND NOT EXISTS"
                    f" (SELECT 1 FROM {field_sql.each_expr(fid, 'contacts')} WHERE value NOT IN ({marks}))"
                )
            self._add_op(operator, positive, *options)
            return
        if operator in ("CONTAINS", "NOT_CONTAINS"):
            # Case-insensitive for ASCII letters (SQLite's lower()); other characters as given.
            # Single-valued fields of other types match on their text: 41, 2026-11-22, true.
            text = expr if field.type == "TEXT" else (
                f"CASE {expr} WHEN 1 THEN 'true' WHEN 0 THEN 'false' END" if field.type == "BOOLEAN"
                else f"CAST({expr} AS TEXT)")
            lower = dialect.contacts_ascii_lower
            self._add_op(operator, f"instr({lower(self.conn, text)}, {lower(self.conn, '?')}) > 0",
                         self._string(value, vpath, strip=field.type != "TEXT"))
            return
        normalized = self._normalize(field, value, vpath, operator)
        # field_sql.compare reads the field's index (on PostgreSQL a prefix of a text value).
        if operator in ("GREATER_THAN", "LESS_THAN"):
            # A missing value never compares; for text that includes ''.
            blank = f" AND {expr} <> ''" if field.type == "TEXT" else ""
            sql, params = field_sql.compare(self.conn, fid, field.type, ">" if operator == "GREATER_THAN" else "<",
                                            normalized)
            self.add(f"{sql}{blank}", *params)
            self.indexed = True
        else:
            sql, params = field_sql.compare(self.conn, fid, field.type, "=", normalized)
            self._add_op(operator, sql, *params, indexed=True)

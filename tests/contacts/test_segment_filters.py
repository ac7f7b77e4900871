"""The segment filter compiler: every operator of every filter type against a hand-built
set of contacts (rows inserted with SQL, following the storage design), including
contacts that have no value; every validation message with its `Filter #N:` prefix."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import segment_filters as sf
from tests.engines import query_plan
from tests.factories import ENGAGED, NOW, ago  # noqa: F401 - ENGAGED: the segment tests share it
from tests.factories import build_filter_world as build_world
from tests.factories import filter_contact as add_contact  # noqa: F401


@pytest.fixture
def world(conn: sqlite3.Connection) -> dict[str, Any]:
    return build_world(conn)


def members(conn: sqlite3.Connection, world: dict[str, Any], *filters: dict[str, Any],
            condition: str = "AND") -> set[str]:
    query = sf.member_query(conn, world["ws"], {"condition": condition, "filters": list(filters)})
    names = {v: k for k, v in world["c"].items()}
    found = {names[row[0]] for row in conn.execute(query.sql, query.params)}
    assert sf.count_matching(conn, world["ws"], {"condition": condition, "filters": list(filters)}) == len(found)
    return found


def fld(world: dict[str, Any], name: str, operator: str, value: Any) -> dict[str, Any]:
    return {"type": "field", "field_id": world["f"][name], "operator": operator, "value": value}


FIELD_CASES = [
    # TEXT: exact and case-sensitive for eq/ne/in/not_in; LIKE (ASCII case-insensitive) for the rest.
    ("city", "eq", "Paris", {"a"}),
    ("city", "ne", "Paris", {"b", "c", "d", "e"}),            # d has no city: ne matches it
    ("city", "contains", "PARIS", {"a", "b"}),
    ("city", "not_contains", "paris", {"c", "d", "e"}),
    ("city", "contains", "%_", {"e"}),                        # % and _ are literal, not wildcards
    ("city", "starts_with", "par", {"a", "b"}),
    ("city", "ends_with", "SOUTH", {"b"}),
    ("city", "in", ["Paris", "Lyon", "Nowhere"], {"a", "c"}),
    ("city", "not_in", ["Paris", "Lyon"], {"b", "d", "e"}),
    # NUMBER
    ("age", "eq", 30, {"a"}),
    ("age", "eq", "45.5", {"b"}),                             # numeric text is read as a number
    ("age", "ne", 30, {"b", "c", "d", "e"}),
    ("age", "gt", 30, {"b"}),
    ("age", "gte", 30, {"a", "b"}),
    ("age", "lt", 30, {"c"}),
    ("age", "lte", 30, {"a", "c"}),
    # BOOLEAN: only stored values count; a contact with no value is neither true nor false.
    ("vip", "eq", True, {"a"}),
    ("vip", "eq", False, {"b"}),
    ("vip", "ne", True, {"b", "c", "d", "e"}),
    ("vip", "ne", "false", {"a", "c", "d", "e"}),
    # DATE
    ("born", "eq", "1990-05-01", {"a"}),
    ("born", "ne", "1990-05-01", {"b", "c", "d", "e"}),
    ("born", "gt", "1990-05-01", {"c"}),
    ("born", "gte", "1990-05-01", {"a", "c"}),
    ("born", "lt", "1990-05-01", {"b"}),
    ("born", "lte", "1990-05-01", {"a", "b"}),
    # DROPDOWN_SINGLE (options matched case-insensitively, stored spelling used)
    ("plan", "eq", "PRO", {"a"}),
    ("plan", "ne", "pro", {"b", "c", "d", "e"}),
    ("plan", "in", ["free", "team"], {"b", "c"}),
    ("plan", "not_in", ["free", "team"], {"a", "d", "e"}),
    # DROPDOWN_MULTIPLE: sets. eq exact set; contains every one; not_contains none of them.
    ("langs", "eq", ["fr", "en"], {"a"}),
    ("langs", "eq", "en", {"b"}),
    ("langs", "ne", ["en", "fr"], {"b", "c", "d", "e"}),
    ("langs", "contains", ["en", "fr"], {"a", "e"}),
    ("langs", "contains", "de", {"c", "e"}),
    ("langs", "not_contains", ["fr", "de"], {"b", "d"}),
    # COUNTRY (upper-cased)
    ("country", "eq", "fr", {"a"}),
    ("country", "ne", "FR", {"b", "c", "d", "e"}),
    ("country", "in", ["FR", "us"], {"a", "b"}),
    ("country", "not_in", ["FR", "US"], {"c", "d", "e"}),
    # Built-in columns: email_address (lower-cased), phone_number (E.164 with the field's region)
    ("email", "eq", "A@X.IO", {"a"}),
    ("email", "ne", "a@x.io", {"b", "c", "d", "e"}),          # e has no email at all
    ("email", "ends_with", "@X.io", {"a", "b", "c", "d"}),
    ("phone", "eq", "07911 123401", {"a"}),
    ("phone", "in", ["+447911123402", "+447911123405"], {"b", "e"}),
    ("phone", "starts_with", "+44791112340", {"a", "b", "d", "e"}),
]


@pytest.mark.parametrize(("name", "operator", "value", "expected"), FIELD_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in FIELD_CASES])
def test_field_operators(conn: sqlite3.Connection, world: dict[str, Any], name: str, operator: str, value: Any,
                         expected: set[str]) -> None:
    assert members(conn, world, fld(world, name, operator, value)) == expected


def test_every_field_operator_of_the_spec_is_covered() -> None:
    covered = {(name, op) for name, op, _, _ in FIELD_CASES}
    types = {"city": "TEXT", "age": "NUMBER", "vip": "BOOLEAN", "born": "DATE", "plan": "DROPDOWN_SINGLE",
             "langs": "DROPDOWN_MULTIPLE", "country": "COUNTRY"}
    for name, ftype in types.items():
        assert {op for n, op in covered if n == name} == set(sf.FIELD_OPERATORS[ftype]), ftype


@pytest.mark.parametrize(("operator", "tags", "expected"), [
    ("eq", ["t1"], {"b"}),                       # exactly {t1}
    ("eq", ["t1", "t2"], {"a"}),                 # exactly {t1, t2}: e has t3 too
    ("ne", ["t1", "t2"], {"b", "c", "d", "e"}),  # c has no tags at all
    ("contains", ["t1"], {"a", "b", "e"}),
    ("contains", ["t1", "t2"], {"a", "e"}),      # every one of them
    ("not_contains", ["t1"], {"c", "d"}),
    ("not_contains", ["t1", "t3"], {"c", "d"}),  # none of them
])
def test_tag_operators(conn: sqlite3.Connection, world: dict[str, Any], operator: str, tags: list[str],
                       expected: set[str]) -> None:
    value = [world["t"][t] for t in tags]
    assert members(conn, world, {"type": "tags", "operator": operator, "value": value}) == expected


@pytest.mark.parametrize(("ftype", "operator", "value", "expected"), [
    # open rates: a 50%, b 25%, c 0 (no deliveries), d 100%, e 33.3%
    ("open_rate", "eq", 50, {"a"}),
    ("open_rate", "eq", 0, {"c"}),
    ("open_rate", "gt", 25, {"a", "d", "e"}),
    ("open_rate", "gte", 25, {"a", "b", "d", "e"}),
    ("open_rate", "lt", 34, {"b", "c", "e"}),
    ("open_rate", "lte", 50, {"a", "b", "c", "e"}),
    # click rates: a 10%, b 0, c 0, d 100%, e 33.3%
    ("click_rate", "eq", 100, {"d"}),
    ("click_rate", "gt", 10, {"d", "e"}),
    ("click_rate", "gte", 10, {"a", "d", "e"}),
    ("click_rate", "lt", 10, {"b", "c"}),
    ("click_rate", "lte", 0, {"b", "c"}),
])
def test_rate_operators(conn: sqlite3.Connection, world: dict[str, Any], ftype: str, operator: str, value: int,
                        expected: set[str]) -> None:
    assert members(conn, world, {"type": ftype, "operator": operator, "value": value}) == expected


@pytest.mark.parametrize(("operator", "value", "expected"), [
    # last activity: a 1 day ago (click), b 300 days (open only), c never, d 1 hour (click only),
    # e 20 days (the later of an open 40 days ago and a click 20 days ago)
    ("within_last_days", 2, {"a", "d"}),
    ("within_last_days", 30, {"a", "d", "e"}),
    ("is_after", ago(days=25), {"a", "d", "e"}),
    ("is_before", ago(days=25), {"b"}),         # e's open is older, but its click is not
    ("is_before", ago(hours=-1), {"a", "b", "d", "e"}),  # c never opened nor clicked
], ids=["within_2_days", "within_30_days", "after_25_days_ago", "before_25_days_ago", "before_in_an_hour"])
def test_last_activity_operators(conn: sqlite3.Connection, world: dict[str, Any], operator: str, value: Any,
                                 expected: set[str]) -> None:
    assert members(conn, world, {"type": "last_activity", "operator": operator, "value": value}) == expected


def test_and_or(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    city = fld(world, "city", "contains", "paris")
    rate = {"type": "open_rate", "operator": "gte", "value": 50}
    assert members(conn, world, city, rate) == {"a"}
    assert members(conn, world, city, rate, condition="OR") == {"a", "b", "d"}
    assert members(conn, world, city, rate, condition="or") == {"a", "b", "d"}


def test_filters_are_scoped_to_the_workspace(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    # The other workspace's contact has city Paris and age 30 under the same field ids.
    assert members(conn, world, fld(world, "city", "eq", "Paris")) == {"a"}
    with pytest.raises(MktError) as err:
        sf.validate_filters(conn, world["ws"], {"condition": "AND", "filters": [
            {"type": "tags", "operator": "contains", "value": [world["t"]["other"]]}]})
    assert err.value.message == f"Filter #1: Tag ID {world['t']['other']} does not exist in this workspace"


def test_field_filter_uses_the_expression_index(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    query = sf.member_query(conn, world["ws"], {"condition": "AND", "filters": [fld(world, "city", "eq", "Paris")]})
    plan = query_plan(conn, query.sql, query.params)
    assert f"contacts_field_{world['f']['city']}" in plan, plan


def test_values_are_parameters_never_sql(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    evil = "x' OR 1=1 --"
    compiled = sf.compile_filters(conn, world["ws"], {"condition": "AND", "filters": [fld(world, "city", "eq", evil)]})
    assert evil not in compiled.sql and compiled.params == [evil]
    assert members(conn, world, fld(world, "city", "eq", evil)) == set()


def test_validate_normalises_for_storage(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    out = sf.validate_filters(conn, world["ws"], {"condition": "or", "filters": [
        {"type": "FIELD", "field_id": world["f"]["country"], "operator": "EQ", "value": "fr"},
        {"type": "tags", "operator": "contains", "value": [world["t"]["t1"], world["t"]["t1"]]},
        {"type": "last_activity", "operator": "is_after", "value": "2026-01-01T01:00:00+01:00"},
        {"type": "click_rate", "operator": "gte", "value": 10.0},
    ]})
    assert out == {"condition": "OR", "filters": [
        {"type": "field", "field_id": world["f"]["country"], "operator": "eq", "value": "FR"},
        {"type": "tags", "operator": "contains", "value": [world["t"]["t1"]]},
        {"type": "last_activity", "operator": "is_after", "value": "2026-01-01T00:00:00.000Z"},
        {"type": "click_rate", "operator": "gte", "value": 10},
    ]}


def _message(conn: sqlite3.Connection, ws: int, filters: Any) -> str:
    with pytest.raises(MktError) as err:
        sf.validate_filters(conn, ws, filters)
    assert err.value.status == 400
    return err.value.message


def test_condition_and_list_messages(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    ws = world["ws"]
    good = {"type": "open_rate", "operator": "gt", "value": 1}
    assert _message(conn, ws, None) == "Filter condition must be AND or OR"
    assert _message(conn, ws, {"filters": [good]}) == "Filter condition must be AND or OR"
    assert _message(conn, ws, {"condition": "XOR", "filters": [good]}) == "Filter condition must be AND or OR"
    assert _message(conn, ws, {"condition": 1, "filters": [good]}) == "Filter condition must be AND or OR"
    assert _message(conn, ws, {"condition": "AND", "filters": []}) == "At least one filter is required"
    assert _message(conn, ws, {"condition": "AND"}) == "At least one filter is required"
    assert _message(conn, ws, {"condition": "AND", "filters": {}}) == "The member 'filters.filters' must be an array."
    assert _message(conn, ws, []) == "The member 'filters' must be an object."
    assert _message(conn, ws, {"condition": "AND", "filters": [good] * 51}) == "A segment can have at most 50 filters"


FIELD_LISTS = {
    "city": "eq, ne, contains, not_contains, starts_with, ends_with, in, not_in",
    "age": "eq, ne, gt, lt, gte, lte",
    "vip": "eq, ne",
    "born": "eq, ne, gt, lt, gte, lte",
    "plan": "eq, ne, in, not_in",
    "langs": "eq, ne, contains, not_contains",
    "country": "eq, ne, in, not_in",
}


@pytest.mark.parametrize("name", list(FIELD_LISTS))
def test_invalid_field_operator_lists_the_types_operators(conn: sqlite3.Connection, world: dict[str, Any],
                                                         name: str) -> None:
    good = {"type": "open_rate", "operator": "gt", "value": 1}
    bad = {"type": "field", "field_id": world["f"][name], "operator": "between", "value": 1}
    assert _message(conn, world["ws"], {"condition": "AND", "filters": [good, bad]}) == (
        f"Filter #2: Invalid operator for field filter. Must be one of: {FIELD_LISTS[name]}")


@pytest.mark.parametrize(("item", "message"), [
    ({"type": "field", "operator": "eq", "value": "x"}, "Filter #1: Please provide a valid field_id"),
    ({"type": "field", "field_id": "4", "operator": "eq", "value": "x"}, "Filter #1: Please provide a valid field_id"),
    ({"type": "field", "field_id": True, "operator": "eq", "value": "x"}, "Filter #1: Please provide a valid field_id"),
    ({"type": "field", "field_id": 0, "operator": "eq", "value": "x"}, "Filter #1: Please provide a valid field_id"),
    ({"type": "field", "field_id": 99999, "operator": "eq", "value": "x"},
     "Filter #1: The specified field_id does not exist"),
    ({"type": "field", "field_id": 10**30, "operator": "eq", "value": "x"},
     "Filter #1: The specified field_id does not exist"),
    ({"type": "tags", "operator": "eq", "value": [10**30]}, f"Filter #1: Tag ID {10**30} does not exist in this workspace"),
    ({"type": "tags", "operator": "eq", "value": "1"}, "Filter #1: Tags filter value must be an array of tag IDs."),
    ({"type": "tags", "operator": "eq", "value": ["1"]}, "Filter #1: Tags filter value must be an array of tag IDs."),
    ({"type": "tags", "operator": "eq", "value": []}, "Filter #1: Tags filter value must be an array of tag IDs."),
    ({"type": "tags", "operator": "eq"}, "Filter #1: Tags filter value must be an array of tag IDs."),
    ({"type": "tags", "operator": "in", "value": [1]},
     "Filter #1: Invalid operator for tags filter. Must be one of: eq, ne, contains, not_contains"),
    ({"type": "tags", "operator": "eq", "value": [987654]},
     "Filter #1: Tag ID 987654 does not exist in this workspace"),
    ({"type": "last_activity", "operator": "on", "value": 1},
     "Filter #1: Invalid operator for last activity filter. Must be one of: is_after, is_before, within_last_days"),
    ({"type": "last_activity", "operator": "within_last_days", "value": 0},
     "Filter #1: Value must be an integer greater than 0"),
    ({"type": "last_activity", "operator": "within_last_days", "value": "7"},
     "Filter #1: Value must be an integer greater than 0"),
    ({"type": "last_activity", "operator": "is_after", "value": "2026-01-01"},
     "Filter #1: Value must be an RFC 3339 timestamp, for example 2026-01-31T00:00:00Z"),
    ({"type": "last_activity", "operator": "is_before", "value": "2026-01-01T00:00:00"},
     "Filter #1: Value must be an RFC 3339 timestamp, for example 2026-01-31T00:00:00Z"),
    ({"type": "open_rate", "operator": "gte", "value": 101}, "Filter #1: Value must be between 0 and 100"),
    ({"type": "click_rate", "operator": "lt", "value": -1}, "Filter #1: Value must be between 0 and 100"),
    ({"type": "click_rate", "operator": "lt", "value": 100.5}, "Filter #1: Value must be between 0 and 100"),
    ({"type": "click_rate", "operator": "lt", "value": 10.5}, "Filter #1: Value must be a whole number"),
    ({"type": "open_rate", "operator": "gt", "value": "50"}, "Filter #1: Value must be an integer between 0 and 100"),
    ({"type": "open_rate", "operator": "ne", "value": 5},
     "Filter #1: Invalid operator for open_rate filter. Must be one of: eq, gt, lt, gte, lte"),
    ({"type": "click_rate", "operator": None, "value": 5},
     "Filter #1: Invalid operator for click_rate filter. Must be one of: eq, gt, lt, gte, lte"),
    ({"type": "segment", "operator": "eq", "value": 5},
     "Filter #1: Invalid filter type. Must be one of: field, tags, open_rate, click_rate, last_activity"),
    ("open_rate", "Filter #1: Each filter must be an object"),
])
def test_filter_messages(conn: sqlite3.Connection, world: dict[str, Any], item: Any, message: str) -> None:
    assert _message(conn, world["ws"], {"condition": "AND", "filters": [item]}) == message


@pytest.mark.parametrize(("name", "operator", "value", "message"), [
    ("city", "eq", 5, "Value must be a string"),
    ("city", "eq", "  ", "Please provide a value"),
    ("city", "in", "Paris", "Value must be a non-empty array of values"),
    ("city", "not_in", [], "Value must be a non-empty array of values"),
    ("age", "gt", "lots", "Field 'age' must be a number"),
    ("age", "eq", True, "Field 'age' must be a number"),
    ("vip", "eq", "maybe", "Field 'vip' must be true or false"),
    ("born", "lt", "31/12/2020", "Field 'born' must be a date (YYYY-MM-DD) or an RFC 3339 timestamp"),
    ("plan", "eq", "gold", "Field 'plan' must be one of: free, pro, team"),
    ("plan", "in", ["free", "gold"], "Field 'plan' must be one of: free, pro, team"),
    ("langs", "contains", ["en", "xx"], "Field 'langs' must be one of: en, fr, de"),
    ("langs", "eq", 3, "Field 'langs' must be a list of: en, fr, de"),
    ("country", "eq", "France", "Field 'country' must be an ISO 3166-1 alpha-2 country code (for example US)"),
    ("phone", "eq", "not a number", "'not a number' is not a phone number"),
])
def test_value_shape_messages(conn: sqlite3.Connection, world: dict[str, Any], name: str, operator: str,
                              value: Any, message: str) -> None:
    filters = {"condition": "AND", "filters": [fld(world, name, operator, value)]}
    assert _message(conn, world["ws"], filters) == f"Filter #1: {message}"


def test_a_deleted_field_fails_compilation_with_the_spec_message(conn: sqlite3.Connection,
                                                                 world: dict[str, Any]) -> None:
    filters = {"condition": "AND", "filters": [fld(world, "city", "eq", "Paris")]}
    sf.compile_filters(conn, world["ws"], filters)
    conn.execute("DELETE FROM fields WHERE id = ?", (world["f"]["city"],))
    with pytest.raises(MktError, match="Filter #1: The specified field_id does not exist"):
        sf.compile_filters(conn, world["ws"], filters)


def test_numbers_beyond_64_bits_compare_as_reals(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    assert members(conn, world, fld(world, "age", "lt", 10**30)) == {"a", "b", "c"}
    assert members(conn, world, fld(world, "age", "gt", -(10**30))) == {"a", "b", "c"}



"""search_contacts: every operator on every field type, tags, status, pagination, sorting, errors."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import search
from marketing_cli.services.contacts.search import compile_search, search_contacts
from marketing_cli.storage import dialect, field_sql
from tests.engines import query_plan
from tests.factories import row_contact as add_contact
from tests.factories import row_field as add_field
from tests.factories import row_tag as add_tag

FIELDS = {
    "city": ("TEXT", None),
    "age": ("NUMBER", None),
    "vip": ("BOOLEAN", None),
    "birthday": ("DATE", None),
    "plan": ("DROPDOWN_SINGLE", "free,pro,team"),
    "interests": ("DROPDOWN_MULTIPLE", "golf,chess,tennis"),
    "country": ("COUNTRY", None),
}


class People:
    """Four contacts covering present, missing and empty values of every field type."""

    def __init__(self, conn: Any, ws: int) -> None:
        self.conn, self.ws = conn, ws
        self.field = {tag: add_field(conn, ws, tag, type, definition=d) for tag, (type, d) in FIELDS.items()}
        add_field(conn, ws, "phone_number", default_region="US")
        self.news, self.gold = add_tag(conn, ws, "news"), add_tag(conn, ws, "gold")

        def data(**values: Any) -> dict[str, Any]:
            return {str(self.field[k]): v for k, v in values.items()}

        self.names: dict[str, str] = {}
        self.names[add_contact(
            conn, ws, email="ann@example.com", phone="+14155552671", status="SUBSCRIBED",
            data=data(city="Paris", age=30, vip=True, birthday="1990-05-01", plan="pro",
                      interests=["golf", "chess"], country="FR"),
            created_at="2026-01-01T00:00:00.000Z", updated_at="2026-03-01T00:00:00.000Z",
            tags=[self.news, self.gold])] = "ann"
        self.names[add_contact(
            conn, ws, email="bob@sample.org", phone="+442079460000", status="UNSUBSCRIBED",
            data=data(city="London", age=9.5, vip=False, birthday="2001-12-24", plan="free",
                      interests=["chess"], country="GB"),
            created_at="2026-01-02T00:00:00.000Z", updated_at="2026-02-01T00:00:00.000Z",
            tags=[self.news])] = "bob"
        self.names[add_contact(
            conn, ws, email="cat@example.com", status="UNCONFIRMED", data=data(city="", age=100, interests=[]),
            created_at="2026-01-03T00:00:00.000Z", updated_at="2026-01-03T00:00:00.000Z")] = "cat"
        self.names[add_contact(
            conn, ws, email=None, phone="+12025550143", status="SUBSCRIBED",
            created_at="2026-01-04T00:00:00.000Z", updated_at="2026-04-01T00:00:00.000Z")] = "dan"

    def find(self, **body: Any) -> list[str]:
        result = search_contacts(self.conn, self.ws, body)
        return [self.names[c["id"]] for c in result["contacts"]]

    def where(self, merge_tag: str, operator: str, *value: Any) -> list[str]:
        item: dict[str, Any] = {"merge_tag": merge_tag, "operator": operator}
        if value:
            item["value"] = value[0]
        return self.find(fields=[item])

    def error(self, body: Any) -> tuple[int, str]:
        with pytest.raises(MktError) as info:
            search_contacts(self.conn, self.ws, body)
        return info.value.status, info.value.message


@pytest.fixture
def people(conn: Any, workspace: dict[str, Any]) -> People:
    return People(conn, workspace["id"])


EVERYONE = ["ann", "bob", "cat", "dan"]


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", "Paris", ["ann"]),
    ("EQUALS", "paris", []),                       # EQUALS is exact (and indexed)
    ("NOT_EQUALS", "Paris", ["bob", "cat", "dan"]),  # missing values are "not equal"
    ("CONTAINS", "AR", ["ann"]),                    # CONTAINS ignores ASCII case
    ("CONTAINS", "on", ["bob"]),
    ("CONTAINS", " Lon", []),                       # the value is used as given, spaces included
    ("CONTAINS", "is", ["ann"]),
    ("NOT_CONTAINS", "ar", ["bob", "cat", "dan"]),
    ("EXISTS", None, ["ann", "bob"]),               # '' counts as no value
    ("EXISTS", True, ["ann", "bob"]),
    ("EXISTS", False, ["cat", "dan"]),
    ("GREATER_THAN", "M", ["ann"]),
    ("LESS_THAN", "M", ["bob"]),
])
def test_text(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("city", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", 30, ["ann"]),
    ("EQUALS", "30", ["ann"]),
    ("EQUALS", 30.0, ["ann"]),
    ("EQUALS", 9.5, ["bob"]),
    ("NOT_EQUALS", 30, ["bob", "cat", "dan"]),
    ("GREATER_THAN", 10, ["ann", "cat"]),           # numerically: 9.5 < 10 < 30 < 100
    ("GREATER_THAN", "9.5", ["ann", "cat"]),
    ("LESS_THAN", 10, ["bob"]),
    ("LESS_THAN", 1000, ["ann", "bob", "cat"]),     # missing values never compare
    ("EXISTS", None, ["ann", "bob", "cat"]),
    ("EXISTS", False, ["dan"]),
])
def test_number(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("age", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", True, ["ann"]),
    ("EQUALS", False, ["bob"]),
    ("EQUALS", "yes", ["ann"]),
    ("NOT_EQUALS", True, ["bob", "cat", "dan"]),
    ("NOT_EQUALS", False, ["ann", "cat", "dan"]),
    ("EXISTS", None, ["ann", "bob"]),
    ("EXISTS", False, ["cat", "dan"]),
])
def test_boolean(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("vip", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", "1990-05-01", ["ann"]),
    ("EQUALS", "1990-05-01T23:30:00Z", ["ann"]),
    ("EQUALS", "1990-05-01T23:30:00-02:00", []),    # that is 2 May in UTC
    ("NOT_EQUALS", "1990-05-01", ["bob", "cat", "dan"]),
    ("GREATER_THAN", "2000-01-01", ["bob"]),
    ("LESS_THAN", "2000-01-01", ["ann"]),
    ("LESS_THAN", "2001-12-24", ["ann"]),
    ("EXISTS", None, ["ann", "bob"]),
    ("EXISTS", False, ["cat", "dan"]),
])
def test_date(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("birthday", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", "pro", ["ann"]),
    ("EQUALS", "PRO", ["ann"]),
    ("EQUALS", "team", []),
    ("NOT_EQUALS", "pro", ["bob", "cat", "dan"]),
    ("EXISTS", None, ["ann", "bob"]),
    ("EXISTS", False, ["cat", "dan"]),
])
def test_dropdown_single(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("plan", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("CONTAINS", "chess", ["ann", "bob"]),          # the array holds the option
    ("CONTAINS", "Golf", ["ann"]),
    ("CONTAINS", "tennis", []),
    ("CONTAINS", ["golf", "chess"], ["ann"]),       # several options: all of them
    ("NOT_CONTAINS", "golf", ["bob", "cat", "dan"]),
    ("EQUALS", ["chess", "golf"], ["ann"]),         # the same set, in any order
    ("EQUALS", "chess", ["bob"]),
    ("EQUALS", ["chess"], ["bob"]),
    ("EQUALS", ["golf"], []),
    ("NOT_EQUALS", ["chess"], ["ann", "cat", "dan"]),
    ("EXISTS", None, ["ann", "bob"]),               # [] counts as no value
    ("EXISTS", False, ["cat", "dan"]),
])
def test_dropdown_multiple(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("interests", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", "fr", ["ann"]),
    ("EQUALS", "GB", ["bob"]),
    ("NOT_EQUALS", "FR", ["bob", "cat", "dan"]),
    ("EXISTS", None, ["ann", "bob"]),
    ("EXISTS", False, ["cat", "dan"]),
])
def test_country(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("country", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", " ANN@Example.com ", ["ann"]),
    ("NOT_EQUALS", "ann@example.com", ["bob", "cat", "dan"]),
    ("CONTAINS", "@EXAMPLE.com", ["ann", "cat"]),
    ("NOT_CONTAINS", "@example.com", ["bob", "dan"]),
    ("EXISTS", None, ["ann", "bob", "cat"]),
    ("EXISTS", False, ["dan"]),
])
def test_email_address(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("email_address", operator, *args) == expected


@pytest.mark.parametrize("operator, value, expected", [
    ("EQUALS", "(415) 555-2671", ["ann"]),          # read in the field's default region (US)
    ("EQUALS", "+44 20 7946 0000", ["bob"]),
    ("NOT_EQUALS", "+14155552671", ["bob", "cat", "dan"]),
    ("CONTAINS", "+44", ["bob"]),
    ("CONTAINS", "555-", ["ann", "dan"]),
    ("NOT_CONTAINS", "555", ["bob", "cat"]),
    ("EXISTS", None, ["ann", "bob", "dan"]),
    ("EXISTS", False, ["cat"]),
])
def test_phone_number(people, operator, value, expected):
    args = () if value is None else (value,)
    assert people.where("phone_number", operator, *args) == expected


def test_first_name_is_an_ordinary_text_field(people):
    assert people.where("first_name", "EXISTS", False) == EVERYONE


def test_operator_is_case_insensitive_and_filters_combine_with_and(people):
    assert people.find(fields=[{"merge_tag": "age", "operator": "greater_than", "value": 5},
                               {"merge_tag": "email_address", "operator": "CONTAINS", "value": "example"}]) == [
        "ann", "cat"]
    assert people.find(fields=[{"merge_tag": "age", "operator": "GREATER_THAN", "value": 5}],
                       status="UNCONFIRMED") == ["cat"]


def test_tags_all_of(people):
    assert people.find(tags=[people.news]) == ["ann", "bob"]
    assert people.find(tags=[people.news, people.gold]) == ["ann"]
    assert people.find(tags=[people.gold, people.gold]) == ["ann"]
    assert people.find(tags=[]) == EVERYONE
    assert people.find(tags=[people.news], status="UNSUBSCRIBED") == ["bob"]


def test_status(people):
    assert people.find(status="SUBSCRIBED") == ["ann", "dan"]
    assert people.find(status="COMPLAINED") == []
    assert people.error({"status": "subscribed"}) == (400, "The status you provided is not valid.")


def test_empty_body_lists_everyone_with_defaults(people):
    result = search_contacts(people.conn, people.ws, None)
    assert [people.names[c["id"]] for c in result["contacts"]] == EVERYONE
    assert result["pagination"] == {"page": 1, "limit": 50, "total": 4}
    assert search_contacts(people.conn, people.ws, {})["pagination"]["total"] == 4


def test_other_workspaces_are_invisible(conn, people):
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    add_contact(conn, other, email="ann@example.com")
    assert people.find() == EVERYONE
    assert people.where("email_address", "EQUALS", "ann@example.com") == ["ann"]
    assert search_contacts(conn, other, {})["pagination"]["total"] == 1
    # A field or tag id of this workspace means nothing in the other one.
    with pytest.raises(MktError) as info:
        search_contacts(conn, other, {"fields": [{"merge_tag": "city", "operator": "EXISTS"}]})
    assert info.value.message == "We were unable to find a field with the merge_tag city (fields[0].merge_tag)."
    with pytest.raises(MktError) as info:
        search_contacts(conn, other, {"tags": [people.news]})
    assert info.value.message == (
        f"The member 'tags' holds tag IDs that do not exist in this workspace: {people.news}.")


# --- pagination and sorting


@pytest.fixture
def many(conn: Any, workspace: dict[str, Any]) -> list[str]:
    """25 contacts created a day apart, updated in the reverse order."""
    ids = []
    for i in range(25):
        ids.append(add_contact(conn, workspace["id"], email=f"p{i:02d}@example.com",
                               created_at=f"2026-01-{i + 1:02d}T00:00:00.000Z",
                               updated_at=f"2026-02-{25 - i:02d}T00:00:00.000Z"))
    return ids


def page_of(conn: Any, ws: int, **body: Any) -> tuple[list[str], dict[str, int]]:
    result = search_contacts(conn, ws, body)
    return [c["id"] for c in result["contacts"]], result["pagination"]


def test_pages(conn, workspace, many):
    ws = workspace["id"]
    assert page_of(conn, ws, limit=10) == (many[:10], {"page": 1, "limit": 10, "total": 25})
    assert page_of(conn, ws, limit=10, page=3) == (many[20:], {"page": 3, "limit": 10, "total": 25})
    assert page_of(conn, ws, limit=10, page=4) == ([], {"page": 4, "limit": 10, "total": 25})
    assert page_of(conn, ws, limit=10, page=10**9) == ([], {"page": 10**9, "limit": 10, "total": 25})
    assert page_of(conn, ws, limit=250)[0] == many
    assert page_of(conn, ws)[1] == {"page": 1, "limit": 50, "total": 25}


def test_total_counts_all_matches_not_the_page(conn, workspace, many):
    ids, pagination = page_of(conn, workspace["id"], limit=10, page=2, fields=[
        {"merge_tag": "email_address", "operator": "CONTAINS", "value": "p1"}])
    assert pagination["total"] == 10 and ids == []
    ids, pagination = page_of(conn, workspace["id"], limit=10, fields=[
        {"merge_tag": "email_address", "operator": "NOT_CONTAINS", "value": "p1"}])
    assert pagination["total"] == 15 and ids == many[:10]


def test_sorting(conn, workspace, many):
    ws = workspace["id"]
    assert page_of(conn, ws, sort_order="desc", limit=10)[0] == many[::-1][:10]
    assert page_of(conn, ws, sort_by="updated_at", limit=10)[0] == many[::-1][:10]
    assert page_of(conn, ws, sort_by="updated_at", sort_order="DESC", limit=10)[0] == many[:10]
    assert page_of(conn, ws, sort_by="created_at", sort_order="asc", limit=10, page=2)[0] == many[10:20]


def test_ties_are_broken_by_id(conn, workspace):
    ws = workspace["id"]
    same = sorted(add_contact(conn, ws, email=f"t{i}@example.com", created_at="2026-01-01T00:00:00.000Z")
                  for i in range(12))
    assert page_of(conn, ws, limit=10)[0] == same[:10]
    assert page_of(conn, ws, limit=10, page=2)[0] == same[10:]
    assert page_of(conn, ws, limit=10, sort_order="desc")[0] == same[::-1][:10]


# --- errors


@pytest.mark.parametrize("body, message", [
    ([], "Invalid request body."),
    ({"fields": {}}, "The member 'fields' must be an array."),
    ({"fields": ["city"]}, "The member 'fields[0]' must be an object."),
    ({"fields": [{"operator": "EQUALS", "value": 1}]}, "The member 'fields[0].merge_tag' is required."),
    ({"fields": [{"merge_tag": 5, "operator": "EQUALS"}]}, "The member 'fields[0].merge_tag' must be a string."),
    ({"fields": [{"merge_tag": "city"}]},
     "The member 'fields[0].operator' is required. Operators: EQUALS, NOT_EQUALS, CONTAINS, NOT_CONTAINS, EXISTS,"
     " GREATER_THAN, LESS_THAN."),
    ({"fields": [{"merge_tag": "city", "operator": "EXISTS"}, {"merge_tag": "city", "operator": "LIKE"}]},
     "The member 'fields[1].operator' must be one of: EQUALS, NOT_EQUALS, CONTAINS, NOT_CONTAINS, EXISTS,"
     " GREATER_THAN, LESS_THAN."),
    ({"fields": [{"merge_tag": "town", "operator": "EQUALS", "value": "x"}]},
     "We were unable to find a field with the merge_tag town (fields[0].merge_tag)."),
    ({"fields": [{"merge_tag": "city", "operator": "EQUALS"}]},
     "The member 'fields[0].value' is required with EQUALS."),
    ({"fields": [{"merge_tag": "city", "operator": "CONTAINS", "value": "  "}]},
     "The member 'fields[0].value' is required with CONTAINS."),
    ({"fields": [{"merge_tag": "city", "operator": "EXISTS", "value": "yes"}]},
     "The member 'fields[0].value' must be true or false (or omitted) with EXISTS."),
    ({"fields": [{"merge_tag": "city", "operator": "EQUALS", "value": {"a": 1}}]},
     "The member 'fields[0].value' must be a single value for field 'city' (TEXT), not an object."),
    ({"fields": [{"merge_tag": "city", "operator": "CONTAINS", "value": ["a"]}]},
     "The member 'fields[0].value' must be a string."),
    ({"fields": [{"merge_tag": "age", "operator": "EQUALS", "value": "thirty"}]},
     "The member 'fields[0].value' does not fit the field: Field 'age' must be a number."),
    ({"fields": [{"merge_tag": "age", "operator": "GREATER_THAN", "value": True}]},
     "The member 'fields[0].value' does not fit the field: Field 'age' must be a number."),
    ({"fields": [{"merge_tag": "age", "operator": "EQUALS", "value": [1]}]},
     "The member 'fields[0].value' must be a single value for field 'age' (NUMBER), not an array."),
    ({"fields": [{"merge_tag": "vip", "operator": "EQUALS", "value": "maybe"}]},
     "The member 'fields[0].value' does not fit the field: Field 'vip' must be true or false."),
    ({"fields": [{"merge_tag": "birthday", "operator": "LESS_THAN", "value": "01/05/1990"}]},
     "The member 'fields[0].value' does not fit the field: Field 'birthday' must be a date (YYYY-MM-DD) or an"
     " RFC 3339 timestamp."),
    ({"fields": [{"merge_tag": "plan", "operator": "EQUALS", "value": "gold"}]},
     "The member 'fields[0].value' does not fit the field: Field 'plan' must be one of: free, pro, team."),
    ({"fields": [{"merge_tag": "interests", "operator": "CONTAINS", "value": "darts"}]},
     "The member 'fields[0].value' does not fit the field: Field 'interests' must be one of: golf, chess, tennis."),
    ({"fields": [{"merge_tag": "interests", "operator": "EQUALS", "value": " , "}]},
     "The member 'fields[0].value' is required with EQUALS."),
    ({"fields": [{"merge_tag": "country", "operator": "EQUALS", "value": "XX"}]},
     "The member 'fields[0].value' does not fit the field: Field 'country' must be an ISO 3166-1 alpha-2 country"
     " code (for example US)."),
    ({"fields": [{"merge_tag": "email_address", "operator": "EQUALS", "value": "not-an-address"}]},
     "The member 'fields[0].value' must be a valid email address; 'not-an-address' is not."),
    ({"fields": [{"merge_tag": "phone_number", "operator": "EQUALS", "value": "12"}]},
     "The member 'fields[0].value' must be a valid phone number: '12' is not a valid phone number."),
    ({"fields": [{"merge_tag": "phone_number", "operator": "CONTAINS", "value": "abc"}]},
     "The member 'fields[0].value' must hold digits of a phone number."),
    ({"tags": "1"}, "The member 'tags' must be an array."),
    ({"tags": [1, "2"]}, "The member 'tags' must be an array of integers."),
    ({"tags": [999]}, "The member 'tags' holds tag IDs that do not exist in this workspace: 999."),
    ({"status": 1}, "The member 'status' must be a string."),
    ({"status": "GONE"}, "The status you provided is not valid."),
    ({"page": 0}, "The member 'page' must be 1 or more."),
    ({"page": "2"}, "The member 'page' must be an integer."),
    ({"page": 10**9 + 1}, "The member 'page' must be at most 1000000000."),
    ({"tags": [2**70]}, f"The member 'tags' holds tag IDs that do not exist in this workspace: {2**70}."),
    ({"limit": 9}, "The member 'limit' must be between 10 and 250."),
    ({"limit": 251}, "The member 'limit' must be between 10 and 250."),
    ({"limit": 10.5}, "The member 'limit' must be an integer."),
    ({"sort_by": "email"}, "The member 'sort_by' must be created_at or updated_at."),
    ({"sort_order": "up"}, "The member 'sort_order' must be asc or desc."),
])
def test_errors(people, body, message):
    assert people.error(body) == (400, message)


def test_huge_numbers_do_not_overflow(people):
    assert people.where("age", "LESS_THAN", 10**30) == ["ann", "bob", "cat"]


# --- the SQL: one COUNT, one page query, indexes used


def plan(conn: Any, sql: str, params: list[Any]) -> str:
    return query_plan(conn, sql, params)


@pytest.mark.parametrize("operator", ["EQUALS", "GREATER_THAN", "LESS_THAN"])
def test_custom_field_filters_use_the_expression_index(people, operator):
    query = compile_search(people.conn, people.ws, {"fields": [
        {"merge_tag": "age", "operator": operator, "value": 30}]})
    index = f"contacts_field_{people.field['age']}"
    assert index in plan(people.conn, query.count_sql, query.lookup_params)
    assert index in plan(people.conn, query.page_sql(walk=False), query.page_params(walk=False))
    assert field_sql.typed_value_expr(people.conn, people.field["age"], "NUMBER") in query.page_sql()
    assert "30" not in query.page_sql()  # values are parameters, never SQL text


def test_email_equals_uses_the_email_index(people):
    query = compile_search(people.conn, people.ws, {"fields": [
        {"merge_tag": "email_address", "operator": "EQUALS", "value": "ann@example.com"}]})
    assert "contacts_email" in plan(people.conn, query.count_sql, query.lookup_params)
    assert "contacts_email" in plan(people.conn, query.page_sql(walk=False), query.page_params(walk=False))
    assert "ann@example.com" not in query.page_sql()


def test_merge_tags_never_reach_the_sql(people):
    query = compile_search(people.conn, people.ws, {"fields": [
        {"merge_tag": "city", "operator": "CONTAINS", "value": "'; DROP TABLE contacts; --"}]})
    assert "DROP" not in query.page_sql() and "city" not in query.page_sql()
    assert people.where("city", "CONTAINS", "'; DROP TABLE contacts; --") == []


def test_search_runs_one_count_and_one_page_query(people, monkeypatch):
    statements: list[str] = []
    people.conn.set_trace_callback(statements.append)
    try:
        people.find(fields=[{"merge_tag": "age", "operator": "GREATER_THAN", "value": 1}], tags=[people.news])
    finally:
        people.conn.set_trace_callback(None)
    on_contacts = [s for s in statements if s.startswith(("SELECT COUNT(*) FROM contacts", "SELECT * FROM contacts"))]
    assert len(on_contacts) == 2
    assert on_contacts[0].startswith("SELECT COUNT(*)") and "LIMIT" in on_contacts[1]


def test_both_page_plans_give_the_same_pages(conn, workspace, many):
    ws = workspace["id"]
    add_field(conn, ws, "age", "NUMBER")
    odd, third = add_tag(conn, ws, "odd"), add_tag(conn, ws, "third")
    conn.executemany("INSERT INTO contact_tags VALUES (?, ?)", [(c, odd) for c in many[1::2]])
    conn.executemany("INSERT INTO contact_tags VALUES (?, ?)", [(c, third) for c in many[::3]])
    for body in ({}, {"sort_order": "desc", "page": 2, "limit": 10}, {"sort_by": "updated_at", "limit": 10},
                 {"fields": [{"merge_tag": "email_address", "operator": "CONTAINS", "value": "p1"}], "limit": 10},
                 {"fields": [{"merge_tag": "age", "operator": "EXISTS", "value": False}], "page": 3, "limit": 10},
                 {"tags": [odd], "limit": 10, "page": 2}, {"tags": [odd, third], "sort_order": "desc"},
                 {"tags": [third], "fields": [{"merge_tag": "email_address", "operator": "EQUALS",
                                               "value": "p03@example.com"}]}):
        query = compile_search(conn, ws, body)
        walked = [r["id"] for r in conn.execute(query.page_sql(walk=True), query.page_params(walk=True))]
        sorted_ = [r["id"] for r in conn.execute(query.page_sql(walk=False), query.page_params(walk=False))]
        assert walked == sorted_ == page_of(conn, ws, **body)[0]
        assert conn.execute(query.count_sql, query.lookup_params).fetchone()[0] == len(
            list(conn.execute(query.where.join(["SELECT id FROM contacts WHERE ", ""]), query.params)))
        assert dialect.contacts_indexed_by(conn, "contacts_") in query.page_sql(walk=True)


def test_plan_choice_follows_how_many_match(conn, workspace, many):
    """Common matches walk the sort index; rare ones come from the filter's index and are sorted."""
    ws = workspace["id"]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        page_of(conn, ws, limit=10, fields=[{"merge_tag": "email_address", "operator": "CONTAINS", "value": "p"}])
        page_of(conn, ws, limit=10, fields=[{"merge_tag": "email_address", "operator": "EQUALS",
                                             "value": "p07@example.com"}])
    finally:
        conn.set_trace_callback(None)
    pages = [s for s in statements if "LIMIT" in s and "FROM contacts" in s]
    # (PostgreSQL has no INDEXED BY: there the planner chooses, and only the sort differs.)
    assert dialect.contacts_indexed_by(conn, "contacts_created") in pages[0] and "ORDER BY +" not in pages[0]
    assert "INDEXED BY" not in pages[1] and "ORDER BY +created_at" in pages[1]


def test_tags_drive_the_lookup_when_no_field_condition_is_indexed(conn, workspace, many):
    ws = workspace["id"]
    big, small = add_tag(conn, ws, "big"), add_tag(conn, ws, "small")
    conn.executemany("INSERT INTO contact_tags VALUES (?, ?)", [(c, big) for c in many])
    conn.executemany("INSERT INTO contact_tags VALUES (?, ?)", [(c, small) for c in many[:2]])
    query = compile_search(conn, ws, {"tags": [big, small]})
    assert "contact_tags_tag" in plan(conn, query.count_sql, query.lookup_params)
    assert query.lookup_params[-2:] == [small, big]  # the smaller tag drives, the other is probed
    assert page_of(conn, ws, tags=[big, small])[0] == many[:2]
    indexed = compile_search(conn, ws, {"tags": [big], "fields": [
        {"merge_tag": "email_address", "operator": "EQUALS", "value": "p01@example.com"}]})
    assert "contacts_email" in plan(conn, indexed.count_sql, indexed.lookup_params)


def test_empty_search_total_is_the_contact_count(conn, workspace, many):
    assert page_of(conn, workspace["id"])[1]["total"] == 25
    conn.execute("DELETE FROM contacts WHERE id = ?", (many[0],))
    assert page_of(conn, workspace["id"])[1]["total"] == 24


def test_defaults_are_documented_values():
    assert (search.DEFAULT_LIMIT, search.MIN_LIMIT, search.MAX_LIMIT) == (50, 10, 250)


# --- field definitions are remembered only while the database is unchanged


def test_a_new_field_is_seen_at_once_on_the_same_connection(conn, workspace):
    ws = workspace["id"]
    body = {"fields": [{"merge_tag": "shoe", "operator": "EXISTS"}]}
    with pytest.raises(MktError):
        search_contacts(conn, ws, body)
    add_field(conn, ws, "shoe", "NUMBER")
    assert search_contacts(conn, ws, body)["pagination"]["total"] == 0


def test_field_changes_from_another_connection_are_seen(conn, db_path, workspace):
    from marketing_cli.storage.db import connect

    ws = workspace["id"]
    field_id = add_field(conn, ws, "plan", "DROPDOWN_SINGLE", definition="free,pro")
    add_contact(conn, ws, email="a@example.com", data={str(field_id): "team"})
    body = {"fields": [{"merge_tag": "plan", "operator": "EQUALS", "value": "team"}]}
    with pytest.raises(MktError):  # not an option yet
        search_contacts(conn, ws, body)
    other = connect(db_path)
    try:
        other.execute("UPDATE fields SET definition = 'free,pro,team' WHERE id = ?", (field_id,))
        add_field(other, ws, "shoe", "NUMBER")
    finally:
        other.close()
    assert search_contacts(conn, ws, body)["pagination"]["total"] == 1
    assert search_contacts(conn, ws, {"fields": [{"merge_tag": "shoe", "operator": "EXISTS", "value": False}]})[
        "pagination"]["total"] == 1


def test_field_cache_is_per_workspace(conn, workspace):
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    add_field(conn, workspace["id"], "shoe", "NUMBER")
    body = {"fields": [{"merge_tag": "shoe", "operator": "EXISTS"}]}
    assert search_contacts(conn, workspace["id"], body)["pagination"]["total"] == 0
    with pytest.raises(MktError):
        search_contacts(conn, other, body)


def test_many_unknown_tags_are_summarised(conn, workspace):
    from marketing_cli.errors import MktError
    from marketing_cli.services.contacts.search import search_contacts

    with pytest.raises(MktError) as err:
        search_contacts(conn, workspace["id"], {"tags": list(range(1, 101))})
    assert err.value.message == ("The member 'tags' holds tag IDs that do not exist in this workspace: "
                                 "1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 90 more.")
    with pytest.raises(MktError) as err:  # past the limit: refused before any lookup
        search_contacts(conn, workspace["id"], {"tags": list(range(1, 40001))})
    assert err.value.message == "The member 'tags' can hold at most 100 tag IDs."


# --- every operator on every field type (the combinations beyond the obvious ones)

@pytest.mark.parametrize("merge_tag, operator, value, expected", [
    ("age", "CONTAINS", 9, ["bob"]),                   # numbers match on their text: 9.5
    ("age", "CONTAINS", "0", ["ann", "cat"]),          # 30, 100
    ("age", "NOT_CONTAINS", "0", ["bob", "dan"]),      # missing values match NOT_*
    ("birthday", "CONTAINS", "1990", ["ann"]),         # dates as YYYY-MM-DD
    ("birthday", "CONTAINS", "-12-", ["bob"]),
    ("birthday", "NOT_CONTAINS", "1990", ["bob", "cat", "dan"]),
    ("vip", "CONTAINS", "TRUE", ["ann"]),              # booleans as true/false
    ("vip", "NOT_CONTAINS", "true", ["bob", "cat", "dan"]),
    ("vip", "GREATER_THAN", False, ["ann"]),           # false < true
    ("vip", "LESS_THAN", True, ["bob"]),
    ("plan", "CONTAINS", "r", ["ann", "bob"]),         # pro, free
    ("plan", "GREATER_THAN", "free", ["ann"]),         # options in text order
    ("plan", "LESS_THAN", "pro", ["bob"]),
    ("country", "CONTAINS", "f", ["ann"]),
    ("country", "GREATER_THAN", "FR", ["bob"]),        # GB
    ("country", "LESS_THAN", "GB", ["ann"]),
    ("interests", "GREATER_THAN", 1, ["ann"]),         # how many options are selected
    ("interests", "LESS_THAN", 2, ["bob", "cat"]),     # [] counts 0; missing never compares
    ("email_address", "GREATER_THAN", "b", ["bob", "cat"]),
    ("email_address", "LESS_THAN", "b", ["ann"]),
    ("phone_number", "GREATER_THAN", "+14155552671", ["bob"]),  # +44... sorts after +1...
    ("phone_number", "LESS_THAN", "+14155552671", ["dan"]),  # +1202... < +1415...
])
def test_every_operator_works_on_every_type(people, merge_tag, operator, value, expected):
    assert people.where(merge_tag, operator, value) == expected


def test_multi_select_ordering_needs_a_count(people):
    status, message = people.error({"fields": [{"merge_tag": "interests", "operator": "LESS_THAN", "value": "golf"}]})
    assert (status, message) == (400, "The member 'fields[0].value' must be a whole number of options with LESS_THAN"
                                      " on field 'interests' (DROPDOWN_MULTIPLE).")

"""`mkt contacts search`: the same search as POST /v1/contacts/search."""

from __future__ import annotations

import json
from typing import Any

import pytest

from marketing_cli.services.contacts.search import search_contacts
from tests.factories import row_contact as add_contact
from tests.factories import row_field as add_field
from tests.factories import row_tag as add_tag


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables keep whole ids however the shared console was sized when first imported."""
    from marketing_cli.cli import output

    monkeypatch.setattr(output.console, "_width", 250)

@pytest.fixture
def people(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    city, age = add_field(conn, ws, "city"), add_field(conn, ws, "age", "NUMBER")
    hobbies = add_field(conn, ws, "hobbies", "DROPDOWN_MULTIPLE", definition="golf,chess")
    vip = add_field(conn, ws, "vip", "BOOLEAN")
    news = add_tag(conn, ws, "news")
    made = {
        "ann": add_contact(conn, ws, email="ann@example.com", tags=[news],
                           data={str(city): "New York", str(age): 30, str(hobbies): ["golf", "chess"],
                                 str(vip): True},
                           created_at="2026-01-01T00:00:00.000Z"),
        "bob": add_contact(conn, ws, email="bob@example.com", status="UNSUBSCRIBED",
                           data={str(city): "Boston", str(age): 9, str(hobbies): ["chess"]},
                           created_at="2026-01-02T00:00:00.000Z"),
        "cat": add_contact(conn, ws, email="cat@example.org", created_at="2026-01-03T00:00:00.000Z"),
    }
    return {"ws": ws, "news": news, "ids": made, "names": {v: k for k, v in made.items()}}


def found(result: dict[str, Any], people: dict[str, Any]) -> list[str]:
    return [people["names"][c["id"]] for c in result["contacts"]]


def test_json_output_is_the_api_data(cli_json, conn, people):
    body = {"fields": [{"merge_tag": "age", "operator": "GREATER_THAN", "value": "10"}], "limit": 10}
    result = cli_json("contacts", "search", "--where", "age GREATER_THAN 10", "--limit", "10")
    assert result == search_contacts(conn, people["ws"], body)
    assert found(result, people) == ["ann"]
    assert result["pagination"] == {"page": 1, "limit": 10, "total": 1}


@pytest.mark.parametrize("args, expected", [
    (["--where", "city EQUALS New York"], ["ann"]),                 # the rest of the text is the value
    (["--where", "city contains o"], ["ann", "bob"]),
    (["--where", "age LESS_THAN 10"], ["bob"]),
    (["--where", "hobbies CONTAINS chess", "--where", "hobbies NOT_CONTAINS golf"], ["bob"]),
    (["--where", 'hobbies EQUALS ["chess", "golf"]'], ["ann"]),     # a JSON array
    (["--where", "vip EXISTS false"], ["bob", "cat"]),
    (["--where", "vip EXISTS"], ["ann"]),
    (["--where", "vip EQUALS true"], ["ann"]),
    (["--where", "email_address CONTAINS @example.com"], ["ann", "bob"]),
    (["--field-filter", '{"merge_tag": "age", "operator": "EQUALS", "value": 9}'], ["bob"]),
    (["--status", "SUBSCRIBED"], ["ann", "cat"]),
    (["--sort-order", "desc"], ["cat", "bob", "ann"]),
    (["--sort-by", "updated_at", "--sort-order", "asc"], ["ann", "bob", "cat"]),
    (["--page", "2", "--limit", "10"], []),
    (["--body", '{"fields": [{"merge_tag": "city", "operator": "EXISTS"}]}', "--status", "SUBSCRIBED"], ["ann"]),
])
def test_options(cli_json, people, args, expected):
    assert found(cli_json("contacts", "search", *args), people) == expected


def test_tags(cli_json, people):
    assert found(cli_json("contacts", "search", "--tag", str(people["news"])), people) == ["ann"]


def test_body_and_options_combine(cli_json, people):
    body = json.dumps({"fields": [{"merge_tag": "age", "operator": "EXISTS"}], "tags": [people["news"]]})
    assert found(cli_json("contacts", "search", "--body", body, "--where", "city CONTAINS york"), people) == ["ann"]


def test_body_from_stdin(cli, people):
    result = cli("contacts", "search", "--body", "-", "--json",
                 input='{"fields": [{"merge_tag": "age", "operator": "LESS_THAN", "value": 10}]}')
    assert result.exit_code == 0
    assert found(json.loads(result.stdout), people) == ["bob"]


def test_human_table(cli, people):
    result = cli("contacts", "search", "--where", "email_address CONTAINS example.com")
    assert result.exit_code == 0
    assert "Contacts 1-2 of 2 (page 1)" in result.stdout
    assert "ann@example.com" in result.stdout and people["ids"]["bob"] in result.stdout and "news" in result.stdout
    empty = cli("contacts", "search", "--where", "age GREATER_THAN 1000")
    assert "No contacts on page 1 (0 match)" in empty.stdout


@pytest.mark.parametrize("args, message", [
    (["--where", "shoe EQUALS 9"], "We were unable to find a field with the merge_tag shoe (fields[0].merge_tag)."),
    (["--where", "age BIGGER 9"], "The member 'fields[0].operator' must be one of: EQUALS, NOT_EQUALS, CONTAINS,"
                                  " NOT_CONTAINS, EXISTS, GREATER_THAN, LESS_THAN."),
    (["--where", "age EQUALS many"], "The member 'fields[0].value' does not fit the field: Field 'age' must be a"
                                     " number."),
    (["--where", "city EQUALS"], "The member 'fields[0].value' is required with EQUALS."),
    (["--limit", "5"], "The member 'limit' must be between 10 and 250."),
    (["--status", "GONE"], "The status you provided is not valid."),
    (["--sort-by", "email"], "The member 'sort_by' must be created_at or updated_at."),
    (["--tag", "999"], "The member 'tags' holds tag IDs that do not exist in this workspace: 999."),
    (["--body", "[]"], "Invalid request body."),
])
def test_errors_exit_1_with_api_message(cli, people, args, message):
    result = cli("contacts", "search", *args)
    assert result.exit_code == 1
    assert result.stderr.strip() == message


@pytest.mark.parametrize("args, hint", [
    (["--where", "age"], "--where"),
    (["--where", "hobbies EQUALS [chess"], "--where"),
    (["--field-filter", "{nope"], "--field-filter"),
    (["--body", "{nope"], "--body"),
])
def test_malformed_options_are_usage_errors(cli, people, args, hint):
    result = cli("contacts", "search", *args)
    assert result.exit_code == 2
    assert hint in result.stderr

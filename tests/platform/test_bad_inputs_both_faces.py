"""One table of bad inputs, sent through both faces: the same message, nothing written.

The API answers 400 with the message in the error body; the CLI prints the same message
on stderr and exits 1. Each row is (API method, path, JSON body text, CLI arguments).
JSON text is written by hand so that it can hold what `json.dumps` would never produce
(a lone surrogate written as an escape).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from tests import factories

U = "\\ud800"  # a lone surrogate, as JSON writes it
NUL = "\\u0000"  # U+0000, as JSON writes it: PostgreSQL's text cannot hold it, so neither engine takes it

CASES = [
    pytest.param("POST", "/v1/contacts/upsert", '{"email_address": "ann@example.com", "fields": {"first_name": "%s"}}' % U,
                 ["contacts", "upsert", "--body"], "The member 'fields.first_name' is not valid Unicode text.",
                 id="upsert-surrogate-in-field"),
    pytest.param("POST", "/v1/contacts/upsert", '{"email_address": "%s"}' % U,
                 ["contacts", "upsert", "--body"], "The member 'email_address' is not valid Unicode text.",
                 id="upsert-surrogate-in-email"),
    pytest.param("POST", "/v1/contacts/upsert", '{"%s": 1, "email_address": "ann@example.com"}' % U,
                 ["contacts", "upsert", "--body"], "The member 'body' is not valid Unicode text.",
                 id="upsert-surrogate-in-key"),
    pytest.param("POST", "/v1/contacts/upsert", '{"email_address": ["ann@example.com"]}',
                 ["contacts", "upsert", "--body"], "The member 'email_address' must be a string.",
                 id="upsert-wrong-type"),
    pytest.param("POST", "/v1/contacts/search", '{"limit": "ten"}',
                 ["contacts", "search", "--body"], "The member 'limit' must be an integer.",
                 id="search-wrong-type"),
    pytest.param("POST", "/v1/contacts/search", '{"status": "%s"}' % U,
                 ["contacts", "search", "--body"], "The member 'status' is not valid Unicode text.",
                 id="search-surrogate"),
    pytest.param("POST", "/v1/contacts/upsert", '{"email_address": "ann@example.com", "fields": {"first_name": "A%sB"}}'
                 % NUL, ["contacts", "upsert", "--body"],
                 "The member 'fields.first_name' holds the NUL character (\\u0000), which text may not contain.",
                 id="upsert-nul-in-field"),
    pytest.param("POST", "/v1/contacts/search", '{"%s": 1}' % NUL, ["contacts", "search", "--body"],
                 "The member 'body' holds the NUL character (\\u0000), which text may not contain.",
                 id="search-nul-in-key"),
]


@pytest.mark.parametrize(("method", "path", "body", "args", "message"), CASES)
def test_same_outcome_through_both_faces(client: Any, auth: dict[str, str], cli: Any, conn: sqlite3.Connection,
                                         method: str, path: str, body: str, args: list[str], message: str) -> None:
    before = _row_counts(conn)
    response = client.request(method, path, content=body.encode(), headers={**auth, "Content-Type": "application/json"})
    assert (response.status_code, response.json()["error"]["message"]) == (400, message)
    result = cli(*args, body)
    assert (result.exit_code, result.stderr.strip(), result.stdout) == (1, message, "")
    assert _row_counts(conn) == before


@pytest.mark.parametrize(("body", "args", "message"), [
    ('{"name": "s", "filters": {"condition": "%s", "filters": []}}' % U,
     ["segments", "create", "--name", "s", "--filters", '{"condition": "%s", "filters": []}' % U],
     "The member 'filters.condition' is not valid Unicode text."),
])
def test_segment_filters_refused_alike(client: Any, auth: dict[str, str], cli: Any, conn: sqlite3.Connection,
                                       body: str, args: list[str], message: str) -> None:
    response = client.post("/v1/segments", content=body.encode(), headers={**auth, "Content-Type": "application/json"})
    assert (response.status_code, response.json()["error"]["message"]) == (400, message)
    result = cli(*args)
    assert (result.exit_code, result.stderr.strip()) == (1, message)
    assert conn.execute("SELECT COUNT(*) FROM segments").fetchone()[0] == 0


def test_event_properties_refused_alike(client: Any, auth: dict[str, str], cli: Any, conn: sqlite3.Connection,
                                        workspace: dict[str, Any]) -> None:
    factories.contact(conn, workspace["id"], "ann@example.com")
    message = "The member 'properties.plan' is not valid Unicode text."
    body = '{"email_address": "ann@example.com", "event_name": "paid", "properties": {"plan": "%s"}}' % U
    response = client.post("/v1/events", content=body.encode(), headers={**auth, "Content-Type": "application/json"})
    assert (response.status_code, response.json()["error"]["message"]) == (400, message)
    result = cli("events", "track", "--email", "ann@example.com", "--name", "paid", "--properties", '{"plan": "%s"}' % U)
    assert (result.exit_code, result.stderr.strip()) == (1, message)
    assert conn.execute("SELECT COUNT(*) FROM contact_events").fetchone()[0] == 0


def test_a_campaign_name_holding_nul_is_refused_on_both_engines(client: Any, auth: dict[str, str],
                                                                conn: sqlite3.Connection) -> None:
    """Found by the schemathesis run (tests/platform/test_api_fuzz.py): on PostgreSQL this
    name was a 500 (its text cannot hold U+0000), on SQLite it was stored."""
    body = '{"type": "AB_TESTING", "name": "Sale%s"}' % NUL
    response = client.post("/v1/campaigns", content=body.encode(), headers={**auth, "Content-Type": "application/json"})
    assert (response.status_code, response.json()["error"]["message"]) == (
        400, "The member 'name' holds the NUL character (\\u0000), which text may not contain.")
    assert conn.execute("SELECT COUNT(*) FROM campaigns").fetchone()[0] == 0


def test_argv_that_is_not_utf8_is_a_usage_error(cli: Any, conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    result = cli("tags", "create", "\udcff")  # how Python hands over the argv byte 0xff
    assert (result.exit_code, result.stderr.strip()) == (2, "The argument '\\udcff' is not valid UTF-8 text.")
    assert conn.execute("SELECT COUNT(*) FROM tags").fetchone()[0] == 0


def test_unparsable_json_option_is_a_usage_error(cli: Any, workspace: dict[str, Any]) -> None:
    result = cli("contacts", "upsert", "--body", "{nope")
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("--body is not valid JSON: Expecting property name")


def _row_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608 - fixed names
            for table in ("contacts", "contact_tags", "contact_events", "segments", "tags")}


@pytest.mark.parametrize(("path", "message"), [
    ("/v1/tags", "Please provide a name for the tag."),
    ("/v1/segments", "Please provide a name for this segment"),
    ("/v1/campaigns", "Please provide a name for this campaign."),
    ("/v1/sms-campaigns", "Please provide a name for this campaign."),
    ("/v1/templates", "Please provide a name for this template."),
])
def test_blank_and_wrongly_typed_names_are_refused_alike(client: Any, auth: dict[str, str], path: str,
                                                         message: str) -> None:
    for name, expected in (("   ", message), (5, "The member 'name' must be a string."),
                           ("\\ud800", "The member 'name' is not valid Unicode text.")):
        body = '{"name": %s}' % (name if isinstance(name, int) else '"%s"' % name)
        answer = client.post(path, content=body.encode(), headers={**auth, "Content-Type": "application/json"})
        assert (answer.status_code, answer.json()["error"]["message"]) == (400, expected), (path, name)

"""HTTP face of segments and audience counts: envelopes, statuses, every Create Segment
message through the API, auth, isolation, and never a 500."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.account import billing, workspaces
from tests.factories import ENGAGED, error_of


def post(client: Any, auth: dict[str, str], body: Any) -> Any:
    return client.post("/v1/segments", json=body, headers=auth)


def test_create_list_get(client: Any, auth: dict[str, str], segment_world: dict[str, Any], conn: sqlite3.Connection) -> None:
    created = post(client, auth, {"name": "Engaged", "filters": ENGAGED})
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"data"}
    seg = body["data"]
    assert seg["name"] == "Engaged" and seg["contact_count"] == 0 and seg["filters"] == ENGAGED
    assert isinstance(seg["id"], int) and seg["created_at"].endswith("Z")

    listed = client.get("/v1/segments", headers=auth)
    assert listed.status_code == 200 and listed.json() == {"data": [seg]}
    got = client.get(f"/v1/segments/{seg['id']}", headers=auth)
    assert got.status_code == 200 and got.json() == {"data": seg}

    jobs.run_due(conn)  # the queued member calculation
    assert client.get(f"/v1/segments/{seg['id']}", headers=auth).json()["data"]["contact_count"] == 1


def test_members_and_refresh_extensions(client: Any, auth: dict[str, str], segment_world: dict[str, Any],
                                        conn: sqlite3.Connection) -> None:
    seg = post(client, auth, {"name": "VIP", "filters": {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [segment_world["vip"]]}]}}).json()["data"]
    members = client.get(f"/v1/segments/{seg['id']}/members?limit=1&page=2", headers=auth)
    assert members.status_code == 200
    data = members.json()["data"]
    assert data["pagination"] == {"page": 2, "limit": 1, "total": 2}
    assert data["contacts"][0]["data"]["email_address"] == "c@x.io"
    assert error_of(client.get(f"/v1/segments/{seg['id']}/members?limit=0", headers=auth)) == (
        400, "The limit must be an integer between 1 and 250.")
    refreshed = client.post(f"/v1/segments/{seg['id']}/refresh", headers=auth)
    assert refreshed.status_code == 202
    assert refreshed.json()["data"]["segment_id"] == seg["id"]
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}


@pytest.mark.parametrize(("body", "message"), [
    ({"filters": ENGAGED}, "Please provide a name for this segment"),
    ({"name": " ", "filters": ENGAGED}, "Please provide a name for this segment"),
    ({"name": "x" * 65, "filters": ENGAGED}, "Segment name must be 64 characters or less"),
    ({"name": 7, "filters": ENGAGED}, "The member 'name' must be a string."),
    ({"name": "s"}, "Filter condition must be AND or OR"),
    ({"name": "s", "filters": {"condition": "NOR", "filters": ENGAGED["filters"]}},
     "Filter condition must be AND or OR"),
    ({"name": "s", "filters": {"condition": "OR", "filters": []}}, "At least one filter is required"),
    ({"name": "s", "filters": {"condition": "OR", "filters": [ENGAGED["filters"][0], {"type": "field",
                                                                                     "operator": "eq"}]}},
     "Filter #2: Please provide a valid field_id"),
    ({"name": "s", "filters": {"condition": "OR", "filters": [{"type": "field", "field_id": 99999,
                                                               "operator": "eq", "value": "x"}]}},
     "Filter #1: The specified field_id does not exist"),
    ({"name": "s", "filters": {"condition": "OR", "filters": [{"type": "tags", "operator": "eq",
                                                               "value": "vip"}]}},
     "Filter #1: Tags filter value must be an array of tag IDs."),
    ({"name": "s", "filters": {"condition": "OR", "filters": [{"type": "tags", "operator": "has",
                                                               "value": [1]}]}},
     "Filter #1: Invalid operator for tags filter. Must be one of: eq, ne, contains, not_contains"),
    ({"name": "s", "filters": {"condition": "OR", "filters": [{"type": "last_activity", "operator": "since",
                                                               "value": 3}]}},
     "Filter #1: Invalid operator for last activity filter. Must be one of: is_after, is_before, within_last_days"),
    ({"name": "s", "filters": {"condition": "OR", "filters": [{"type": "click_rate", "operator": "lt",
                                                               "value": 101}]}},
     "Filter #1: Value must be between 0 and 100"),
    ([], "Invalid request body."),
    ("name", "Invalid request body."),
])
def test_create_messages(client: Any, auth: dict[str, str], segment_world: dict[str, Any], body: Any, message: str) -> None:
    assert error_of(post(client, auth, body)) == (400, message)


def test_field_operator_message_through_the_api(client: Any, auth: dict[str, str], segment_world: dict[str, Any]) -> None:
    body = {"name": "s", "filters": {"condition": "AND", "filters": [
        {"type": "field", "field_id": segment_world["city"], "operator": "gt", "value": "x"}]}}
    assert error_of(post(client, auth, body)) == (400, (
        "Filter #1: Invalid operator for field filter. Must be one of: "
        "eq, ne, contains, not_contains, starts_with, ends_with, in, not_in"))


def test_unparseable_body(client: Any, auth: dict[str, str], segment_world: dict[str, Any]) -> None:
    response = client.post("/v1/segments", content=b"{nope", headers={**auth, "Content-Type": "application/json"})
    assert error_of(response) == (400, "Invalid request body.")
    assert error_of(client.post("/v1/segments", headers=auth)) == (400, "Invalid request body.")


def test_billing_limit(client: Any, auth: dict[str, str], segment_world: dict[str, Any], conn: sqlite3.Connection) -> None:
    billing.set_allowance(conn, segment_world["ws"], "segments", 1)
    assert post(client, auth, {"name": "one", "filters": ENGAGED}).status_code == 201
    assert error_of(post(client, auth, {"name": "two", "filters": ENGAGED})) == (400, "Billing limit error")
    assert len(client.get("/v1/segments", headers=auth).json()["data"]) == 1


def test_ids_auth_and_isolation(client: Any, auth: dict[str, str], segment_world: dict[str, Any],
                                conn: sqlite3.Connection) -> None:
    seg = post(client, auth, {"name": "one", "filters": ENGAGED}).json()["data"]
    other_key = workspaces.create_workspace(conn, "Other")["api_key"]
    other = {"Authorization": f"Bearer {other_key}"}
    assert error_of(client.get(f"/v1/segments/{seg['id']}", headers=other)) == (404, "We were unable to find the segment.")
    assert client.get("/v1/segments", headers=other).json() == {"data": []}
    assert error_of(client.get("/v1/segments/abc", headers=auth)) == (400, "Please provide a valid segment ID.")
    assert error_of(client.get("/v1/segments/99999", headers=auth)) == (404, "We were unable to find the segment.")
    assert error_of(client.get("/v1/segments")) == (401, "Please provide an API key.")
    assert error_of(client.post("/v1/segments", json={}, headers={"Authorization": "Bearer nope"})) == (
        401, "The API key you provided is invalid or has been revoked.")
    assert error_of(client.put(f"/v1/segments/{seg['id']}", headers=auth)) == (405, "Method not allowed.")


def test_audience_count(client: Any, auth: dict[str, str], segment_world: dict[str, Any]) -> None:
    seg = post(client, auth, {"name": "Engaged", "filters": ENGAGED}).json()["data"]
    body = {"channel": "email", "audience": {"type": "TAGS", "include_tag_ids": [segment_world["vip"]],
                                             "exclude_segment_ids": [seg["id"]]}}
    response = client.post("/v1/audience/count", json=body, headers=auth)
    assert response.status_code == 200
    assert response.json()["data"]["count"] == 1  # vip a and c, minus a (open rate 100%)
    sms = client.post("/v1/audience/count", json={"channel": "sms", "audience": {"type": "ENTIRE_AUDIENCE"}},
                      headers=auth)
    assert sms.json()["data"] == {"channel": "sms", "count": 1, "audience": [
        {"type": "ENTIRE_AUDIENCE", "include_tag_ids": None, "include_segment_ids": None,
         "exclude_tag_ids": None, "exclude_segment_ids": None}]}
    assert error_of(client.post("/v1/audience/count", json={"audience": {"type": "TAGS"}}, headers=auth)) == (
        400, "At least one tag is required when audience type is 'TAGS'.")
    assert error_of(client.post("/v1/audience/count", content=b"[", headers=auth)) == (400, "Invalid request body.")


def test_the_serve_worker_counts_new_segments(db_path: Any, auth: dict[str, str], segment_world: dict[str, Any]) -> None:
    import time

    from starlette.testclient import TestClient

    from marketing_cli.api.app import create_app

    with TestClient(create_app(db_path, worker=True, worker_interval=0.05), raise_server_exceptions=False) as served:
        seg = post(served, auth, {"name": "Engaged", "filters": ENGAGED}).json()["data"]
        assert seg["contact_count"] == 0
        deadline = time.monotonic() + 10
        while served.get(f"/v1/segments/{seg['id']}", headers=auth).json()["data"]["contact_count"] != 1:
            assert time.monotonic() < deadline, "the worker did not count the segment"
            time.sleep(0.05)


ODD_VALUES = [None, True, 0, -1, 1.5, 10**30, "", "x", "2026-01-01", "2026-01-01T00:00:00Z", [], [1], ["x"],
              [[1]], {}, {"a": 1}]


def test_odd_filters_never_500(client: Any, auth: dict[str, str], segment_world: dict[str, Any],
                               conn: sqlite3.Connection) -> None:
    billing.set_allowance(conn, segment_world["ws"], "segments", 1000)
    field_ids = [segment_world["city"], 1]
    types = ["field", "tags", "open_rate", "click_rate", "last_activity", "FIELD", None, 3]
    operators = ["eq", "ne", "contains", "in", "gt", "is_after", "within_last_days", "bogus", None, 1]
    statuses = set()
    for i, ftype in enumerate(types):
        for j, operator in enumerate(operators):
            value = ODD_VALUES[(i * len(operators) + j) % len(ODD_VALUES)]
            item = {"type": ftype, "operator": operator, "value": value, "field_id": field_ids[j % 2]}
            response = post(client, auth, {"name": f"s{i}-{j}", "filters": {"condition": "AND", "filters": [item]}})
            statuses.add(response.status_code)
            assert response.status_code in (201, 400), (item, response.text)
    for value in ODD_VALUES:
        response = post(client, auth, {"name": "s", "filters": value})
        assert response.status_code == 400, (value, response.text)
        response = post(client, auth, {"name": "s", "filters": {"condition": value, "filters": value}})
        assert response.status_code == 400, (value, response.text)
        response = client.post("/v1/audience/count", json={"audience": value, "channel": value}, headers=auth)
        assert response.status_code == 400, (value, response.text)
    assert statuses == {201, 400}

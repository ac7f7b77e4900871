"""POST /v1/contacts/search over HTTP, on contacts made through the API itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import error_of


@pytest.fixture
def people(client: Any, auth: dict[str, str]) -> dict[str, str]:
    """Fields and contacts created through /v1, so search meets values exactly as stored."""
    for body in (
        {"label": "Age", "merge_tag": "age", "type": "NUMBER"},
        {"label": "Joined", "merge_tag": "joined", "type": "DATE"},
        {"label": "Hobbies", "merge_tag": "hobbies", "type": "DROPDOWN_MULTIPLE", "definition": "golf,chess,tennis"},
        {"label": "VIP", "merge_tag": "vip", "type": "BOOLEAN"},
        {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT", "default_region": "GB"},
    ):
        response = client.post("/v1/fields", headers=auth, json=body)
        assert response.status_code == 201, response.text
    tag = client.post("/v1/tags", headers=auth, json={"name": "news"}).json()["data"]["id"]
    ids = {}
    for name, fields, status, tags in (
        ("ann", {"age": "30", "joined": "2024-03-01", "hobbies": "golf, chess", "vip": "yes",
                 "phone_number": "020 7946 0123", "first_name": "Ann"}, "SUBSCRIBED", [tag]),
        ("bob", {"age": 9.5, "joined": "2025-03-01T10:00:00Z", "hobbies": ["chess"], "vip": False},
         "UNSUBSCRIBED", [tag]),
        ("cat", {"first_name": "Cat"}, "SUBSCRIBED", []),
    ):
        response = client.post("/v1/contacts", headers=auth, json={
            "fields": {"email_address": f"{name}@example.com", **fields}, "status": status, "tags": tags})
        assert response.status_code == 201, response.text
        ids[response.json()["data"]["id"]] = name
    return ids


def search(client: Any, auth: dict[str, str], body: Any) -> Any:
    return client.post("/v1/contacts/search", headers=auth, json=body)


def names(response: Any, people: dict[str, str]) -> list[str]:
    assert response.status_code == 200, response.text
    return [people[c["id"]] for c in response.json()["data"]["contacts"]]


def test_envelope_b_with_search_shaped_contacts(client, auth, people):
    response = search(client, auth, {"fields": [{"merge_tag": "age", "operator": "EQUALS", "value": 30}]})
    body = response.json()
    assert set(body) == {"data"}
    assert body["data"]["pagination"] == {"page": 1, "limit": 50, "total": 1}
    (ann,) = body["data"]["contacts"]
    assert set(ann) == {"id", "status", "tags", "data", "statistics", "last_opened_at", "last_clicked_at",
                        "created_at", "updated_at"}  # no sms_status, no score in search items
    assert ann["data"]["email_address"] == "ann@example.com"
    assert ann["data"]["phone_number"] == "+442079460123"
    assert ann["data"]["hobbies"] == ["golf", "chess"]
    assert [t["name"] for t in ann["tags"]] == ["news"]


@pytest.mark.parametrize("item, expected", [
    ({"merge_tag": "age", "operator": "GREATER_THAN", "value": 10}, ["ann"]),
    ({"merge_tag": "age", "operator": "LESS_THAN", "value": "10"}, ["bob"]),
    ({"merge_tag": "age", "operator": "NOT_EQUALS", "value": 30}, ["bob", "cat"]),
    ({"merge_tag": "joined", "operator": "EQUALS", "value": "2025-03-01"}, ["bob"]),
    ({"merge_tag": "joined", "operator": "GREATER_THAN", "value": "2024-12-31T23:59:59Z"}, ["bob"]),
    ({"merge_tag": "hobbies", "operator": "CONTAINS", "value": "chess"}, ["ann", "bob"]),
    ({"merge_tag": "hobbies", "operator": "NOT_CONTAINS", "value": "golf"}, ["bob", "cat"]),
    ({"merge_tag": "hobbies", "operator": "EQUALS", "value": ["chess", "golf"]}, ["ann"]),
    ({"merge_tag": "vip", "operator": "EQUALS", "value": True}, ["ann"]),
    ({"merge_tag": "vip", "operator": "EXISTS", "value": False}, ["cat"]),
    ({"merge_tag": "first_name", "operator": "CONTAINS", "value": "an"}, ["ann"]),
    ({"merge_tag": "email_address", "operator": "EQUALS", "value": "BOB@example.com"}, ["bob"]),
    ({"merge_tag": "phone_number", "operator": "EQUALS", "value": "+44 20 7946 0123"}, ["ann"]),
    ({"merge_tag": "phone_number", "operator": "EXISTS"}, ["ann"]),
])
def test_filters_on_api_made_contacts(client, auth, people, item, expected):
    assert names(search(client, auth, {"fields": [item]}), people) == expected


def test_tags_status_and_sorting(client, auth, people):
    tag = client.get("/v1/tags", headers=auth).json()["data"][0]["id"]
    assert names(search(client, auth, {"tags": [tag]}), people) == ["ann", "bob"]
    assert names(search(client, auth, {"tags": [tag], "status": "SUBSCRIBED"}), people) == ["ann"]
    assert names(search(client, auth, {"sort_order": "desc"}), people) == ["cat", "bob", "ann"]


def test_empty_body_searches_everything(client, auth, people):
    response = client.post("/v1/contacts/search", headers=auth)
    assert names(response, people) == ["ann", "bob", "cat"]
    assert response.json()["data"]["pagination"] == {"page": 1, "limit": 50, "total": 3}


def test_pagination(client, auth, people):
    response = search(client, auth, {"limit": 10, "page": 2})
    assert response.json()["data"] == {"contacts": [], "pagination": {"page": 2, "limit": 10, "total": 3}}


@pytest.mark.parametrize("body, message", [
    ({"limit": 5}, "The member 'limit' must be between 10 and 250."),
    ({"limit": 500}, "The member 'limit' must be between 10 and 250."),
    ({"page": 0}, "The member 'page' must be 1 or more."),
    ({"page": 2**70}, "The member 'page' must be at most 1000000000."),
    ({"sort_by": "name"}, "The member 'sort_by' must be created_at or updated_at."),
    ({"status": "NOPE"}, "The status you provided is not valid."),
    ({"fields": [{"merge_tag": "shoe_size", "operator": "EQUALS", "value": 9}]},
     "We were unable to find a field with the merge_tag shoe_size (fields[0].merge_tag)."),
    ({"fields": [{"merge_tag": "age", "operator": "BETWEEN", "value": 9}]},
     "The member 'fields[0].operator' must be one of: EQUALS, NOT_EQUALS, CONTAINS, NOT_CONTAINS, EXISTS,"
     " GREATER_THAN, LESS_THAN."),
    ({"fields": [{"merge_tag": "age", "operator": "EQUALS", "value": "old"}]},
     "The member 'fields[0].value' does not fit the field: Field 'age' must be a number."),
    ({"fields": "age"}, "The member 'fields' must be an array."),
    ({"tags": [12345]}, "The member 'tags' holds tag IDs that do not exist in this workspace: 12345."),
    ([1], "Invalid request body."),
    ("text", "Invalid request body."),
])
def test_errors(client, auth, people, body, message):
    assert error_of(search(client, auth, body)) == (400, message)


def test_unparseable_body(client, auth, people):
    response = client.post("/v1/contacts/search", headers={**auth, "Content-Type": "application/json"},
                           content=b'{"fields": [')
    assert error_of(response) == (400, "Invalid request body.")


def test_search_is_not_taken_for_a_contact_id(client, auth, people):
    assert client.get("/v1/contacts/search", headers=auth).status_code in (400, 404, 405)
    assert error_of(client.post("/v1/contacts/search", json={})) == (401, "Please provide an API key.")


def test_other_workspace_sees_nothing(client, auth, people, conn):
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")
    response = search(client, {"Authorization": f"Bearer {other['api_key']}"}, {})
    assert response.json()["data"] == {"contacts": [], "pagination": {"page": 1, "limit": 50, "total": 0}}

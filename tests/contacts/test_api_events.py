"""POST /v1/events and GET /v1/events (extension) over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.services.account import billing
from tests.factories import error_of
from tests.factories import row_contact as add_contact
from tests.factories import row_field as add_field


@pytest.fixture
def ada(conn: Any, workspace: dict[str, Any]) -> str:
    add_field(conn, workspace["id"], "phone_number", default_region="US")
    return add_contact(conn, workspace["id"], email="ada@example.com", phone="+14155552671")


def test_track_event_answers_queued_in_envelope_b(client, auth, ada):
    response = client.post("/v1/events", headers=auth,
                           json={"email_address": "ada@example.com", "event_name": "signed_up",
                                 "properties": {"plan": "pro", "tags": ["a", "b"]}})
    assert response.status_code == 200
    assert response.json() == {"data": {"queued": True}}
    log = client.get("/v1/events", headers=auth).json()
    assert set(log) == {"data"}
    assert [(e["type"], e["contact_id"], e["payload"]) for e in log["data"]] == [
        ("CUSTOM_EVENT", ada, {"event_name": "signed_up", "properties": {"plan": "pro", "tags": ["a", "b"]}})]


def test_track_event_by_phone_national_format(client, auth, ada):
    response = client.post("/v1/events", headers=auth,
                           json={"phone_number": "(415) 555-2671", "event_name": "called"})
    assert response.json() == {"data": {"queued": True}}


@pytest.mark.parametrize("body, message", [
    ({"event_name": "x"}, "Email address or phone number is required. Please provide the contact's email address"
                          " or phone number."),
    ({"event_name": "x", "email_address": "ada@example.com", "phone_number": "+14155552671"},
     "Please provide an email address or phone number, not both."),
    ({"email_address": "ada@example.com"}, "Event name is required."),
    ({"email_address": "ada@example.com", "event_name": ""}, "Event name is required."),
    ({"phone_number": "+1 202 555 0143", "event_name": "x"},
     "We couldn't find a contact with the phone number '+1 202 555 0143'."),
    ({"phone_number": "abc", "event_name": "x"}, "Phone number is invalid. Please provide a valid phone number."),
    ({"email_address": "eve@example.com", "event_name": "x"},
     "We couldn't find a contact with the email address 'eve@example.com'."),
    ({"email_address": "ada@example.com", "event_name": "x", "properties": [1]},
     "Event properties must be a JSON object (not an array, a string, a number or a boolean)."),
    ({"email_address": "ada@example.com", "event_name": "x", "properties": {"$a": 1}},
     "Event property key '$a' is not allowed: a key cannot start with $."),
    ({"email_address": ["ada@example.com"], "event_name": "x"}, "The member 'email_address' must be a string."),
    ([], "Invalid request body."),
])
def test_track_event_errors(client, auth, ada, body, message):
    response = client.post("/v1/events", headers=auth, json=body)
    assert error_of(response) == (400, message)
    assert client.get("/v1/events", headers=auth).json() == {"data": []}


def test_unparseable_body(client, auth, ada):
    response = client.post("/v1/events", headers={**auth, "Content-Type": "application/json"}, content=b"{nope")
    assert error_of(response) == (400, "Invalid request body.")
    assert error_of(client.post("/v1/events", headers=auth)) == (400, "Invalid request body.")


def test_no_phone_field(client, auth, conn, workspace):
    response = client.post("/v1/events", headers=auth, json={"phone_number": "+14155552671", "event_name": "x"})
    assert error_of(response) == (
        400, "We couldn't find a PhoneNumber field in your workspace. Please check your workspace configuration"
             " and try again.")


def test_event_allowance_answers_429(client, auth, conn, workspace, ada):
    billing.set_allowance(conn, workspace["id"], "events", 1)
    body = {"email_address": "ada@example.com", "event_name": "x"}
    assert client.post("/v1/events", headers=auth, json=body).status_code == 200
    response = client.post("/v1/events", headers=auth, json=body)
    assert error_of(response) == (
        429, "Billing limit error: your plan's event allowance for this month is used up. Upgrade the plan or"
             " raise the events allowance to track more events.")
    usage = {r["name"]: r["used"] for r in client.get("/v1/workspace", headers=auth).json()["data"]["billing"]
             ["resources"]}
    assert usage["events"] == 1


def test_authentication_required(client, ada):
    assert error_of(client.post("/v1/events", json={})) == (401, "Please provide an API key.")
    assert error_of(client.get("/v1/events")) == (401, "Please provide an API key.")


def test_event_log_query_parameters(client, auth, ada):
    for name in ("a", "b", "c"):
        client.post("/v1/events", headers=auth, json={"email_address": "ada@example.com", "event_name": name})
    names = lambda r: [e["payload"]["event_name"] for e in r.json()["data"]]  # noqa: E731
    everything = client.get("/v1/events", headers=auth).json()["data"]
    assert names(client.get("/v1/events?limit=2", headers=auth)) == ["b", "c"]
    assert names(client.get(f"/v1/events?after_id={everything[0]['id']}", headers=auth)) == ["b", "c"]
    assert names(client.get("/v1/events?type=CUSTOM_EVENT&contact_id=" + ada, headers=auth)) == ["a", "b", "c"]
    assert names(client.get("/v1/events?type=TAG_ADDED", headers=auth)) == []


@pytest.mark.parametrize("query, message", [
    ("limit=abc", "The query parameter 'limit' must be an integer."),
    ("after_id=1.5", "The query parameter 'after_id' must be an integer."),
    ("limit=0", "The limit must be between 1 and 1000."),
    ("after_id=99999999999999999999999", "after_id must be an event id (an integer, 0 or more)."),
    ("type=BOUGHT", "The event type 'BOUGHT' is not valid. Valid types are: CONTACT_SUBSCRIBED_PENDING,"
                    " CONTACT_SUBSCRIBED, TAG_ADDED, TAG_REMOVED, FIELD_UPDATED, CUSTOM_EVENT."),
    ("contact_id=123", "The contact ID you provided is not valid."),
])
def test_event_log_bad_query(client, auth, query, message):
    assert error_of(client.get(f"/v1/events?{query}", headers=auth)) == (400, message)


def test_log_shows_the_events_contacts_fire(client, auth):
    created = client.post("/v1/contacts", headers=auth, json={
        "fields": {"email_address": "new@example.com"}, "status": "UNCONFIRMED"}).json()["data"]
    tag = client.post("/v1/tags", headers=auth, json={"name": "vip"}).json()["data"]["id"]
    client.post(f"/v1/contacts/{created['id']}/tags/add", headers=auth, json={"tag_ids": [tag]})
    client.post("/v1/events", headers=auth, json={"email_address": "new@example.com", "event_name": "paid"})
    log = client.get(f"/v1/events?contact_id={created['id']}", headers=auth).json()["data"]
    assert [e["type"] for e in log] == ["CONTACT_SUBSCRIBED_PENDING", "TAG_ADDED", "CUSTOM_EVENT"]
    assert [e["id"] for e in log] == sorted(e["id"] for e in log)

"""Custom events (track_event) and the automation event log (list_events), service layer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import events
from tests.factories import row_contact as add_contact
from tests.factories import row_field as add_field
from tests.factories import row_tag as add_tag  # noqa: F401

# --- fixtures shared by the search and events tests: rows written as HELPERS' storage design


def custom_events(conn: Any, workspace_id: int) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(
        "SELECT contact_id, type, payload FROM contact_events WHERE workspace_id = ? ORDER BY id", (workspace_id,))]


@pytest.fixture
def ws(conn: Any, workspace: dict[str, Any]) -> int:
    return workspace["id"]


@pytest.fixture
def ada(conn: Any, ws: int) -> str:
    add_field(conn, ws, "phone_number", default_region="GB")
    return add_contact(conn, ws, email="ada@example.com", phone="+442079460000")


def track(conn: Any, ws: int, **body: Any) -> dict[str, Any]:
    return events.track_event(conn, ws, body)


def error(conn: Any, ws: int, body: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as info:
        events.track_event(conn, ws, body)
    return info.value.status, info.value.message


# --- track_event


def test_track_by_email_appends_custom_event_and_counts_usage(conn, ws, ada):
    assert track(conn, ws, email_address="ADA@Example.com", event_name="signed_up",
                 properties={"plan": "pro", "seats": 3}) == {"queued": True}
    rows = custom_events(conn, ws)
    assert rows == [{"contact_id": ada, "type": "CUSTOM_EVENT",
                     "payload": json.dumps({"event_name": "signed_up", "properties": {"plan": "pro", "seats": 3}},
                                           separators=(",", ":"))}]
    assert billing.usage(conn, ws, "events") == 1


def test_track_by_phone_in_any_format_and_default_properties(conn, ws, ada):
    track(conn, ws, phone_number="020 7946 0000", event_name="called")
    track(conn, ws, phone_number="+44 20 7946 0000", event_name="called")
    rows = custom_events(conn, ws)
    assert [r["contact_id"] for r in rows] == [ada, ada]
    assert json.loads(rows[0]["payload"]) == {"event_name": "called", "properties": {}}


def test_identifier_messages(conn, ws, ada):
    required = ("Email address or phone number is required. Please provide the contact's email address or"
                " phone number.")
    assert error(conn, ws, {"event_name": "x"}) == (400, required)
    assert error(conn, ws, {"event_name": "x", "email_address": "  ", "phone_number": ""}) == (400, required)
    assert error(conn, ws, {"event_name": "x", "email_address": "ada@example.com",
                            "phone_number": "+442079460000"}) == (
        400, "Please provide an email address or phone number, not both.")
    assert error(conn, ws, {"email_address": 5, "event_name": "x"}) == (
        400, "The member 'email_address' must be a string.")


@pytest.mark.parametrize("name", [None, "", "   "])
def test_event_name_required(conn, ws, ada, name):
    body = {"email_address": "ada@example.com"}
    if name is not None:
        body["event_name"] = name
    assert error(conn, ws, body) == (400, "Event name is required.")


def test_event_name_must_be_string(conn, ws, ada):
    assert error(conn, ws, {"email_address": "ada@example.com", "event_name": 7}) == (
        400, "The member 'event_name' must be a string.")


def test_unknown_contacts(conn, ws, ada):
    assert error(conn, ws, {"email_address": "nobody@example.com", "event_name": "x"}) == (
        400, "We couldn't find a contact with the email address 'nobody@example.com'.")
    assert error(conn, ws, {"email_address": "not an address", "event_name": "x"}) == (
        400, "We couldn't find a contact with the email address 'not an address'.")
    assert error(conn, ws, {"phone_number": "+1 415 555 2671", "event_name": "x"}) == (
        400, "We couldn't find a contact with the phone number '+1 415 555 2671'.")
    assert error(conn, ws, {"phone_number": "12", "event_name": "x"}) == (
        400, "Phone number is invalid. Please provide a valid phone number.")
    assert custom_events(conn, ws) == []


def test_phone_without_phone_field(conn, ws):
    add_contact(conn, ws, email="ada@example.com", phone="+442079460000")
    assert error(conn, ws, {"phone_number": "+442079460000", "event_name": "x"}) == (
        400, "We couldn't find a PhoneNumber field in your workspace. Please check your workspace configuration"
             " and try again.")


def test_phone_without_country_code_and_no_default_region(conn, ws):
    add_field(conn, ws, "phone_number")
    assert error(conn, ws, {"phone_number": "020 7946 0000", "event_name": "x"}) == (
        400, "Phone number is invalid. Please provide a valid phone number.")


def test_contact_of_another_workspace_is_not_found(conn, ws, ada):
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    assert error(conn, other, {"email_address": "ada@example.com", "event_name": "x"})[0] == 400
    assert custom_events(conn, other) == [] and custom_events(conn, ws) == []


def test_body_must_be_object(conn, ws):
    assert error(conn, ws, [1, 2]) == (400, "Invalid request body.")


# --- properties (spec part 8)


def nested(depth: int) -> dict[str, Any]:
    """An object `depth` levels deep, the top level counting as 1."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


@pytest.mark.parametrize("properties", [[1, 2], "text", 3, True])
def test_properties_must_be_object(conn, ws, ada, properties):
    assert error(conn, ws, {"email_address": "ada@example.com", "event_name": "x", "properties": properties}) == (
        400, "Event properties must be a JSON object (not an array, a string, a number or a boolean).")


def test_properties_size_limit(conn, ws, ada):
    base = {"email_address": "ada@example.com", "event_name": "x"}
    # {"a":"..."} is 8 bytes of framing: exactly 16384 bytes passes, 16385 fails.
    assert track(conn, ws, **base, properties={"a": "x" * (16384 - 8)}) == {"queued": True}
    assert error(conn, ws, {**base, "properties": {"a": "x" * (16384 - 7)}}) == (
        400, "Event properties can be at most 16 KB (16384 bytes) when serialized as JSON; these are 16385 bytes.")
    # Multi-byte characters count as their UTF-8 bytes.
    assert error(conn, ws, {**base, "properties": {"a": "é" * 8200}})[1].endswith("these are 16408 bytes.")


def test_properties_depth_limit(conn, ws, ada):
    base = {"email_address": "ada@example.com", "event_name": "x"}
    assert track(conn, ws, **base, properties=nested(5)) == {"queued": True}
    assert error(conn, ws, {**base, "properties": nested(6)}) == (
        400, "Event properties can be nested at most 5 levels deep (the top-level object is level 1);"
             " 'k.k.k.k.k' is at level 6.")
    # Arrays are levels too.
    assert error(conn, ws, {**base, "properties": {"a": [[[[{"b": 1}]]]]}}) == (
        400, "Event properties can be nested at most 5 levels deep (the top-level object is level 1);"
             " 'a[0][0][0][0]' is at level 6.")
    assert track(conn, ws, **base, properties={"a": [[[{"b": 1}]]]}) == {"queued": True}


def test_properties_key_count_limit(conn, ws, ada):
    base = {"email_address": "ada@example.com", "event_name": "x"}
    fifty = {f"k{i}": i for i in range(50)}
    assert track(conn, ws, **base, properties=fifty) == {"queued": True}
    assert error(conn, ws, {**base, "properties": {**fifty, "k50": 0}}) == (
        400, "Event properties can hold at most 50 keys per object; the top-level object has 51.")
    assert error(conn, ws, {**base, "properties": {"inner": {f"k{i}": i for i in range(51)}}}) == (
        400, "Event properties can hold at most 50 keys per object; the object 'inner' has 51.")


def test_properties_key_rules(conn, ws, ada):
    base = {"email_address": "ada@example.com", "event_name": "x"}
    assert track(conn, ws, **base, properties={"k" * 128: 1, "a$b": 2}) == {"queued": True}
    assert error(conn, ws, {**base, "properties": {"k" * 129: 1}}) == (
        400, f"Event property keys can be at most 128 characters long; '{'k' * 32}...' has 129.")
    assert error(conn, ws, {**base, "properties": {"$set": 1}}) == (
        400, "Event property key '$set' is not allowed: a key cannot start with $.")
    assert error(conn, ws, {**base, "properties": {"a": {"$b": 1}}}) == (
        400, "Event property key 'a.$b' is not allowed: a key cannot start with $.")
    assert error(conn, ws, {**base, "properties": {"a.b": 1}}) == (
        400, "Event property key 'a.b' is not allowed: a key cannot contain '.'.")
    assert error(conn, ws, {**base, "properties": {"list": [{"x.y": 1}]}}) == (
        400, "Event property key 'x.y' is not allowed: a key cannot contain '.'.")


def test_property_numbers_must_fit_json_readers(conn, ws, ada):
    base = {"email_address": "ada@example.com", "event_name": "x"}
    assert track(conn, ws, **base, properties={"a": 2**63 - 1, "b": -(2**63), "c": 1.5}) == {"queued": True}
    assert error(conn, ws, {**base, "properties": {"a": [1, 2**64]}}) == (
        400, "Event property 'a[1]' is an integer beyond 64 bits; send it as a string.")
    assert error(conn, ws, {**base, "properties": {"a": {"b": float("inf")}}}) == (
        400, "Event property 'a.b' must be a finite number.")


# --- billing


def test_event_allowance_gives_429_and_writes_nothing(conn, ws, ada):
    billing.set_allowance(conn, ws, "events", 2)
    body = {"email_address": "ada@example.com", "event_name": "x"}
    track(conn, ws, **body)
    track(conn, ws, **body)
    assert error(conn, ws, body) == (
        429, "Billing limit error: your plan's event allowance for this month is used up. Upgrade the plan or"
             " raise the events allowance to track more events.")
    assert len(custom_events(conn, ws)) == 2
    assert billing.usage(conn, ws, "events") == 2
    billing.set_allowance(conn, ws, "events", 3)
    assert track(conn, ws, **body) == {"queued": True}


def test_failed_event_is_not_counted(conn, ws, ada):
    with pytest.raises(MktError):
        track(conn, ws, email_address="ada@example.com", event_name="x", properties={"$x": 1})
    assert billing.usage(conn, ws, "events") == 0


# --- list_events


def test_list_events_newest_last_with_filters_and_after_id(conn, ws, ada):
    other = add_contact(conn, ws, email="bob@example.com")
    ids = [events.append_event(conn, ws, ada, "TAG_ADDED", {"tag_id": 1}),
           events.append_event(conn, ws, other, "FIELD_UPDATED", {"fields": ["city"]})]
    track(conn, ws, email_address="ada@example.com", event_name="bought")
    log = events.list_events(conn, ws)
    assert [e["type"] for e in log] == ["TAG_ADDED", "FIELD_UPDATED", "CUSTOM_EVENT"]
    assert log[0] == {"id": ids[0], "type": "TAG_ADDED", "contact_id": ada, "payload": {"tag_id": 1},
                      "created_at": log[0]["created_at"]}
    assert log[2]["payload"] == {"event_name": "bought", "properties": {}}
    assert [e["type"] for e in events.list_events(conn, ws, limit=2)] == ["FIELD_UPDATED", "CUSTOM_EVENT"]
    assert [e["id"] for e in events.list_events(conn, ws, after_id=ids[0])] == [ids[1], log[2]["id"]]
    assert [e["id"] for e in events.list_events(conn, ws, after_id=ids[0], limit=1)] == [ids[1]]
    assert [e["type"] for e in events.list_events(conn, ws, type="CUSTOM_EVENT")] == ["CUSTOM_EVENT"]
    assert [e["contact_id"] for e in events.list_events(conn, ws, contact_id=other)] == [other]
    assert events.latest_event_id(conn, ws) == log[2]["id"]


def test_list_events_keeps_workspaces_apart(conn, ws, ada):
    from marketing_cli.services.account import workspaces

    events.append_event(conn, ws, ada, "TAG_ADDED", {})
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    assert events.list_events(conn, other) == []
    assert events.latest_event_id(conn, other) == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"limit": 0}, "The limit must be between 1 and 1000."),
    ({"limit": 1001}, "The limit must be between 1 and 1000."),
    ({"after_id": -1}, "after_id must be an event id (an integer, 0 or more)."),
    ({"after_id": 2**63}, "after_id must be an event id (an integer, 0 or more)."),
    ({"type": "NOPE"}, "The event type 'NOPE' is not valid. Valid types are: CONTACT_SUBSCRIBED_PENDING,"
                       " CONTACT_SUBSCRIBED, TAG_ADDED, TAG_REMOVED, FIELD_UPDATED, CUSTOM_EVENT."),
    ({"contact_id": "xyz"}, "The contact ID you provided is not valid."),
])
def test_list_events_checks_arguments(conn, ws, kwargs, message):
    with pytest.raises(MktError) as info:
        events.list_events(conn, ws, **kwargs)
    assert (info.value.status, info.value.message) == (400, message)

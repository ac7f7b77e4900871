"""Contacts service: create, upsert (every lookup rule), reads, tags, events, shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import billing, workspaces
from marketing_cli.services.contacts import fields, records, tags, view

SMS_INVALID = ("The SMS status you provided is not valid. Valid SMS statuses are: SUBSCRIBED, UNSUBSCRIBED, "
               "CLEANED, or BLOCKED.")


@pytest.fixture
def ws(conn: Any, workspace: dict[str, Any]) -> int:
    return workspace["id"]


@pytest.fixture
def phone_ws(conn: Any, ws: int) -> int:
    fields.create_field(conn, ws, {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT",
                                   "default_region": "US"})
    return ws


def allow_no_email(conn: Any, ws: int) -> None:
    workspaces.update_operator_settings(conn, ws, allow_contacts_without_email=True)


def fail(call: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as info:
        call()
    return info.value.status, info.value.message


def events(conn: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(r[0], json.loads(r[1])) for r in conn.execute("SELECT type, payload FROM contact_events ORDER BY id")]


def count(conn: Any) -> int:
    return conn.execute("SELECT count(*) FROM contacts").fetchone()[0]


def new(conn: Any, ws: int, email: str = "ann@example.com", status: str = "SUBSCRIBED", **extra: Any) -> dict:
    return records.create_contact(conn, ws, {"fields": {"email_address": email, **extra.pop("fields", {})},
                                              "status": status, **extra})


# --- create --------------------------------------------------------------------------

def test_create_full_shape(conn, ws) -> None:
    vip = tags.create_tag(conn, ws, {"name": "VIP"})
    c = new(conn, ws, "Ann@Example.com", fields={"first_name": "Ann"}, tags=[vip["id"]])
    assert list(c) == ["id", "status", "sms_status", "score", "tags", "data", "statistics", "created_at",
                       "updated_at"]
    assert len(c["id"]) == 24 and c["status"] == "SUBSCRIBED" and c["sms_status"] == "SUBSCRIBED"
    assert c["score"] == 0 and c["tags"] == [vip]
    assert c["data"] == {"email_address": "ann@example.com", "first_name": "Ann", "last_name": None}
    assert c["statistics"] == {"total_opens": 0, "total_clicks": 0, "total_bounces": 0, "total_delivered": 0}
    assert c["created_at"].endswith("Z")
    stored = conn.execute("SELECT sms_status, data FROM contacts").fetchone()
    assert stored["sms_status"] is None  # left unset, reported as SUBSCRIBED
    assert events(conn) == []  # no event for SUBSCRIBED


@pytest.mark.parametrize("body,message", [
    ({"status": "SUBSCRIBED"}, "Please provide at least one field for the contact."),
    ({"fields": {}, "status": "SUBSCRIBED"}, "Please provide at least one field for the contact."),
    ({"fields": {"email_address": "a@b.com"}}, "Contact status is required."),
    ({"fields": {"email_address": "a@b.com"}, "status": "ACTIVE"}, "The status you provided is not valid."),
    ({"fields": {"email_address": "a@b.com"}, "status": "SUBSCRIBED", "sms_status": "OK"}, SMS_INVALID),
    ({"fields": {"first_name": "Ann"}, "status": "SUBSCRIBED"}, "An email address is required."),
    ({"fields": {"email_address": " "}, "status": "SUBSCRIBED"}, "An email address is required."),
    ({"fields": {"email_address": "a@b.com", "shoe": 4}, "status": "SUBSCRIBED"},
     "We were unable to find a field with the merge_tag shoe"),
    ({"fields": {"email_address": "a@b.com"}, "status": "SUBSCRIBED", "tags": [77]},
     "Tag ID 77 does not exist in this workspace"),
    ({"fields": {"email_address": "a@b.com"}, "status": "SUBSCRIBED", "tags": "1"},
     "The member 'tags' must be an array."),
    ({"fields": ["a"], "status": "SUBSCRIBED"}, "The member 'fields' must be an object."),
])
def test_create_messages(conn, ws, body, message) -> None:
    assert fail(lambda: records.create_contact(conn, ws, body)) == (400, message)
    assert count(conn) == 0


def test_create_required_field_and_defaults(conn, ws) -> None:
    fields.create_field(conn, ws, {"label": "Company", "merge_tag": "company", "type": "TEXT", "required": True})
    fields.create_field(conn, ws, {"label": "Plan", "merge_tag": "plan", "type": "DROPDOWN_SINGLE",
                                   "definition": "free,pro", "default_value": "free", "required": True})
    assert fail(lambda: new(conn, ws)) == (400, "Field 'Company' is required.")
    assert fail(lambda: new(conn, ws, fields={"company": ""})) == (400, "Field 'Company' is required.")
    c = new(conn, ws, fields={"company": "Acme"})
    assert c["data"]["plan"] == "free"  # the default fills a required field


def test_create_value_checks(conn, ws) -> None:
    fields.create_field(conn, ws, {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    assert fail(lambda: new(conn, ws, fields={"age": "old"})) == (400, "Field 'age' must be a number.")
    status, message = fail(lambda: new(conn, ws, "not-an-email"))
    assert status == 400 and "not a valid email address" in message
    assert new(conn, ws, fields={"age": "41"})["data"]["age"] == 41


def test_create_duplicates(conn, phone_ws) -> None:
    new(conn, phone_ws, fields={"phone_number": "+1 415 555 2671"})
    assert fail(lambda: new(conn, phone_ws, "ANN@example.com")) == (
        409, "A contact with the email address ann@example.com already exists in this workspace.")
    assert fail(lambda: new(conn, phone_ws, "bob@example.com", fields={"phone_number": "(415) 555-2671"})) == (
        409, "A contact with the phone number +14155552671 already exists in this workspace.")


def test_create_unconfirmed_fires_pending(conn, ws) -> None:
    c = new(conn, ws, status="UNCONFIRMED")
    assert events(conn) == [("CONTACT_SUBSCRIBED_PENDING",
                             {"email_address": "ann@example.com", "phone_number": None, "status": "UNCONFIRMED"})]
    assert conn.execute("SELECT contact_id FROM contact_events").fetchone()[0] == c["id"]


def test_create_without_email_when_allowed(conn, phone_ws) -> None:
    body = {"fields": {"phone_number": "4155552671"}, "status": "SUBSCRIBED"}
    assert fail(lambda: records.create_contact(conn, phone_ws, body)) == (400, "An email address is required.")
    allow_no_email(conn, phone_ws)
    c = records.create_contact(conn, phone_ws, body)
    assert c["data"]["email_address"] is None and c["data"]["phone_number"] == "+14155552671"


def test_billing_limit(conn, ws) -> None:
    billing.set_allowance(conn, ws, "contacts", 1)
    new(conn, ws)
    assert fail(lambda: new(conn, ws, "bob@example.com")) == (400, "Billing limit error")
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "bob@example.com"})) == (
        400, "Billing limit error")
    # the update path needs no allowance
    assert records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "status": "CLEANED"})["status"] \
        == "CLEANED"
    assert count(conn) == 1


# --- upsert: lookups -----------------------------------------------------------------

def test_upsert_creates_then_updates_same_contact(conn, ws) -> None:
    first = records.upsert_contact(conn, ws, {"email_address": "Ann@Example.com"})
    assert first["status"] == "SUBSCRIBED" and first["sms_status"] == "SUBSCRIBED"
    second = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "fields": {"first_name": "A"}})
    assert second["id"] == first["id"] and second["data"]["first_name"] == "A"
    assert count(conn) == 1


def test_upsert_identity_messages(conn, phone_ws) -> None:
    ws = phone_ws
    assert fail(lambda: records.upsert_contact(conn, ws, {})) == (
        400, "Email address is required for upsert operation.")
    assert fail(lambda: records.upsert_contact(conn, ws, {"phone_number": "+14155552671"})) == (
        400, "Email address is required for upsert operation.")
    allow_no_email(conn, ws)
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": ""})) == (
        400, "A valid email address or phone number is required for upsert operation.")
    assert fail(lambda: records.upsert_contact(conn, ws, {"phone_number": "12"})) == (400, "phone number is invalid")
    c = records.upsert_contact(conn, ws, {"phone_number": "+1 (415) 555-2671"})
    assert c["data"]["phone_number"] == "+14155552671" and c["data"]["email_address"] is None
    again = records.upsert_contact(conn, ws, {"phone_number": "415.555.2671", "status": "UNSUBSCRIBED"})
    assert again["id"] == c["id"] and again["status"] == "UNSUBSCRIBED"


def test_upsert_phone_needs_phone_field(conn, ws) -> None:
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "a@b.com", "phone_number": "+1415"})) \
        == (400, "Phone field not found in workspace configuration.")


def test_upsert_phone_without_region(conn, ws) -> None:
    fields.create_field(conn, ws, {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT"})
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "a@b.com",
                                                           "phone_number": "4155552671"})) == (
        400, "phone number is invalid")
    c = records.upsert_contact(conn, ws, {"email_address": "a@b.com", "phone_number": "+44 20 7946 0958"})
    assert c["data"]["phone_number"] == "+442079460958"


def test_upsert_both_keys(conn, phone_ws) -> None:
    ws = phone_ws
    ann = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "+14155552671"})
    bob = records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "phone_number": "+14155552672"})
    # both resolve to the same contact
    same = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "4155552671"})
    assert same["id"] == ann["id"]
    # to different contacts
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "ann@example.com",
                                                           "phone_number": "4155552672"})) == (
        400, "The email address and phone number belong to different contacts in your workspace.")
    # email found, phone new: the phone is written to that contact
    moved = records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "phone_number": "4155552673"})
    assert moved["id"] == bob["id"] and moved["data"]["phone_number"] == "+14155552673"
    # neither found: created
    carl = records.upsert_contact(conn, ws, {"email_address": "carl@example.com", "phone_number": "4155552674"})
    assert carl["id"] not in (ann["id"], bob["id"])
    # phone found on a contact with another email: the email cannot change
    status, message = fail(lambda: records.upsert_contact(conn, ws, {"email_address": "dan@example.com",
                                                                      "phone_number": "4155552674"}))
    assert status == 400 and "cannot be changed" in message
    assert count(conn) == 3


def test_upsert_phone_found_contact_without_email_gets_it(conn, phone_ws) -> None:
    allow_no_email(conn, phone_ws)
    c = records.upsert_contact(conn, phone_ws, {"phone_number": "+14155552671"})
    got = records.upsert_contact(conn, phone_ws, {"email_address": "ann@example.com", "phone_number": "+14155552671"})
    assert got["id"] == c["id"] and got["data"]["email_address"] == "ann@example.com"


def test_upsert_field_members_ignored(conn, phone_ws) -> None:
    ws = phone_ws
    c = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "+14155552671",
                                           "fields": {"email_address": "other@example.com",
                                                      "phone_number": "+14155550000"}})
    assert c["data"]["email_address"] == "ann@example.com" and c["data"]["phone_number"] == "+14155552671"
    # without a top-level phone_number, fields.phone_number is the number
    d = records.upsert_contact(conn, ws, {"email_address": "bob@example.com",
                                           "fields": {"phone_number": "415 555 2672"}})
    assert d["data"]["phone_number"] == "+14155552672"


@pytest.mark.parametrize("body,message", [
    ({"email_address": "a@b.com", "status": "GONE"}, "The status you provided is not valid."),
    ({"email_address": "a@b.com", "sms_status": "STOP"}, SMS_INVALID),
    ({"email_address": "a@b.com", "fields": {"nope": 1}}, "We were unable to find a field with the merge_tag nope"),
    ({"email_address": "a@b.com", "tags": [5]}, "Tag ID 5 does not exist in this workspace"),
    ({"email_address": "a@b.com", "partial_update": "yes"}, "The member 'partial_update' must be a boolean."),
    ({"email_address": 5}, "The member 'email_address' must be a string."),
])
def test_upsert_messages(conn, ws, body, message) -> None:
    assert fail(lambda: records.upsert_contact(conn, ws, body)) == (400, message)
    assert count(conn) == 0


def test_upsert_required_on_create_and_full_replace_not_partial(conn, ws) -> None:
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com"})
    fields.create_field(conn, ws, {"label": "Company", "merge_tag": "company", "type": "TEXT", "required": True})
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "bob@example.com"})) == (
        400, "Field 'Company' is required.")
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "ann@example.com"})) == (
        400, "Field 'Company' is required.")
    ok = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True,
                                            "fields": {"first_name": "Ann"}})
    assert ok["data"]["first_name"] == "Ann"
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True,
                                                           "fields": {"company": ""}})) == (
        400, "Field 'Company' is required.")


# --- upsert: replace vs merge ----------------------------------------------------------

@pytest.fixture
def tagged(conn: Any, ws: int) -> dict[str, Any]:
    a = tags.create_tag(conn, ws, {"name": "a"})
    b = tags.create_tag(conn, ws, {"name": "b"})
    c = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "status": "UNSUBSCRIBED",
                                           "sms_status": "BLOCKED", "tags": [a["id"]],
                                           "fields": {"first_name": "Ann", "last_name": "Lee"}})
    return {"a": a, "b": b, "contact": c}


def test_full_replace(conn, ws, tagged) -> None:
    c = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "fields": {"last_name": "Ray"}})
    assert c["data"] == {"email_address": "ann@example.com", "first_name": None, "last_name": "Ray"}
    assert c["tags"] == [] and c["status"] == "SUBSCRIBED"
    assert c["sms_status"] == "BLOCKED"  # omitted on update: kept


def test_partial_update(conn, ws, tagged) -> None:
    c = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True,
                                           "fields": {"last_name": "Ray"}})
    assert c["data"] == {"email_address": "ann@example.com", "first_name": "Ann", "last_name": "Ray"}
    assert c["tags"] == [tagged["a"]] and c["status"] == "UNSUBSCRIBED" and c["sms_status"] == "BLOCKED"
    c = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True,
                                           "tags": [tagged["b"]["id"]], "status": "SUBSCRIBED",
                                           "sms_status": "SUBSCRIBED", "fields": {"first_name": None}})
    # tags given to a partial update are added to the contact's (issue 38: a merge loses nothing)
    assert c["tags"] == [tagged["a"], tagged["b"]] and c["status"] == "SUBSCRIBED" and c["data"]["first_name"] is None
    assert c["sms_status"] == "SUBSCRIBED"


def test_upsert_update_events(conn, ws, tagged) -> None:
    start = len(events(conn))
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True,
                                       "tags": [tagged["b"]["id"]], "fields": {"first_name": "Anne",
                                                                               "last_name": "Lee"}})
    assert events(conn)[start:] == [
        ("FIELD_UPDATED", {"field_id": 2, "merge_tag": "first_name", "old": "Ann", "new": "Anne"}),
        ("TAG_ADDED", {"tag_id": tagged["b"]["id"], "tag_name": "b"}),
    ]
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "tags": [tagged["b"]["id"]],
                                       "fields": {"first_name": "Anne", "last_name": "Lee"}})  # a full replace
    assert events(conn)[start + 2:] == [("TAG_REMOVED", {"tag_id": tagged["a"]["id"], "tag_name": "a"})]
    before = conn.execute("SELECT updated_at FROM contacts").fetchone()[0]
    # nothing changes: no event, updated_at kept; UNCONFIRMED on update fires nothing either
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True,
                                       "fields": {"first_name": "Anne"}})
    assert len(events(conn)) == start + 3
    assert conn.execute("SELECT updated_at FROM contacts").fetchone()[0] == before
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True,
                                       "status": "UNCONFIRMED"})
    assert len(events(conn)) == start + 3


def test_upsert_create_path_events(conn, ws) -> None:
    records.upsert_contact(conn, ws, {"email_address": "a@example.com", "fields": {"first_name": "A"}})
    assert events(conn) == []
    records.upsert_contact(conn, ws, {"email_address": "b@example.com", "status": "UNCONFIRMED"})
    assert [e[0] for e in events(conn)] == ["CONTACT_SUBSCRIBED_PENDING"]


def test_values_stored_by_field_id(conn, ws) -> None:
    f = fields.create_field(conn, ws, {"label": "Colors", "merge_tag": "colors", "type": "DROPDOWN_MULTIPLE",
                                       "definition": "red,green"})
    c = records.upsert_contact(conn, ws, {"email_address": "a@example.com", "fields": {"colors": "green, red"}})
    assert c["data"]["colors"] == ["green", "red"]
    data = json.loads(conn.execute("SELECT data FROM contacts").fetchone()[0])
    assert data == {str(f["id"]): ["green", "red"]}
    fields.update_field(conn, ws, f["id"], {"label": "Colours", "merge_tag": "colours", "type": "DROPDOWN_MULTIPLE",
                                            "definition": "red,green"})
    assert records.get_contact(conn, ws, c["id"])["data"]["colours"] == ["green", "red"]


# --- reads ---------------------------------------------------------------------------

def test_get_contact(conn, ws) -> None:
    c = new(conn, ws)
    got = records.get_contact(conn, ws, c["id"])
    assert got == {**c, "last_opened_at": None, "last_clicked_at": None}
    assert fail(lambda: records.get_contact(conn, ws, "nope")) == (400, "The contact ID you provided is not valid.")
    assert fail(lambda: records.get_contact(conn, ws, "0" * 24)) == (404, "We couldn't find a contact with that ID.")
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    assert fail(lambda: records.get_contact(conn, other, c["id"]))[0] == 404


def test_by_phone(conn, ws) -> None:
    assert fail(lambda: records.get_contact_by_phone(conn, ws, "+14155552671")) == (
        404, "We couldn't find a contact with that phone number.")  # no phone_number field
    fields.create_field(conn, ws, {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT",
                                   "default_region": "US"})
    c = new(conn, ws, fields={"phone_number": "+1 415 555 2671"})
    got = records.get_contact_by_phone(conn, ws, "(415) 555-2671")
    assert list(got) == ["id", "status", "sms_status", "score", "tags", "fields", "last_opened_at",
                         "last_clicked_at", "created_at", "updated_at"]
    assert got["id"] == c["id"] and got["fields"] == c["data"]
    assert fail(lambda: records.get_contact_by_phone(conn, ws, None)) == (
        400, "Phone number is required. Please provide a valid phone number.")
    assert fail(lambda: records.get_contact_by_phone(conn, ws, "")) == (
        400, "Phone number is required. Please provide a valid phone number.")
    assert fail(lambda: records.get_contact_by_phone(conn, ws, "abc")) == (
        400, "Phone number is invalid. Please provide a valid phone number.")
    assert fail(lambda: records.get_contact_by_phone(conn, ws, "+14155552672")) == (
        404, "We couldn't find a contact with that phone number.")


def test_render_search_shape_batches(conn, ws) -> None:
    t = tags.create_tag(conn, ws, {"name": "t"})
    a = new(conn, ws, "a@example.com", tags=[t["id"]])
    b = new(conn, ws, "b@example.com")
    rows = conn.execute("SELECT * FROM contacts ORDER BY email").fetchall()
    out = view.render_contacts(conn, ws, rows, "search")
    assert [list(x) for x in out] == [["id", "status", "tags", "data", "statistics", "last_opened_at",
                                       "last_clicked_at", "created_at", "updated_at"]] * 2
    assert [x["id"] for x in out] == [a["id"], b["id"]] and out[0]["tags"] == [t] and out[1]["tags"] == []
    assert view.render_contacts(conn, ws, [], "search") == []
    with pytest.raises(ValueError):
        view.render_contacts(conn, ws, rows, "other")


# --- tags add / remove -----------------------------------------------------------------

def test_add_and_remove_tags(conn, ws) -> None:
    a = tags.create_tag(conn, ws, {"name": "a"})
    b = tags.create_tag(conn, ws, {"name": "b"})
    c = new(conn, ws, tags=[a["id"]])
    added = records.add_contact_tags(conn, ws, c["id"], {"tag_ids": [a["id"], b["id"], b["id"]]})
    assert added["tags"] == [a, b]
    assert events(conn) == [("TAG_ADDED", {"tag_id": b["id"], "tag_name": "b"})]
    records.add_contact_tags(conn, ws, c["id"], {"tag_ids": [a["id"]]})  # nothing new: no event
    assert len(events(conn)) == 1
    removed = records.remove_contact_tags(conn, ws, c["id"], {"tag_ids": [a["id"]]})
    assert removed["tags"] == [b]
    records.remove_contact_tags(conn, ws, c["id"], {"tag_ids": [a["id"]]})  # not there: no event
    assert events(conn)[1:] == [("TAG_REMOVED", {"tag_id": a["id"], "tag_name": "a"})]


@pytest.mark.parametrize("contact_id,body,expected", [
    ("bad", {"tag_ids": [1]}, (400, "The contact ID you provided is not valid.")),
    (None, {"tag_ids": []}, (400, "Please provide at least one tag ID to add or remove.")),
    (None, {}, (400, "Please provide at least one tag ID to add or remove.")),
    (None, {"tag_ids": [999]}, (400, "Tag ID 999 does not exist in this workspace")),
    (None, {"tag_ids": ["1"]}, (400, "The member 'tag_ids' must be an array of integers.")),
    ("0" * 24, {"tag_ids": [1]}, (404, "We couldn't find a contact with that ID.")),
])
def test_tag_messages(conn, ws, contact_id, body, expected) -> None:
    c = new(conn, ws)
    tags.create_tag(conn, ws, {"name": "a"})
    for call in (records.add_contact_tags, records.remove_contact_tags):
        assert fail(lambda: call(conn, ws, contact_id or c["id"], body)) == expected


def test_full_replace_removes_phone_and_reports_it(conn, phone_ws) -> None:
    ws = phone_ws
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "+14155552671"})
    partial = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "partial_update": True})
    assert partial["data"]["phone_number"] == "+14155552671"  # partial keeps it
    assert events(conn) == []
    full = records.upsert_contact(conn, ws, {"email_address": "ann@example.com"})
    assert full["data"]["phone_number"] is None
    assert events(conn) == [("FIELD_UPDATED", {"field_id": 4, "merge_tag": "phone_number", "old": "+14155552671",
                                               "new": None})]


def test_failed_upsert_writes_nothing(conn, ws) -> None:
    a = tags.create_tag(conn, ws, {"name": "a"})
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "tags": [a["id"]]})
    fields.create_field(conn, ws, {"label": "Company", "merge_tag": "company", "type": "TEXT", "required": True})
    before = conn.execute("SELECT * FROM contacts").fetchone()
    assert fail(lambda: records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "tags": []}))[0] == 400
    assert tuple(conn.execute("SELECT * FROM contacts").fetchone()) == tuple(before)
    assert conn.execute("SELECT count(*) FROM contact_tags").fetchone()[0] == 1
    assert events(conn) == []

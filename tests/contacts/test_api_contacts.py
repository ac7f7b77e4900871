"""/v1/contacts over HTTP: status codes, envelope B, shapes, messages, route order."""

from __future__ import annotations

from tests.factories import error_of


def make_phone_field(client, auth) -> None:
    r = client.post("/v1/fields", json={"label": "Phone", "merge_tag": "phone_number", "type": "TEXT",
                                        "default_region": "US"}, headers=auth)
    assert r.status_code == 201


def test_create_get_and_tags(client, auth) -> None:
    tag = client.post("/v1/tags", json={"name": "VIP"}, headers=auth).json()["data"]
    r = client.post("/v1/contacts", json={"fields": {"email_address": "ann@example.com", "first_name": "Ann"},
                                          "status": "SUBSCRIBED"}, headers=auth)
    assert r.status_code == 201 and set(r.json()) == {"data"}
    contact = r.json()["data"]
    assert contact["data"]["first_name"] == "Ann" and contact["sms_status"] == "SUBSCRIBED"
    r = client.get(f"/v1/contacts/{contact['id']}", headers=auth)
    assert r.status_code == 200
    assert r.json()["data"] == {**contact, "last_opened_at": None, "last_clicked_at": None}
    r = client.post(f"/v1/contacts/{contact['id']}/tags/add", json={"tag_ids": [tag["id"]]}, headers=auth)
    assert r.status_code == 200 and r.json()["data"]["tags"] == [tag]
    assert set(r.json()["data"]) == set(contact)
    r = client.post(f"/v1/contacts/{contact['id']}/tags/remove", json={"tag_ids": [tag["id"]]}, headers=auth)
    assert r.status_code == 200 and r.json()["data"]["tags"] == []


def test_create_errors(client, auth) -> None:
    assert error_of(client.post("/v1/contacts", json={"status": "SUBSCRIBED"}, headers=auth)) == (
        400, "Please provide at least one field for the contact.")
    assert error_of(client.post("/v1/contacts", json={"fields": {"email_address": "a@b.com"}}, headers=auth)) == (
        400, "Contact status is required.")
    assert error_of(client.post("/v1/contacts", content=b"not json", headers=auth)) == (
        400, "Invalid request body.")
    assert error_of(client.post("/v1/contacts", json=[], headers=auth)) == (400, "Invalid request body.")
    body = {"fields": {"email_address": "a@b.com"}, "status": "SUBSCRIBED"}
    assert client.post("/v1/contacts", json=body, headers=auth).status_code == 201
    assert error_of(client.post("/v1/contacts", json=body, headers=auth)) == (
        409, "A contact with the email address a@b.com already exists in this workspace.")


def test_upsert(client, auth) -> None:
    r = client.post("/v1/contacts/upsert", json={"email_address": "ann@example.com"}, headers=auth)
    assert r.status_code == 200 and set(r.json()) == {"data"}  # 200 also when created
    first = r.json()["data"]
    r = client.post("/v1/contacts/upsert", json={"email_address": "ANN@example.com", "status": "UNSUBSCRIBED"},
                    headers=auth)
    assert r.json()["data"]["id"] == first["id"] and r.json()["data"]["status"] == "UNSUBSCRIBED"
    assert error_of(client.post("/v1/contacts/upsert", json={}, headers=auth)) == (
        400, "Email address is required for upsert operation.")
    assert error_of(client.post("/v1/contacts/upsert", json={"email_address": "a@b.com", "phone_number": "+1"},
                                headers=auth)) == (400, "Phone field not found in workspace configuration.")


def test_upsert_different_contacts(client, auth) -> None:
    make_phone_field(client, auth)
    for email, phone in (("a@example.com", "+14155552671"), ("b@example.com", "+14155552672")):
        client.post("/v1/contacts/upsert", json={"email_address": email, "phone_number": phone}, headers=auth)
    assert error_of(client.post("/v1/contacts/upsert", json={"email_address": "a@example.com",
                                                             "phone_number": "(415) 555-2672"}, headers=auth)) == (
        400, "The email address and phone number belong to different contacts in your workspace.")


def test_by_phone(client, auth) -> None:
    make_phone_field(client, auth)
    created = client.post("/v1/contacts", json={"fields": {"email_address": "a@example.com",
                                                           "phone_number": "+1 415 555 2671"},
                                                "status": "SUBSCRIBED"}, headers=auth).json()["data"]
    r = client.get("/v1/contacts/by-phone", params={"phone_number": "415-555-2671"}, headers=auth)
    assert r.status_code == 200 and set(r.json()) == {"data"}
    got = r.json()["data"]
    assert got["id"] == created["id"] and got["fields"]["phone_number"] == "+14155552671" and "data" not in got
    r = client.get("/v1/contacts/by-phone", params={"phone_number": "+14155552671"}, headers=auth)
    assert r.json()["data"]["id"] == created["id"]
    assert error_of(client.get("/v1/contacts/by-phone", headers=auth)) == (
        400, "Phone number is required. Please provide a valid phone number.")
    assert error_of(client.get("/v1/contacts/by-phone", params={"phone_number": "xyz"}, headers=auth)) == (
        400, "Phone number is invalid. Please provide a valid phone number.")
    assert error_of(client.get("/v1/contacts/by-phone", params={"phone_number": "+14155552679"}, headers=auth)) == (
        404, "We couldn't find a contact with that phone number.")


def test_contact_id_errors(client, auth) -> None:
    assert error_of(client.get("/v1/contacts/xyz", headers=auth)) == (400, "The contact ID you provided is not valid.")
    assert error_of(client.get(f"/v1/contacts/{'a' * 24}", headers=auth)) == (
        404, "We couldn't find a contact with that ID.")
    # the id is checked before the body is read
    assert error_of(client.post("/v1/contacts/xyz/tags/add", content=b"{", headers=auth)) == (
        400, "The contact ID you provided is not valid.")
    assert error_of(client.post(f"/v1/contacts/{'a' * 24}/tags/add", json={"tag_ids": []}, headers=auth)) == (
        400, "Please provide at least one tag ID to add or remove.")
    assert error_of(client.post(f"/v1/contacts/{'a' * 24}/tags/remove", json={"tag_ids": [1]}, headers=auth)) == (
        404, "We couldn't find a contact with that ID.")


def test_fixed_paths_win_over_contact_id(client, auth) -> None:
    # GET on the fixed POST paths must not be read as a contact id
    assert error_of(client.get("/v1/contacts/upsert", headers=auth))[0] in (400, 405)
    assert client.get("/v1/contacts/by-phone", params={"phone_number": "+14155552671"}, headers=auth).status_code \
        == 404
    assert error_of(client.post("/v1/contacts/upsert", json={"email_address": ""}, headers=auth)) == (
        400, "Email address is required for upsert operation.")


def test_other_workspace_cannot_see_contact(client, auth, conn) -> None:
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")
    created = client.post("/v1/contacts/upsert", json={"email_address": "a@example.com"}, headers=auth).json()["data"]
    other_auth = {"Authorization": f"Bearer {other['api_key']}"}
    assert error_of(client.get(f"/v1/contacts/{created['id']}", headers=other_auth))[0] == 404
    assert error_of(client.post(f"/v1/contacts/{created['id']}/tags/add", json={"tag_ids": [1]},
                                headers=other_auth))[0] == 404


def test_huge_number_values_never_break_reads(client, auth, conn, workspace):
    from marketing_cli.services.contacts import fields

    fields.create_field(conn, workspace["id"], {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    r = client.post("/v1/contacts", headers=auth,
                    json={"fields": {"email_address": "big@example.com", "age": 2**70}, "status": "SUBSCRIBED"})
    assert r.status_code == 201 and r.json()["data"]["data"]["age"] == float(2**70)
    search = client.post("/v1/contacts/search", headers=auth, json={})
    assert search.status_code == 200 and search.json()["data"]["pagination"]["total"] == 1


def test_upsert_keeps_the_specification_default_and_a_partial_update_adds_tags(client, auth) -> None:
    """The API's default stays the full replace; partial_update true merges, given tags added to the
    contact's (issue 38: they replaced them, unlike everything else a merge keeps)."""
    vip, gold = (client.post("/v1/tags", json={"name": n}, headers=auth).json()["data"]["id"] for n in ("vip", "gold"))
    body = {"email_address": "ann@example.com", "fields": {"first_name": "Ann", "last_name": "Lee"},
            "tags": [vip], "status": "UNSUBSCRIBED"}
    assert client.post("/v1/contacts/upsert", json=body, headers=auth).status_code == 200
    merged = client.post("/v1/contacts/upsert", headers=auth, json={
        "email_address": "ann@example.com", "partial_update": True, "tags": [gold]}).json()["data"]
    assert [t["id"] for t in merged["tags"]] == [vip, gold] and merged["data"]["last_name"] == "Lee"
    assert merged["status"] == "UNSUBSCRIBED"
    replaced = client.post("/v1/contacts/upsert", headers=auth, json={
        "email_address": "ann@example.com", "tags": [gold]}).json()["data"]
    assert [t["id"] for t in replaced["tags"]] == [gold] and replaced["data"]["last_name"] is None
    assert replaced["status"] == "SUBSCRIBED"

"""/v1/fields over HTTP: envelope B, 201 on create, the spec's messages."""

from __future__ import annotations

from tests.factories import error_of

FIELD = {"label": "City", "merge_tag": "city", "type": "TEXT"}


def test_create_list_update(client, auth) -> None:
    r = client.post("/v1/fields", json={**FIELD, "default_region": "fr"}, headers=auth)
    assert r.status_code == 201
    created = r.json()["data"]
    assert set(r.json()) == {"data"}
    assert created["merge_tag"] == "city" and created["default_region"] == "FR" and created["immutable"] is False
    r = client.get("/v1/fields", headers=auth)
    assert r.status_code == 200 and set(r.json()) == {"data"}
    assert [f["merge_tag"] for f in r.json()["data"]] == ["email_address", "first_name", "last_name", "city"]
    r = client.patch(f"/v1/fields/{created['id']}", json={**FIELD, "label": "Town"}, headers=auth)
    assert r.status_code == 200 and r.json() == {"data": {**created, "label": "Town"}}


def test_create_errors(client, auth) -> None:
    assert error_of(client.post("/v1/fields", json={**FIELD, "type": "WORD"}, headers=auth)) == (
        400, "Validation error")
    assert error_of(client.post("/v1/fields", content=b"{nope", headers=auth)) == (400, "Validation error")
    assert error_of(client.post("/v1/fields", json={**FIELD, "merge_tag": "email_address"}, headers=auth)) == (
        400, "Validation error")
    assert error_of(client.post("/v1/fields", json={**FIELD, "required": "no"}, headers=auth)) == (
        400, "The member 'required' must be a boolean.")
    assert error_of(client.post("/v1/fields", json=FIELD)) == (401, "Please provide an API key.")


def test_update_errors(client, auth) -> None:
    fields = client.get("/v1/fields", headers=auth).json()["data"]
    email_id = fields[0]["id"]
    first_name_id = fields[1]["id"]
    assert error_of(client.patch("/v1/fields/9999", json=FIELD, headers=auth)) == (
        404, "We were unable to find the field.")
    assert error_of(client.patch("/v1/fields/abc", json=FIELD, headers=auth)) == (
        404, "We were unable to find the field.")
    assert error_of(client.patch(f"/v1/fields/{email_id}", json={**FIELD, "merge_tag": "email_address"},
                                 headers=auth)) == (400, "This field is immutable and cannot be updated.")
    assert error_of(client.patch(f"/v1/fields/{first_name_id}", json={**FIELD, "merge_tag": "first_name",
                                                                      "type": "NUMBER"}, headers=auth)) == (
        400, "The type of the field cannot be changed.")
    assert error_of(client.patch(f"/v1/fields/{first_name_id}", json={"label": "First"}, headers=auth)) == (
        400, "Validation error")


def test_import_lock_blocks_fields(client, auth, conn, workspace) -> None:
    conn.execute("INSERT INTO contact_io_locks VALUES (?, 'export', 't', '2026-01-01T00:00:00.000Z',"
                 " '2999-01-01T00:00:00.000Z')", (workspace["id"],))
    assert error_of(client.post("/v1/fields", json=FIELD, headers=auth)) == (400, "Validation error")

"""/v1/tags over HTTP (extension endpoints): envelope B."""

from __future__ import annotations

from tests.factories import error_of


def test_create_and_list(client, auth) -> None:
    r = client.post("/v1/tags", json={"name": "VIP"}, headers=auth)
    assert r.status_code == 201 and r.json() == {"data": {"id": r.json()["data"]["id"], "name": "VIP"}}
    r = client.get("/v1/tags", headers=auth)
    assert r.status_code == 200 and r.json()["data"] == [{"id": 1, "name": "VIP"}]


def test_errors(client, auth) -> None:
    client.post("/v1/tags", json={"name": "VIP"}, headers=auth)
    assert error_of(client.post("/v1/tags", json={"name": "vip"}, headers=auth)) == (
        400, "A tag named 'VIP' already exists in this workspace.")
    assert error_of(client.post("/v1/tags", json={}, headers=auth)) == (400, "Please provide a name for the tag.")
    assert error_of(client.post("/v1/tags", content=b"[", headers=auth)) == (400, "Invalid request body.")
    assert error_of(client.get("/v1/tags", headers={"Authorization": "Bearer nope"})) == (
        401, "The API key you provided is invalid or has been revoked.")

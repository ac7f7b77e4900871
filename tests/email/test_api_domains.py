"""/v1/domains and /v1/sender-identities over HTTP (TestClient), verification against a real DNS server."""

from __future__ import annotations

import pytest

from tests import factories as f
from tests.conftest import error_of


def add(client, auth, name="example.com"):
    response = client.post("/v1/domains", json={"domain_name": name}, headers=auth)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["error"] is None  # envelope A
    return body["data"]


def test_add_list_get_in_envelope_a(client, auth):
    d = add(client, auth)
    assert set(d) == {"id", "domain_code", "domain_name", "verified", "dns_records", "verified_by", "reserved_name"}
    listed = client.get("/v1/domains", headers=auth).json()
    assert listed == {"error": None, "data": [d]}
    got = client.get(f"/v1/domains/{d['id']}", headers=auth)
    assert got.status_code == 200 and got.json() == {"error": None, "data": d}
    assert "PRIVATE" not in got.text and "PRIVATE" not in listed.__repr__()


@pytest.mark.parametrize("path", ["/v1/domains/abc", "/v1/domains/0", "/v1/domains/-3", "/v1/domains/1.5",
                                  "/v1/domains/99999999999999999999", "/v1/domains/%20"])
def test_get_domain_with_a_malformed_id(client, auth, path):
    assert error_of(client.get(path, headers=auth)) == (400, "Please provide a valid domain ID.")
    assert error_of(client.post(f"{path}/verify", headers=auth)) == (400, "Please provide a valid domain ID.")


def test_another_workspaces_domain_is_not_found(client, auth, conn):
    other = f.workspace(conn, "Other")
    theirs = f.domain(conn, other["id"], "other.example")
    assert error_of(client.get(f"/v1/domains/{theirs['id']}", headers=auth)) == (
        404, "We were unable to find the domain.")
    assert error_of(client.post(f"/v1/domains/{theirs['id']}/verify", headers=auth)) == (
        404, "We were unable to find the domain.")
    assert error_of(client.get("/v1/domains/4242", headers=auth)) == (404, "We were unable to find the domain.")
    assert client.get("/v1/domains", headers=auth).json()["data"] == []


@pytest.mark.parametrize("body, message", [
    (b"{", "Invalid request body."),
    (b"", "Invalid request body."),
    (b"[]", "Invalid request body."),
    (b"{}", "Please provide a domain name."),
    (b'{"domain_name": ""}', "Please provide a domain name."),
    (b'{"domain_name": 12}', "The member 'domain_name' must be a string."),
    (b'{"domain_name": "127.0.0.1"}', "Please provide a valid domain name, such as example.com."),
    (b'{"domain_name": "bad_name.example"}', "Please provide a valid domain name, such as example.com."),
])
def test_add_domain_errors(client, auth, body, message):
    response = client.post("/v1/domains", content=body, headers={**auth, "Content-Type": "application/json"})
    assert error_of(response) == (400, message)
    assert client.get("/v1/domains", headers=auth).json()["data"] == []


def test_duplicate_and_billing_limit(client, auth, conn, workspace):
    add(client, auth, "example.com")
    assert error_of(client.post("/v1/domains", json={"domain_name": "Example.com"}, headers=auth)) == (
        400, "The domain example.com has already been added to this workspace.")
    assert error_of(client.post("/v1/domains", json={"domain_name": "example.org"}, headers=auth)) == (
        400, "Billing limit error")
    resources = client.get("/v1/workspace", headers=auth).json()["data"]["billing"]["resources"]
    assert {"name": "domains", "used": 1, "allowed": 1} in resources
    f.allow_domains(conn, workspace["id"], 2)
    add(client, auth, "example.org")


def test_verify_against_a_real_dns_server(client, auth, dns_server):
    d = add(client, auth)
    response = client.post(f"/v1/domains/{d['id']}/verify", headers=auth)
    assert response.status_code == 200
    body = response.json()
    assert body["error"] is None and body["data"]["verified"] is False  # nothing published yet
    dns_server.publish(d)
    body = client.post(f"/v1/domains/{d['id']}/verify", headers=auth).json()
    assert body["data"]["verified"] is True
    assert [r["verified"] for r in body["data"]["dns_records"]] == [True] * 4
    assert client.get(f"/v1/domains/{d['id']}", headers=auth).json()["data"] == body["data"]


def test_domain_endpoints_need_a_key(client):
    for method, path in [("GET", "/v1/domains"), ("POST", "/v1/domains"), ("GET", "/v1/domains/1"),
                         ("POST", "/v1/domains/1/verify"), ("GET", "/v1/sender-identities"),
                         ("POST", "/v1/sender-identities"), ("GET", "/v1/sender-identities/1")]:
        assert error_of(client.request(method, path)) == (401, "Please provide an API key.")


def test_wrong_methods(client, auth):
    assert error_of(client.put("/v1/domains/1", headers=auth)) == (405, "Method not allowed.")
    assert error_of(client.get("/v1/domains/1/verify", headers=auth)) == (405, "Method not allowed.")


# --- sender identities ---------------------------------------------------------------------


def test_sender_identities_add_list_get(client, auth):
    d = add(client, auth)
    response = client.post("/v1/sender-identities", headers=auth,
                           json={"domain_id": d["id"], "local_part": "news", "display_name": "News Team"})
    assert response.status_code == 201
    body = response.json()
    assert body["error"] is None
    s = body["data"]
    assert {k: v for k, v in s.items() if k not in {"id", "created_at"}} == {
        "display_name": "News Team", "local_part": "news", "domain_name": "example.com", "domain_id": d["id"],
        "domain_verified": False}
    assert client.get("/v1/sender-identities", headers=auth).json() == {"error": None, "data": [s]}
    assert client.get(f"/v1/sender-identities/{s['id']}", headers=auth).json() == {"error": None, "data": s}
    assert error_of(client.get("/v1/sender-identities/x", headers=auth)) == (
        400, "Please provide a valid sender identity ID.")
    assert error_of(client.get(f"/v1/sender-identities/{s['id'] + 1}", headers=auth)) == (
        404, "We were unable to find the sender identity.")


@pytest.mark.parametrize("body, message", [
    ({"local_part": "news", "display_name": "N"}, "Please provide a valid domain ID."),
    ({"domain_id": "1x", "local_part": "news", "display_name": "N"}, "Please provide a valid domain ID."),
    ({"domain_id": 1, "display_name": "N"}, "Please provide the local part of the sender's address (the part before "
                                            "the @)."),
    ({"domain_id": 1, "local_part": "a b", "display_name": "N"},
     "The local part 'a b' is not valid in an email address: The email address contains invalid characters before "
     "the @-sign: SPACE."),
    ({"domain_id": 1, "local_part": "news"}, "Please provide a display name for the sender identity."),
    ({"domain_id": 1, "local_part": "news", "display_name": "N" * 101}, "The display name must be 100 characters or "
                                                                         "less."),
    ({"domain_id": 1, "local_part": "news", "display_name": "a\nb"}, "The display name must not contain line breaks "
                                                                      "or other control characters."),
    ({"domain_id": 1, "local_part": {"x": 1}, "display_name": "N"}, "The member 'local_part' must be a string."),
    ([], "Invalid request body."),
])
def test_sender_identity_errors(client, auth, body, message):
    add(client, auth)
    assert error_of(client.post("/v1/sender-identities", json=body, headers=auth)) == (400, message)
    assert client.get("/v1/sender-identities", headers=auth).json()["data"] == []


def test_sender_identity_duplicate_and_unparseable_body(client, auth):
    d = add(client, auth)
    body = {"domain_id": d["id"], "local_part": "news", "display_name": "N"}
    assert client.post("/v1/sender-identities", json=body, headers=auth).status_code == 201
    assert error_of(client.post("/v1/sender-identities", json=body, headers=auth)) == (
        400, "The sender identity news@example.com already exists in this workspace.")
    assert error_of(client.post("/v1/sender-identities", content=b"{not json", headers=auth)) == (
        400, "Invalid request body.")


def test_a_workspace_cannot_use_another_workspaces_domain_or_see_its_senders(client, auth, conn):
    other = f.workspace(conn, "Other")
    theirs = f.sender(conn, other["id"])
    body = {"domain_id": theirs["domain_id"], "local_part": "news", "display_name": "N"}
    assert error_of(client.post("/v1/sender-identities", json=body, headers=auth)) == (
        404, "We were unable to find the domain.")
    assert client.get("/v1/sender-identities", headers=auth).json()["data"] == []
    assert error_of(client.get(f"/v1/sender-identities/{theirs['id']}", headers=auth)) == (
        404, "We were unable to find the sender identity.")
    their_auth = {"Authorization": f"Bearer {other['api_key']}"}
    assert client.get("/v1/sender-identities", headers=their_auth).json()["data"] == [theirs]


# --- a staging domain: a reserved name, the operator's mark (CLI only) ----------------------


def test_a_reserved_name_and_a_sender_on_it_over_http(client, auth):
    d = add(client, auth, "news.example.test")
    assert (d["reserved_name"], d["verified"], d["verified_by"]) == (True, False, None)
    response = client.post("/v1/sender-identities", headers=auth,
                           json={"domain_id": d["id"], "local_part": "news", "display_name": "News"})
    assert response.status_code == 201, response.text
    assert response.json()["data"]["domain_name"] == "news.example.test"
    assert error_of(client.post("/v1/sender-identities", headers=auth,
                                json={"domain_id": d["id"], "local_part": "a b", "display_name": "News"})) == (
        400, ("The local part 'a b' is not valid in an email address: The email address contains invalid characters "
              "before the @-sign: SPACE."))


def test_no_request_marks_a_domain_verified(client, auth):
    d = add(client, auth, "news.example.test")
    for method, path, body in [
        ("POST", f"/v1/domains/{d['id']}/mark-verified", None),
        ("POST", f"/v1/domains/{d['id']}/verify?by_operator=1", None),
        ("POST", f"/v1/domains/{d['id']}/verify", {"verified": True, "by_operator": True}),
        ("PATCH", f"/v1/domains/{d['id']}", {"verified": True}),
        ("PUT", f"/v1/domains/{d['id']}", {"verified": True}),
    ]:
        client.request(method, path, json=body, headers=auth)
    got = client.get(f"/v1/domains/{d['id']}", headers=auth).json()["data"]
    assert (got["verified"], got["verified_by"]) == (False, None)
    assert error_of(client.post(f"/v1/domains/{d['id']}/mark-verified", headers=auth)) == (404, "Not found.")
    assert error_of(client.patch(f"/v1/domains/{d['id']}", json={"verified": True}, headers=auth)) == (
        405, "Method not allowed.")
    paths = client.get("/v1/openapi.json").json()["paths"]
    assert not [p for p in paths if "mark" in p or "operator" in p]


def test_the_operators_mark_shows_in_the_api_view(client, auth, conn, workspace, dns_server):
    from marketing_cli.services.email import domains

    d = add(client, auth, "news.example.test")
    domains.mark_domain_verified(conn, workspace["id"], d["id"])  # what `mkt domains mark-verified` calls
    got = client.get(f"/v1/domains/{d['id']}", headers=auth).json()["data"]
    assert (got["verified"], got["verified_by"], got["reserved_name"]) == (True, "operator", True)
    checked = client.post(f"/v1/domains/{d['id']}/verify", headers=auth).json()["data"]
    assert checked == got  # DNS finds nothing: the mark holds
    assert client.get("/v1/domains", headers=auth).json()["data"] == [got]

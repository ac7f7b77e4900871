"""Conventions every endpoint shares (CONTRACT section 4): error shape, auth, 404/405, 413."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import error_of

AUTHENTICATED = [("GET", "/v1/workspace"), ("PATCH", "/v1/workspace"), ("GET", "/v1/merge-tags")]


@pytest.mark.parametrize("method, path", AUTHENTICATED)
def test_missing_and_invalid_keys(client: Any, method: str, path: str) -> None:
    assert error_of(client.request(method, path)) == (401, "Please provide an API key.")
    bad = client.request(method, path, headers={"Authorization": "Bearer mkt_nope"})
    assert error_of(bad) == (401, "The API key you provided is invalid or has been revoked.")


def test_revoked_key_is_refused_at_once(client: Any, conn: Any, workspace: dict) -> None:
    from marketing_cli.services.account import keys

    created = keys.create_key(conn, workspace["id"], "soon revoked")
    headers = {"Authorization": f"Bearer {created['key']}"}
    assert client.get("/v1/workspace", headers=headers).status_code == 200
    keys.revoke_key(conn, workspace["id"], created["id"])
    assert error_of(client.get("/v1/workspace", headers=headers)) == (
        401, "The API key you provided is invalid or has been revoked.")


def test_unknown_path_and_wrong_method(client: Any, auth: dict) -> None:
    assert error_of(client.get("/v1/nothing-here", headers=auth)) == (404, "Not found.")
    assert error_of(client.get("/nothing-here", headers=auth)) == (404, "Not found.")
    root = client.get("/", headers=auth, follow_redirects=False)  # `/` is the dashboard (docs/dashboard.md)
    assert (root.status_code, root.headers["location"]) == (303, "/dashboard/")
    assert error_of(client.delete("/v1/workspace", headers=auth)) == (405, "Method not allowed.")
    assert error_of(client.post("/v1/sms-rates")) == (405, "Method not allowed.")


def test_body_over_one_mib_is_413(client: Any, auth: dict) -> None:
    big = '{"name": "' + "x" * (1024 * 1024) + '", "conversion_tracking": false}'
    r = client.patch("/v1/workspace", headers={**auth, "Content-Type": "application/json"}, content=big)
    status, message = error_of(r)
    assert status == 413 and "1024 KiB" in message


def test_body_over_limit_without_content_length_is_413(client: Any, auth: dict) -> None:
    def chunks():  # noqa: ANN202 - streamed, so no Content-Length header is sent
        yield b'{"name": "'
        for _ in range(300):
            yield b"x" * 4096
        yield b'", "conversion_tracking": false}'

    r = client.patch("/v1/workspace", headers={**auth, "Content-Type": "application/json"}, content=chunks())
    assert error_of(r)[0] == 413


def test_unexpected_errors_are_500_with_the_error_body(client: Any, auth: dict, monkeypatch: Any) -> None:
    from marketing_cli.services.contacts import merge_tags

    def broken(*args: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(merge_tags, "list_merge_tags", broken)
    assert error_of(client.get("/v1/merge-tags", headers=auth)) == (500, "Internal server error.")


def test_get_on_post_only_contact_paths_is_405(client: Any, auth: dict) -> None:
    for path in ("/v1/contacts/upsert", "/v1/contacts/search"):
        r = client.get(path, headers=auth)
        assert error_of(r) == (405, "Method not allowed.")
        assert r.headers["allow"] == "POST"

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.services.account import workspaces
from tests.factories import error_of


def test_get_workspace_envelope_a(client: Any, auth: dict, workspace: dict) -> None:
    r = client.get("/v1/workspace", headers=auth)
    assert r.status_code == 200
    body = r.json()
    assert body["error"] is None and set(body) == {"error", "data"}
    assert body["data"]["workspace"]["id"] == workspace["id"]
    billing = body["data"]["billing"]
    assert isinstance(billing["subscription"]["next_invoice_total"], (int, float))
    assert {r["name"] for r in billing["resources"]} == {
        "contacts", "monthly_emails", "domains", "users", "segments", "automations", "events", "hourly_emails"}


def test_patch_workspace(client: Any, auth: dict) -> None:
    r = client.patch("/v1/workspace", headers=auth, json={"name": "Renamed", "conversion_tracking": False})
    assert r.status_code == 200
    assert r.json() == {"error": None, "data": {**r.json()["data"], "name": "Renamed"}}
    assert client.get("/v1/workspace", headers=auth).json()["data"]["workspace"]["name"] == "Renamed"


@pytest.mark.parametrize("body, status, message", [
    ("{not json", 400, "Invalid request body."),
    ("", 400, "Invalid request body."),
    ("[1, 2]", 400, "Invalid request body."),
    ('"text"', 400, "Invalid request body."),
    ('{"name": "A", "conversion_tracking": false}', 400, "Workspace name must be between 2 and 50 characters."),
    ('{"name": "' + "x" * 51 + '", "conversion_tracking": false}', 400,
     "Workspace name must be between 2 and 50 characters."),
    ('{"name": "Fine", "conversion_tracking": true}', 400,
     "Your plan does not support conversion tracking. Please upgrade to enable this feature."),
    ('{"name": ["x"], "conversion_tracking": false}', 400, "The member 'name' must be a string."),
    ('{"name": "Fine", "conversion_tracking": "false"}', 400, "The member 'conversion_tracking' must be a boolean."),
    ('{"name": "Fine", "conversion_tracking": NaN}', 400, "Invalid request body."),
])
def test_patch_errors(client: Any, auth: dict, body: str, status: int, message: str) -> None:
    r = client.patch("/v1/workspace", headers={**auth, "Content-Type": "application/json"}, content=body)
    assert error_of(r) == (status, message)
    assert client.get("/v1/workspace", headers=auth).json()["data"]["workspace"]["name"] == "Test workspace"


def test_conversion_tracking_needs_interaction_tracking(client: Any, auth: dict, conn: Any, workspace: dict) -> None:
    from marketing_cli.services.account import billing

    billing.set_plan(conn, workspace["id"], "pro")
    r = client.patch("/v1/workspace", headers=auth,
                     json={"name": "Fine", "conversion_tracking": True, "interaction_tracking": False})
    assert error_of(r) == (400, "Conversion tracking cannot be enabled while interaction tracking is disabled.")
    r = client.patch("/v1/workspace", headers=auth, json={"name": "Fine", "conversion_tracking": True})
    assert r.status_code == 200 and r.json()["data"]["conversion_tracking"] is True


@pytest.mark.sqlite_only  # foreign keys switched off: a state only a SQLite file can be left in
def test_workspace_that_no_longer_exists(client: Any, auth: dict, conn: Any, workspace: dict) -> None:
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("DELETE FROM workspaces WHERE id = ?", (workspace["id"],))
    r = client.patch("/v1/workspace", headers=auth, json={"name": "Fine", "conversion_tracking": False})
    assert error_of(r) == (404, "The workspace does not exist.")
    assert error_of(client.get("/v1/workspace", headers=auth)) == (404, "The workspace does not exist.")


def test_other_workspace_is_unreachable(client: Any, conn: Any, workspace: dict) -> None:
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")
    r = client.get("/v1/workspace", headers={"Authorization": f"Bearer {other['api_key']}"})
    assert r.json()["data"]["workspace"]["name"] == "Other"
    client.patch("/v1/workspace", headers={"Authorization": f"Bearer {other['api_key']}"},
                 json={"name": "Other renamed", "conversion_tracking": False})
    assert workspaces.get_workspace_info(conn, workspace["id"])["workspace"]["name"] == "Test workspace"


@pytest.mark.parametrize("member", ["sms_markup", "tracking_url", "allow_contacts_without_email", "plan"])
def test_no_api_key_can_change_an_operator_setting(client: Any, auth: dict, conn: Any, workspace: dict,
                                                   member: str) -> None:
    """CONTRACT section 3: operator settings exist only in the CLI (docs/security.md)."""
    before = workspaces.get_operator_settings(conn, workspace["id"])
    body = {"name": "Fine", "conversion_tracking": False, member: "x"}
    r = client.patch("/v1/workspace", headers=auth, json=body)
    assert (r.status_code, r.json()["error"]["message"]) == (400, f"Unknown member '{member}'")
    assert workspaces.get_operator_settings(conn, workspace["id"]) == before
    for path in ("/v1/keys", "/v1/sms/balance", "/v1/rates", "/v1/billing/plan"):
        assert client.post(path, headers=auth, json={}).status_code in (404, 405)

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


def test_the_kept_answer_follows_every_change_at_once(client: Any, auth: dict, conn: Any, workspace: dict,
                                                      db_path: Any) -> None:
    """GET /v1/workspace keeps its rendered answer while the database is unchanged
    (storage/versioned.py): a change from another connection shows in the very next answer."""
    from marketing_cli.services.account import billing

    def contacts_allowed() -> int:
        resources = client.get("/v1/workspace", headers=auth).json()["data"]["billing"]["resources"]
        return next(r["allowed"] for r in resources if r["name"] == "contacts")

    first = contacts_allowed()
    assert contacts_allowed() == first
    billing.set_allowance(conn, workspace["id"], "contacts", first + 7)  # the test's own connection
    assert contacts_allowed() == first + 7
    billing.bump_usage(conn, workspace["id"], "contacts", 3)
    resources = client.get("/v1/workspace", headers=auth).json()["data"]["billing"]["resources"]
    assert next(r["used"] for r in resources if r["name"] == "contacts") == 3


def test_the_kept_answer_is_per_hour(client: Any, auth: dict, conn: Any, workspace: dict,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The hourly usage is of the current hour: a new hour is a new answer with no change to the rows."""
    from datetime import timedelta

    from marketing_cli.kernel import clock
    from marketing_cli.services.account import billing

    def hourly_used() -> int:
        resources = client.get("/v1/workspace", headers=auth).json()["data"]["billing"]["resources"]
        return next(r["used"] for r in resources if r["name"] == "hourly_emails")

    billing.bump_usage(conn, workspace["id"], "hourly_emails", 5)
    assert hourly_used() == 5
    assert hourly_used() == 5
    later = clock.utcnow() + timedelta(hours=1)
    monkeypatch.setattr(clock, "utcnow", lambda: later)
    assert hourly_used() == 0


def test_a_key_revoked_by_another_process_is_refused_at_once(client: Any, auth: dict, db_path: Any,
                                                             workspace: dict) -> None:
    """`mkt keys revoke` in another process: the next request gets 401, however often the key
    was used just before (the verified key is kept only while the database is unchanged)."""
    import json
    import subprocess
    import sys

    for _ in range(3):
        assert client.get("/v1/workspace", headers=auth).status_code == 200
    mkt = [sys.executable, "-m", "marketing_cli", "--db", str(db_path), "--workspace", str(workspace["id"])]
    listed = subprocess.run([*mkt, "keys", "list", "--json"], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    key_id = json.loads(listed.stdout)[0]["id"]
    revoked = subprocess.run([*mkt, "keys", "revoke", str(key_id)], capture_output=True, text=True)
    assert revoked.returncode == 0, revoked.stderr
    assert error_of(client.get("/v1/workspace", headers=auth)) == (
        401, "The API key you provided is invalid or has been revoked.")

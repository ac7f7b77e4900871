from __future__ import annotations

import sqlite3

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import billing, workspaces


def test_create_workspace_has_builtin_fields_free_plan_and_key(conn: sqlite3.Connection) -> None:
    created = workspaces.create_workspace(conn, "  Acme  ")
    ws = created["workspace"]
    assert ws["name"] == "Acme"
    assert set(ws) == {"id", "name", "conversion_tracking", "interaction_tracking", "is_approved",
                       "is_suspended", "created_at", "timezone"}
    assert ws["interaction_tracking"] is True and ws["conversion_tracking"] is False
    assert ws["created_at"].endswith("Z")
    assert created["api_key"].startswith("mkt_")
    tags = [r[0] for r in conn.execute("SELECT merge_tag FROM fields WHERE workspace_id = ? ORDER BY id", (ws["id"],))]
    assert tags == ["email_address", "first_name", "last_name"]
    immutable = conn.execute("SELECT immutable, required FROM fields WHERE merge_tag = 'email_address'").fetchone()
    assert tuple(immutable) == (1, 1)
    assert billing.plan_of(conn, ws["id"])["name"] == "free"


@pytest.mark.parametrize("name", ["A", "x" * 51, "   ", None, 12])
def test_workspace_name_length(conn: sqlite3.Connection, name: object) -> None:
    with pytest.raises(MktError) as err:
        workspaces.create_workspace(conn, name)
    assert err.value.status == 400
    assert conn.execute("SELECT count(*) FROM workspaces").fetchone()[0] == 0


def test_several_workspaces_in_one_file(conn: sqlite3.Connection) -> None:
    a = workspaces.create_workspace(conn, "Alpha")["workspace"]["id"]
    b = workspaces.create_workspace(conn, "Beta")["workspace"]["id"]
    assert a != b
    assert [w["name"] for w in workspaces.list_workspaces(conn)] == ["Alpha", "Beta"]


def test_update_rules(conn: sqlite3.Connection, workspace: dict) -> None:
    ws = workspace["id"]
    upd = workspaces.update_workspace
    assert upd(conn, ws, {"name": "New name", "conversion_tracking": False})["name"] == "New name"
    with pytest.raises(MktError, match="^Workspace name must be between 2 and 50 characters.$"):
        upd(conn, ws, {"name": "N", "conversion_tracking": False})
    with pytest.raises(MktError, match="^Your plan does not support conversion tracking"):
        upd(conn, ws, {"name": "New name", "conversion_tracking": True})
    billing.set_plan(conn, ws, "pro")
    assert upd(conn, ws, {"name": "New name", "conversion_tracking": True})["conversion_tracking"] is True
    # interaction_tracking omitted: kept (still true)
    assert upd(conn, ws, {"name": "New name", "conversion_tracking": True})["interaction_tracking"] is True
    with pytest.raises(MktError, match="^Conversion tracking cannot be enabled while interaction tracking is disabled.$"):
        upd(conn, ws, {"name": "New name", "conversion_tracking": True, "interaction_tracking": False})
    off = upd(conn, ws, {"name": "New name", "conversion_tracking": False, "interaction_tracking": False})
    assert off["interaction_tracking"] is False
    with pytest.raises(MktError, match="^Conversion tracking cannot be enabled"):
        upd(conn, ws, {"name": "New name", "conversion_tracking": True})  # omitted: stays disabled


def test_update_rejects_wrong_types_and_missing_members(conn: sqlite3.Connection, workspace: dict) -> None:
    for body, message in [
        ([], "Invalid request body."),
        ({"name": 3, "conversion_tracking": False}, "The member 'name' must be a string."),
        ({"name": "Okay", "conversion_tracking": "yes"}, "The member 'conversion_tracking' must be a boolean."),
        ({"name": "Okay"}, "The member 'conversion_tracking' is required."),
        ({"name": "Okay", "conversion_tracking": False, "interaction_tracking": 1},
         "The member 'interaction_tracking' must be a boolean."),
    ]:
        with pytest.raises(MktError) as err:
            workspaces.update_workspace(conn, workspace["id"], body)
        assert (err.value.status, err.value.message) == (400, message)


def test_unknown_workspace(conn: sqlite3.Connection) -> None:
    with pytest.raises(MktError) as err:
        workspaces.get_workspace_info(conn, 999)
    assert (err.value.status, err.value.message) == (404, "The workspace does not exist.")
    with pytest.raises(MktError) as err:
        workspaces.update_workspace(conn, 999, {"name": "Fine", "conversion_tracking": False})
    assert (err.value.status, err.value.message) == (404, "The workspace does not exist.")


def test_operator_settings_are_atomic(conn: sqlite3.Connection, workspace: dict) -> None:
    ws = workspace["id"]
    result = workspaces.update_operator_settings(conn, ws, sms_markup="1.5", allow_contacts_without_email=True)
    assert result["id"] == ws
    settings = workspaces.get_operator_settings(conn, ws)
    assert settings["sms_markup"] == "1.5" and settings["allow_contacts_without_email"] is True
    with pytest.raises(MktError):
        workspaces.update_operator_settings(conn, ws, sms_markup="2", changes={"name": "x"})
    assert workspaces.get_operator_settings(conn, ws)["sms_markup"] == "1.5"  # nothing written
    for bad in ("0", "-1", "abc", "NaN", "101"):
        with pytest.raises(MktError, match="SMS markup"):
            workspaces.update_operator_settings(conn, ws, sms_markup=bad)

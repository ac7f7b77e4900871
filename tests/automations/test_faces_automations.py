"""Both faces of automations: `mkt automations ...` --json prints exactly the API's data, errors
carry the same message (CONTRACT body; exit 1), and a refused request writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import factories as f


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    return {"ws": ws, "sender": f.verified_sender(conn, ws), "vip": f.tag(conn, ws, "vip"),
            "ann": f.contact(conn, ws, "ann@example.com")["id"]}


def _doc(sender: int) -> dict[str, Any]:
    return {"name": "Welcome", "triggers": [{"type": "manual"}, {"type": "tag_added", "tag": "vip"}],
            "steps": [f.email_step("hello", sender, "w"),
                      {"id": "w", "type": "wait", "duration": {"days": 1}}]}


def test_the_whole_lifecycle_on_both_faces(cli_json: Any, client: Any, auth: dict[str, str],
                                           world: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "welcome.json"
    path.write_text(json.dumps(_doc(world["sender"])))
    created = cli_json("automations", "create", "--file", str(path))
    aid = created["id"]
    assert created["status"] == "DRAFT"
    api = client.post("/v1/automations", headers=auth, json=_doc(world["sender"]))
    assert api.status_code == 201 and api.json()["error"] is None and api.json()["data"]["status"] == "DRAFT"
    assert cli_json("automations", "show", str(aid)) == client.get(f"/v1/automations/{aid}",
                                                                   headers=auth).json()["data"]
    assert cli_json("automations", "list") == client.get("/v1/automations", headers=auth).json()["data"]
    published = cli_json("automations", "publish", str(aid))
    assert published["status"] == "ACTIVE" and published["current_version"] == 1
    assert cli_json("automations", "version", str(aid), "1") == client.get(
        f"/v1/automations/{aid}/versions/1", headers=auth).json()["data"]
    enrolled = client.post(f"/v1/automations/{aid}/enrollments", headers=auth, json={"contact_id": world["ann"]})
    assert enrolled.status_code == 201 and enrolled.json()["data"]["contact_id"] == world["ann"]
    assert cli_json("jobs", "run")["failed"] == 0
    assert cli_json("automations", "enrollments", str(aid)) == client.get(
        f"/v1/automations/{aid}/enrollments", headers=auth).json()["data"]
    stats = cli_json("automations", "stats", str(aid))
    assert stats == client.get(f"/v1/automations/{aid}/statistics", headers=auth).json()["data"]
    assert stats["versions"][0]["steps"][0]["email"]["sent"] == 1
    assert cli_json("automations", "pause", str(aid))["status"] == "PAUSED"
    assert client.post(f"/v1/automations/{aid}/resume", headers=auth).json()["data"]["status"] == "ACTIVE"
    assert cli_json("automations", "archive", str(aid))["status"] == "ARCHIVED"
    assert cli_json("automations", "schema") == client.get("/v1/automations/schema", headers=auth).json()["data"]


def test_enroll_and_backfill_from_the_cli(cli_json: Any, cli: Any, world: dict[str, Any], conn: Any) -> None:
    aid = f.automation(conn, world["ws"], _doc(world["sender"]))["id"]
    entered = cli_json("automations", "enroll", str(aid), "--contact", world["ann"])
    assert entered["status"] == "active"
    f.contact(conn, world["ws"], "bob@example.com")
    assert cli_json("automations", "backfill", str(aid), "--dry-run")["count"] == 1
    refused = cli("automations", "backfill", str(aid), "--json")
    assert refused.exit_code == 1 and "give --yes" in refused.stderr
    assert cli_json("automations", "backfill", str(aid), "--yes")["enrolled"] == 1


@pytest.mark.parametrize(("body", "status", "message"), [
    ([1], 400, "The automation must be a JSON object (docs/automations.md)."),
    ({"name": "x", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "exit"}], "oops": 1},
     400, "Unknown member 'oops'"),
    ({"name": "", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "exit"}]},
     400, "The automation's 'name' is required (a non-empty string)."),
])
def test_bad_input_is_the_same_4xx_on_both_faces_and_writes_nothing(cli: Any, client: Any, auth: dict[str, str],
                                                                    world: dict[str, Any], tmp_path: Path,
                                                                    body: Any, status: int, message: str) -> None:
    response = client.post("/v1/automations", headers=auth, json=body)
    assert f.error_of(response) == (status, message)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(body))
    result = cli("automations", "create", "--file", str(path))
    assert result.exit_code == 1 and message in result.stderr
    assert client.get("/v1/automations", headers=auth).json()["data"] == []


def test_errors_of_the_other_endpoints(client: Any, auth: dict[str, str], world: dict[str, Any]) -> None:
    assert f.error_of(client.get("/v1/automations/12345", headers=auth)) == (
        404, "We could not find the automation you are looking for.")
    assert f.error_of(client.get("/v1/automations/abc", headers=auth))[0] == 404
    assert f.error_of(client.get("/v1/automations?colour=red", headers=auth)) == (
        400, "Unknown query parameter 'colour'")
    assert f.error_of(client.get("/v1/automations?status=LIVE", headers=auth))[0] == 400
    created = client.post("/v1/automations", headers=auth, json={
        "name": "x", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "add_tag", "tag": "gold"}]})
    aid = created.json()["data"]["id"]
    assert f.error_of(client.post(f"/v1/automations/{aid}/publish", headers=auth)) == (
        400, "Step 'a' (steps[0]) names the tag 'gold', which the workspace does not have.")
    assert f.error_of(client.post(f"/v1/automations/{aid}/enrollments", headers=auth,
                                  json={"contact_id": world["ann"]})) == (409, "Only active automations take contacts in.")
    assert f.error_of(client.post(f"/v1/automations/{aid}/enrollments", headers=auth, json={"contact": 1})) == (
        400, "Unknown member 'contact'")
    assert f.error_of(client.get("/v1/automations", headers={}))[0] == 401


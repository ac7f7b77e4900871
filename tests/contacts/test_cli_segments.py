"""`mkt segments create/list/show/members/refresh` and `mkt audience count`: --json prints
the API's data, errors print the API's message and exit 1, a failed command writes nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.factories import ENGAGED


def test_create_show_list_equal_the_api(cli_json: Any, client: Any, auth: dict[str, str],
                                        segment_world: dict[str, Any]) -> None:
    seg = cli_json("segments", "create", "--name", "Engaged", "--filters", json.dumps(ENGAGED))
    assert seg["contact_count"] == 0 and seg["filters"] == ENGAGED
    assert cli_json("segments", "show", str(seg["id"])) == client.get(f"/v1/segments/{seg['id']}",
                                                                      headers=auth).json()["data"] == seg
    assert cli_json("segments", "list") == client.get("/v1/segments", headers=auth).json()["data"] == [seg]


def test_filters_file_members_refresh_and_jobs(cli_json: Any, cli: Any, client: Any, auth: dict[str, str],
                                               segment_world: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "filters.json"
    path.write_text(json.dumps({"condition": "OR", "filters": [
        {"type": "tags", "operator": "contains", "value": [segment_world["vip"]]}]}))
    seg = cli_json("segments", "create", "--name", "VIP", "--filters-file", str(path))
    members = cli_json("segments", "members", str(seg["id"]), "--limit", "10")
    assert members == client.get(f"/v1/segments/{seg['id']}/members?limit=10", headers=auth).json()["data"]
    assert sorted(c["data"]["email_address"] for c in members["contacts"]) == ["a@x.io", "c@x.io"]
    refreshed = cli_json("segments", "refresh", str(seg["id"]))
    assert refreshed["segment_id"] == seg["id"]  # folded into the count queued at creation
    assert cli_json("jobs", "list", "--status", "queued")[0]["id"] == refreshed["job_id"]
    assert cli_json("jobs", "run") == {"processed": 1, "failed": 0}
    assert cli_json("segments", "show", str(seg["id"]))["contact_count"] == 2
    human = cli("segments", "members", str(seg["id"]))
    assert human.exit_code == 0 and "a@x.io" in human.stdout and "2 member(s)" in human.stdout
    human = cli("segments", "show", str(seg["id"]))
    assert human.exit_code == 0 and "VIP" in human.stdout and "tags contains" in human.stdout
    assert "VIP" in cli("segments", "list").stdout
    assert "queued as job" in cli("segments", "refresh", str(seg["id"])).stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--name", "", "--filters", json.dumps(ENGAGED)], "Please provide a name for this segment"),
    (["--name", "x" * 65, "--filters", json.dumps(ENGAGED)], "Segment name must be 64 characters or less"),
    (["--name", "s", "--filters", '{"condition":"AND","filters":[{"type":"open_rate","operator":"gt","value":500}]}'],
     "Filter #1: Value must be between 0 and 100"),
    (["--name", "s"], "Give the filters with exactly one of --filters JSON or --filters-file PATH."),
])
def test_create_errors_exit_1_and_write_nothing(cli: Any, segment_world: dict[str, Any], conn: sqlite3.Connection,
                                                args: list[str], message: str) -> None:
    result = cli("segments", "create", *args, "--json")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip() == message
    assert conn.execute("SELECT COUNT(*) FROM segments").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0


def test_show_errors(cli: Any, segment_world: dict[str, Any]) -> None:
    assert cli("segments", "show", "abc").stderr.strip() == "Please provide a valid segment ID."
    result = cli("segments", "show", "12345")
    assert result.exit_code == 1 and result.stderr.strip() == "We were unable to find the segment."


def test_audience_count(cli_json: Any, cli: Any, client: Any, auth: dict[str, str], segment_world: dict[str, Any]) -> None:
    seg = cli_json("segments", "create", "--name", "Engaged", "--filters", json.dumps(ENGAGED))
    out = cli_json("audience", "count", "--type", "TAGS", "--include-tag", str(segment_world["vip"]),
                   "--exclude-segment", str(seg["id"]))
    api = client.post("/v1/audience/count", headers=auth, json={"channel": "email", "audience": {
        "type": "TAGS", "include_tag_ids": [segment_world["vip"]], "exclude_segment_ids": [seg["id"]]}}).json()["data"]
    assert out == api and out["count"] == 1
    sms = cli_json("audience", "count", "--audience", '{"type":"ENTIRE_AUDIENCE"}', "--channel", "sms")
    assert sms["count"] == 1
    assert cli("audience", "count", "--type", "ENTIRE_AUDIENCE").stdout.strip() == "3 email recipient(s)."
    bad = cli("audience", "count", "--type", "TAGS")
    assert bad.exit_code == 1 and bad.stderr.strip() == "At least one tag is required when audience type is 'TAGS'."
    both = cli("audience", "count", "--type", "TAGS", "--audience", "{}")
    assert both.exit_code == 1 and "not both" in both.stderr
    unparsable = cli("audience", "count", "--audience", "[")
    assert unparsable.exit_code == 2 and unparsable.stderr.startswith("--audience is not valid JSON")


@pytest.mark.parametrize(("args", "message"), [
    (["--filters", "{oops"], ("--filters is not valid JSON: Expecting property name enclosed in double quotes: "
                              "line 1 column 2 (char 1).")),
    (["--filters-file", "/nonexistent/f.json"], "--filters: cannot read /nonexistent/f.json: No such file or directory."),
    (["--filters", '{"condition": NaN}'], "--filters is not valid JSON: NaN is not JSON."),
])
def test_unreadable_filters_are_usage_errors(cli: Any, segment_world: dict[str, Any], conn: sqlite3.Connection,
                                             args: list[str], message: str) -> None:
    result = cli("segments", "create", "--name", "s", *args)
    assert result.exit_code == 2 and result.stderr.strip() == message
    assert conn.execute("SELECT COUNT(*) FROM segments").fetchone()[0] == 0

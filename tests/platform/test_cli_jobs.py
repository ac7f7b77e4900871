"""`mkt jobs run` (CONTRACT: {"processed", "failed"}) and `mkt jobs list`."""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli import jobs


def test_run_and_list(cli_json: Any, cli: Any, conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    assert cli_json("jobs", "run") == {"processed": 0, "failed": 0}
    jobs.enqueue(conn, "test.nobody", {"n": 1}, workspace_id=workspace["id"], max_attempts=1)
    # No handler for the type in this process: the job is left for a runner that has one.
    assert cli_json("jobs", "run", "--lease-seconds", "30") == {"processed": 0, "failed": 0}
    jobs.enqueue(conn, "segment.count", {"segment_id": 999_999}, workspace_id=workspace["id"])
    assert cli_json("jobs", "run") == {"processed": 1, "failed": 0}  # a gone segment: nothing to count
    listed = cli_json("jobs", "list")
    assert [(j["type"], j["status"], j["attempts"], j["payload"], j["last_error"]) for j in listed] == [
        ("segment.count", "done", 1, {"segment_id": 999_999}, None),
        ("test.nobody", "queued", 0, {"n": 1}, None)]
    assert cli_json("jobs", "list", "--status", "done")[0]["type"] == "segment.count"
    assert cli_json("jobs", "list", "--type", "test.nobody", "--limit", "1")[0]["id"] == listed[1]["id"]
    human = cli("jobs", "list")
    assert human.exit_code == 0 and "test.nobody" in human.stdout and "0/1" in human.stdout
    assert cli("jobs", "run").stdout.strip() == "0 job(s) processed, 0 failed."


def test_errors(cli: Any, workspace: dict[str, Any]) -> None:
    result = cli("jobs", "list", "--status", "stuck")
    assert result.exit_code == 1
    assert result.stderr.strip() == "Invalid status 'stuck'. Use queued, running, done or failed."
    assert cli("jobs", "run", "--lease-seconds", "0").exit_code == 2

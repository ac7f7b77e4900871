"""Moving contacts already in a flow to another version, on purpose and logged.

Publishing never moves anyone (flows.py): contacts stay on the version they entered with.
`migrate` (mkt automations migrate, POST /v1/automations/:id/migrate) moves the in-flight
contacts of other versions to version N, step by step:

- a step maps to `map[step]` when given, else to the step of the same id in version N;
- a step with no counterpart is unmapped: its contacts stay on their version (the default,
  `"unmapped": "stay"`) or exit with the reason "migrated: step <id> has no counterpart in
  version N" (`"unmapped": "exit"`).

A moved contact keeps its place in time: one waiting after a wait step keeps its due time
and runs the mapped step then; one inside a wait for an event starts the mapped step now.
`dry_run` answers the same report and changes nothing. A real run writes the report to
`automation_migrations` in the transaction that moves the contacts.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations.flows import automation_row, version_row
from marketing_cli.storage.db import transaction

UNMAPPED = ("stay", "exit")


def _body(body: Any) -> tuple[int, dict[str, str], bool, str]:
    if not isinstance(body, dict):
        raise MktError(400, "The body must be a JSON object with 'to_version'.")
    for key in body:
        if key not in ("to_version", "map", "dry_run", "unmapped"):
            raise MktError(400, f"Unknown member '{key}'")
    to_version = body.get("to_version")
    if isinstance(to_version, bool) or not isinstance(to_version, int) or to_version < 1:
        raise MktError(400, "The member 'to_version' must be a version number (an integer, 1 or more).")
    mapping = body.get("map") or {}
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise MktError(400, "The member 'map' must be an object of step ids: {\"old\": \"new\"}.")
    dry_run = False if body.get("dry_run") is None else body["dry_run"]  # null is left out
    if not isinstance(dry_run, bool):
        raise MktError(400, "The member 'dry_run' must be a boolean.")
    unmapped = body.get("unmapped", "stay") or "stay"
    if unmapped not in UNMAPPED:
        raise MktError(400, "The member 'unmapped' must be 'stay' or 'exit'.")
    return to_version, mapping, dry_run, unmapped


def migrate(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, body: Any) -> dict[str, Any]:
    to_version, mapping, dry_run, unmapped = _body(body)
    with transaction(conn):
        row = automation_row(conn, workspace_id, automation_id)
        target = version_row(conn, row["id"], to_version)
        if target is None:
            raise MktError(404, "We could not find that version of the automation.")
        target_steps = {s["id"] for s in json.loads(target["flow"])["steps"]}
        for old, new in mapping.items():
            if new not in target_steps:
                raise MktError(400, f"The map sends '{old}' to '{new}', which is no step of version {to_version}.")
        groups = conn.execute(
            "SELECT v.version, x.version_id, x.step_id, count(*) AS contacts FROM automation_enrollments x"
            " JOIN automation_versions v ON v.id = x.version_id WHERE x.automation_id = ? AND x.status IN"
            " ('active', 'paused') AND x.version_id != ? GROUP BY v.version, x.version_id, x.step_id"
            " ORDER BY v.version, x.step_id NULLS FIRST",
            (row["id"], target["id"])).fetchall()
        report = []
        for g in groups:
            to_step = mapping.get(g["step_id"], g["step_id"] if g["step_id"] in target_steps else None)
            action = "move" if to_step is not None else unmapped
            report.append({"from_version": g["version"], "step_id": g["step_id"], "contacts": g["contacts"],
                           "to_step": to_step, "action": action})
            if not dry_run and action != "stay":
                _apply(conn, row["id"], g["version_id"], g["step_id"], target["id"], to_step, to_version)
        result = {"automation_id": row["id"], "to_version": to_version, "dry_run": dry_run, "steps": report,
                  "moved": sum(r["contacts"] for r in report if r["action"] == "move"),
                  "exited": sum(r["contacts"] for r in report if r["action"] == "exit"),
                  "stayed": sum(r["contacts"] for r in report if r["action"] == "stay")}
        if not dry_run and report:
            conn.execute("INSERT INTO automation_migrations (automation_id, to_version, report, created_at)"
                         " VALUES (?, ?, ?, ?)", (row["id"], to_version, json.dumps(result), clock.now()))
        return result


def _apply(conn: sqlite3.Connection, automation_id: int, version_id: int, step_id: str | None, target_id: int,
           to_step: str | None, to_version: int) -> None:
    now = clock.now()
    where = "automation_id = ? AND version_id = ? AND step_id IS ? AND status IN ('active', 'paused')"
    params = (automation_id, version_id, step_id)
    if to_step is None:
        conn.execute(f"UPDATE automation_enrollments SET status = 'exited', step_id = NULL, next_run_at = NULL,"
                     f" waiting = 0, exit_reason = ?, updated_at = ? WHERE {where}",
                     (f"migrated: step {step_id} has no counterpart in version {to_version}", now, *params))
        return
    conn.execute(f"UPDATE automation_enrollments SET version_id = ?, step_id = ?, updated_at = ?,"
                 f" next_run_at = CASE WHEN waiting = 1 THEN ? ELSE next_run_at END, waiting = 0,"
                 f" wait_event_type = NULL, wait_matcher = NULL, wait_from_event_id = NULL, wait_next = NULL,"
                 f" wait_timeout_next = NULL WHERE {where}", (target_id, to_step, now, now, *params))

"""Statistics of a flow, per version and step (GET /v1/automations/:id/statistics).

Read from the rows the steps write: enrollments (entered, where they are, how they ended
and why), step runs (how often each step ran, its outcomes, every skip with its reason) and
the email counters of each send step's campaigns (sent, delivered, opened, clicked,
bounced, unsubscribed), which the sender keeps as it does for any campaign, and the SMS
counters of each SMS step's messages (sent, delivered, failed, held by quiet hours,
pending, cost). A step deferred by the frequency cap is counted under `deferred` with its
reason, and not as a run (it runs again later). An erased person's enrollments and step runs
are deleted with them and counted in automation_erased / automation_erased_runs first, so
the numbers here do not change (a running enrollment is counted exited, 'contact erased').
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from marketing_cli.services.automations.flows import automation_row
from marketing_cli.services.automations.sms import step_counters

# Outcomes recorded at a step that did not run it: a wait for an event that timed out, a
# contact the flow's goal took out while it was at the step (triggers._GOAL_RUNS), a send
# deferred by a frequency cap (it runs later).
NOT_RUNS = ("timeout", "goal_reached", "deferred")
_EMAIL = ("recipients", "delivered", "opened", "clicked", "bounced", "unsubscribed", "failed")


def automation_stats(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> dict[str, Any]:
    row = automation_row(conn, workspace_id, automation_id)
    aid = row["id"]
    by_status = dict.fromkeys(("active", "paused", "completed", "exited"), 0)
    exited: dict[str, int] = {}
    for r in conn.execute("SELECT status, exit_reason, count(*) n FROM automation_enrollments WHERE automation_id = ?"
                          " GROUP BY status, exit_reason", (aid,)):
        by_status[r["status"]] += r["n"]
        if r["status"] == "exited":
            exited[r["exit_reason"] or "unknown"] = r["n"]
    goals = conn.execute("SELECT count(*) FROM automation_enrollments WHERE automation_id = ?"
                         " AND goal_reached_at IS NOT NULL", (aid,)).fetchone()[0]
    # erased people's enrollments, counted when they were deleted (services/privacy/erase.py)
    for r in conn.execute("SELECT status, exit_reason, goal_reached, count FROM automation_erased"
                          " WHERE automation_id = ?", (aid,)):
        by_status[r["status"]] += r["count"]
        if r["status"] == "exited":
            reason = r["exit_reason"] or "unknown"
            exited[reason] = exited.get(reason, 0) + r["count"]
        goals += r["count"] if r["goal_reached"] else 0
    versions = []
    for v in conn.execute("SELECT id, version, flow FROM automation_versions WHERE automation_id = ? ORDER BY version",
                          (aid,)).fetchall():
        versions.append({"version": v["version"], "steps": _steps(conn, v["id"], json.loads(v["flow"]))})
    return {
        "automation_id": aid,
        "name": row["name"],
        "entered": sum(by_status.values()),
        **{k: by_status[k] for k in ("active", "paused", "completed")},
        "exited": by_status["exited"],
        "exit_reasons": exited,
        "goals_reached": goals,
        "versions": versions,
    }


def _steps(conn: sqlite3.Connection, version_id: int, flow: dict[str, Any]) -> list[dict[str, Any]]:
    runs: dict[str, dict[str, int]] = {}
    skipped: dict[str, dict[str, int]] = {}
    deferred: dict[str, dict[str, int]] = {}
    for r in conn.execute("SELECT step_id, outcome, detail, count(*) n FROM automation_step_runs WHERE version_id = ?"
                          " GROUP BY step_id, outcome, detail"
                          " UNION ALL SELECT step_id, outcome, detail, count FROM automation_erased_runs"
                          " WHERE version_id = ?", (version_id, version_id)):  # (erased people's runs, counted)
        runs.setdefault(r["step_id"], {})
        runs[r["step_id"]][r["outcome"]] = runs[r["step_id"]].get(r["outcome"], 0) + r["n"]
        if r["outcome"] in ("skipped", "deferred"):
            into = (skipped if r["outcome"] == "skipped" else deferred).setdefault(r["step_id"], {})
            into[r["detail"] or "unknown"] = into.get(r["detail"] or "unknown", 0) + r["n"]
    here = {r[0]: r[1] for r in conn.execute(
        "SELECT step_id, count(*) FROM automation_enrollments WHERE version_id = ? AND status IN ('active', 'paused')"
        " GROUP BY step_id", (version_id,))}
    out = []
    for step in flow["steps"]:
        outcomes = runs.get(step["id"], {})
        entry: dict[str, Any] = {"step_id": step["id"], "type": step["type"],
                                 "runs": sum(n for o, n in outcomes.items() if o not in NOT_RUNS),
                                 "in_step": here.get(step["id"], 0), "outcomes": outcomes,
                                 "skipped": skipped.get(step["id"], {}), "deferred": deferred.get(step["id"], {})}
        if step["type"] == "send_email":
            totals = dict.fromkeys(_EMAIL, 0)
            for r in conn.execute(
                    "SELECT k.* FROM automation_campaigns ac JOIN email_campaign_counters k"
                    " ON k.campaign_id = ac.campaign_id WHERE ac.version_id = ? AND ac.step_id = ?",
                    (version_id, step["id"])):
                for key in _EMAIL:
                    totals[key] += r[key]
            entry["email"] = {"sent": totals.pop("recipients"), **totals}
            # The step's campaigns paused (by the circuit breaker, transport errors, the month's
            # allowance): `mkt campaigns resume ID [--force]` sends their waiting messages.
            entry["paused"] = [{"campaign_id": r[0], "status_detail": r[1]} for r in conn.execute(
                "SELECT c.id, c.status_detail FROM automation_campaigns ac JOIN campaigns c ON c.id = ac.campaign_id"
                " WHERE ac.version_id = ? AND ac.step_id = ? AND c.status = 'PAUSED' ORDER BY c.id",
                (version_id, step["id"]))]
        elif step["type"] == "send_sms":
            entry["sms"] = step_counters(conn, version_id, step["id"])
        out.append(entry)
    return out

"""A flow's goal in the per-step statistics: a contact the goal takes out is counted as
`goal_reached` at the step where it was (the step it was waiting to run, or its wait for
an event), not as a run of that step. Regression: the goal used to show in the flow's
`goals_reached` only, so no step said where contacts converted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.automations import stats, triggers
from marketing_cli.services.contacts import events
from tests import factories as f


def _steps(conn: Any, ws: int, automation_id: int) -> dict[str, dict[str, Any]]:
    [version] = stats.automation_stats(conn, ws, automation_id)["versions"]
    return {s["step_id"]: s for s in version["steps"]}


def test_the_goal_is_counted_at_the_step_where_the_contact_was(conn: Any, workspace: dict[str, Any],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    now = f.FixedClock(datetime(2026, 11, 25, 9, 0, tzinfo=UTC))
    monkeypatch.setattr(clock, "utcnow", now)
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "automations", 5)
    people = {name: f.contact(conn, ws, f"{name}@example.com")["id"] for name in ("ann", "bob", "cat")}
    flow = f.automation(conn, ws, {
        "name": "Goal", "triggers": [{"type": "manual"}], "goal": {"type": "custom_event", "name": "purchase"},
        "steps": [{"id": "listen", "type": "wait_for_event", "event": {"type": "custom_event", "name": "visit"},
                   "timeout": {"days": 1}, "next": "pause", "timeout_next": "pause"},
                  {"id": "pause", "type": "wait", "duration": {"days": 2}, "next": "end"},
                  {"id": "end", "type": "exit"}]})
    for contact_id in people.values():
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact_id})
    f.run_automations(conn)  # all three wait for a visit
    events.track_event(conn, ws, {"email_address": "bob@example.com", "event_name": "visit"})
    f.run_automations(conn)  # Bob goes on: his 2-day wait (he is at "end" when it is up)
    for name in ("ann", "bob"):
        events.track_event(conn, ws, {"email_address": f"{name}@example.com", "event_name": "purchase"})
    f.run_automations(conn)
    f.run_automations(conn)  # read twice: counted once

    steps = _steps(conn, ws, flow["id"])
    assert steps["listen"]["outcomes"] == {"waiting": 3, "goal_reached": 1}  # Ann converted while listening
    assert steps["listen"]["runs"] == 3 and steps["listen"]["in_step"] == 1  # Cat is still listening
    assert steps["end"]["outcomes"] == {"goal_reached": 1} and steps["end"]["runs"] == 0  # Bob, during his wait
    summary = stats.automation_stats(conn, ws, flow["id"])
    assert (summary["goals_reached"], summary["exit_reasons"], summary["active"]) == (2, {"goal": 2}, 1)

    for _ in range(2):  # nothing is left to run for the converted contacts; Cat times out, waits, ends
        now.advance(days=3)
        f.run_automations(conn)
        f.run_automations(conn)
    steps = _steps(conn, ws, flow["id"])
    assert steps["end"]["outcomes"] == {"goal_reached": 1, "exit": 1} and steps["end"]["runs"] == 1
    assert stats.automation_stats(conn, ws, flow["id"])["exit_reasons"] == {"goal": 2, "exit step": 1}

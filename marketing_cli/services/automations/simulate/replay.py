"""The replay: a flow walked from its start for one contact, step by step, without the runner.

Each step goes to its simulator (steps.SIMULATORS; a type without one is listed as not
simulated and the walk follows its `next`). A matching event for the flow's goal between one
step and the next takes the contact out at that time, counted as a conversion, and what the
step would do after it is cut. The walk ends when the contact completes or exits, at
`until` (still in the flow), or after MAX_SIMULATED_STEPS steps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.automations.simulate.steps import SIMULATORS
from marketing_cli.services.automations.simulate.walk import Step, Walk

MAX_SIMULATED_STEPS = 500


def replay(w: Walk) -> tuple[str, str | None]:
    """Walk from the start; ('completed' | 'exited' | 'in flow at the end' ..., the exit reason)."""
    steps = {s["id"]: s for s in w.flow["steps"]}
    at = w.now
    w.add(at, None, "entered", f"version of {len(steps)} step(s), starting at '{w.flow['start']}'")
    current: str | None = w.flow["start"]
    for _ in range(MAX_SIMULATED_STEPS):
        if current is None:
            w.add(at, None, "completed", "no next step: the contact has completed the flow")
            return "completed", None
        step = steps[current]
        result = SIMULATORS.get(step["type"], _fallback)(w, step, at)
        later = result.at if result.at is not None else at
        goal = w.goal_between(at, min(later, w.until))
        if goal is not None:
            w.cut(goal.at)
            w.add(goal.at, None, "goal", "a goal event: the contact exits, counted as a conversion")
            return "exited", "goal"
        if later > w.until:
            w.cut(w.until)
            w.add(w.until, None, "simulation ends", f"still in the flow, next at '{result.next_step}' on "
                                                    f"{clock.format_ts(later)}")
            return "in flow", None
        at = later
        if result.end is not None:
            return result.end, result.reason
        current = result.next_step
    w.add(at, None, "simulation ends", f"stopped after {MAX_SIMULATED_STEPS} steps")
    return "in flow", None


def _fallback(w: Walk, step: dict[str, Any], at: datetime) -> Step:
    """A step type the simulator does not know: listed, and the walk follows its `next`."""
    w.add(at, step, "not simulated", f"the simulator does not know the step type '{step['type']}'")
    return Step(step.get("next"))

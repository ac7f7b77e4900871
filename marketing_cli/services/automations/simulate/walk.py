"""What a simulation walks, and the walk's state.

flow_for gives the flow both tools read (the simulation and test sends): the newest
published version, else the draft checked and resolved as publishing would. A Walk carries
one contact through it: the simulated clock's start and end, the given events, what the
simulated steps did (the tags and fields they set, the messages they sent, the SMS cost),
and the timeline, the answer's lines, each with its UTC time and its local time in the
contact's zone. A Step is what one step's simulator answers (steps.py).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.automations.flows import version_row
from marketing_cli.services.automations.format import check_document
from marketing_cli.services.automations.simulate.events import Event, event_matches

CONTACT_NOT_FOUND = "We couldn't find a contact with that ID."


def flow_for(conn: sqlite3.Connection, workspace_id: int, row: sqlite3.Row) -> tuple[dict[str, Any], int | None]:
    """(the resolved flow, its version): the newest published version, else the draft checked
    and resolved as publishing would (read only: nothing is stored)."""
    from marketing_cli.services.automations import validate

    if row["current_version"]:
        return json.loads(version_row(conn, row["id"], row["current_version"])["flow"]), row["current_version"]
    return validate.resolve(conn, workspace_id, check_document(json.loads(row["draft"]))), None


@dataclass
class Walk:
    conn: sqlite3.Connection
    ws: int
    flow: dict[str, Any]
    contact: sqlite3.Row
    zone: str
    events: list[Event]
    now: datetime
    until: datetime
    tags: dict[int, bool] = field(default_factory=dict)      # tag id -> has it (set by simulated steps)
    fields: dict[int, Any] = field(default_factory=dict)     # field id -> value (set by simulated steps)
    sent: dict[str, list[datetime]] = field(default_factory=dict)  # channel -> simulated send times
    sent_steps: dict[str, datetime] = field(default_factory=dict)  # send step id -> when it was sent
    timeline: list[dict[str, Any]] = field(default_factory=list)
    cost_units: int = 0

    def local(self, moment: datetime) -> str:
        from zoneinfo import ZoneInfo

        return moment.astimezone(ZoneInfo(self.zone)).isoformat(timespec="seconds")

    def add(self, at: datetime, step: dict[str, Any] | None, outcome: str, detail: str | None = None,
            **extra: Any) -> None:
        self.timeline.append({"at": clock.format_ts(at), "local": self.local(at),
                              "step_id": step["id"] if step else None, "type": step["type"] if step else None,
                              "outcome": outcome, "detail": detail, **extra})

    def cut(self, moment: datetime) -> None:
        """Forget what the last step would do after `moment` (a goal came first, or the end)."""
        stamp = clock.format_ts(moment)
        self.timeline = [item for item in self.timeline if item["at"] <= stamp]

    def goal_between(self, start: datetime, end: datetime) -> Event | None:
        goal = self.flow.get("goal")
        if goal is None:
            return None
        return next((e for e in self.events if start < e.at <= end and event_matches(e, goal)), None)


@dataclass
class Step:
    """What a simulated step did: the next step, when (None: now), or the end."""

    next_step: str | None
    at: datetime | None = None
    end: str | None = None          # 'completed' or 'exited'
    reason: str | None = None

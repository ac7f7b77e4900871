"""The `automations.run` job: the event log read into enrollments, then due steps run.

One job (dedupe key `automations.run`) does the whole pass: every workspace's new events
(triggers.py), then due enrollments in bounded batches of steps.CLAIM_BATCH (found through
the partial index on next_run_at of active enrollments), reading the log again after each
batch (a step's tag or field change may enroll the contact elsewhere). After MAX_BATCHES it
hands over to a fresh job, due at once, so one pass never holds a runner for long; when
nothing is due it queues itself for the earliest next_run_at. The scheduler queues it at
the start of every `mkt jobs run` and every 30 s in `mkt serve`, when a flow is active or
a contact is waiting, so new events are read within that time.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.automations import steps, triggers

JOB = triggers.RUN_JOB
MAX_BATCHES = 20


def _queue(conn: sqlite3.Connection, run_at: str | None = None) -> None:
    jobs.enqueue(conn, JOB, {}, dedupe_key=JOB, run_at=run_at)


@jobs.handler(JOB)
def run(conn: sqlite3.Connection, payload: dict[str, Any]) -> dict[str, int]:
    done = {"events": 0, "enrolled": triggers.anniversaries(conn), "steps_due": 0}
    for _ in range(MAX_BATCHES):
        read = triggers.read_all_events(conn)
        done["events"] += read["events"]
        done["enrolled"] += read["enrolled"]
        due = steps.run_due(conn)
        done["steps_due"] += due
        if due < steps.CLAIM_BATCH and not read["events"]:
            break
    else:
        _queue(conn)  # more work: a fresh job, due now
        return done
    triggers.read_all_events(conn)
    upcoming = steps.next_due_at(conn)
    if upcoming is not None:
        _queue(conn, max(upcoming, clock.now()))
    return done


@jobs.scheduler
def schedule(conn: sqlite3.Connection) -> None:
    """Queue a pass when a flow is active or a contact is in one."""
    if conn.execute("SELECT 1 FROM automation_triggers LIMIT 1").fetchone() is not None or \
            steps.next_due_at(conn) is not None:
        _queue(conn)

"""The job a thread is running: its `Run` (the token its claimed rows carry), the lease it
holds (`heartbeat`), and how many jobs send one campaign at once (`send_workers`).

The runner (runner.py) sets both context variables around a handler's call; outside the
queue (tests, direct calls) `current_run()` answers a run of its own.
"""

from __future__ import annotations

import contextvars
import os
import sqlite3
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.jobs.leases import Renewer
from marketing_cli.jobs.queue import DEFAULT_LEASE_SECONDS, new_owner, renew_lease
from marketing_cli.kernel import clock
from marketing_cli.kernel.numbers import parse_digits

# (job id, lease owner, lease seconds, renewer) of the job this thread is running, for heartbeat().
_current: contextvars.ContextVar[tuple[int, str, int, Renewer | None] | None] = contextvars.ContextVar(
    "mkt_job", default=None)
_run: contextvars.ContextVar[Run | None] = contextvars.ContextVar("mkt_job_run", default=None)


class Run:
    """One run of a job (or of a handler called outside the queue): the token its claimed rows
    carry, and how long they stay claimed without renewal.

    A handler that claims rows of its own (a send's messages, services/delivery/sender.py) stamps
    them with `token` and `expires()`, and registers a `keep(fn)` callback: the lease renewer
    calls `fn(conn, token, expires_at)` after each renewal of the job's lease, so rows stay
    claimed exactly as long as the job's lease (a slow provider call does not lose them; a
    killed worker's rows expire within one lease). `held()` is False once the lease may have
    lapsed (a process paused past it): a worker then hands nothing more over.

    `earlier` (a LIKE pattern, None outside the queue) matches the tokens of the same job's
    earlier runs: holding the job's lease now, this run takes their rows over at once (marked
    uncertain), without waiting for their claims to expire: the run that held them died, or
    lost the job's lease and with it the right to record anything (fencing). A worker
    restarted after a crash thus goes on at once, as when a job's start put every row it had
    left in `sending` back in line."""

    def __init__(self, token: str, lease_seconds: int, renewer: Renewer | None = None,
                 job_id: int | None = None) -> None:
        self.token = token
        self.earlier = None if job_id is None else f"%/{int(job_id)}.%"
        self.lease_seconds = lease_seconds
        self.renewer = renewer
        self.keepers: list[Callable[[sqlite3.Connection, str, str], Any]] = []
        self.started = time.monotonic()

    def expires(self) -> str:
        return clock.format_ts(clock.utcnow() + timedelta(seconds=self.lease_seconds))

    def keep(self, fn: Callable[[sqlite3.Connection, str, str], Any]) -> None:
        self.keepers.append(fn)

    def renewed(self, conn: sqlite3.Connection) -> None:
        """After a renewal of the job's lease (the renewer's thread): the rows follow it."""
        until = self.expires()
        for fn in list(self.keepers):
            fn(conn, self.token, until)

    def held(self) -> bool:
        """False when the claim may have expired: the lease was lost, or not renewed for 90 % of it."""
        renewer = self.renewer
        if renewer is None or not renewer.path:
            return True
        if renewer.lost.is_set():
            return False
        last = renewer.last_ok if renewer.last_ok is not None else self.started
        return time.monotonic() - last < self.lease_seconds * 0.9


WORKERS_ENV = "MKT_SEND_WORKERS"
HELPERS_FROM = 1000  # messages waiting, from which a campaign's send calls its helper jobs


def send_workers(conn: sqlite3.Connection) -> int:
    """How many jobs send one campaign at once (the send job and its helpers, services/delivery/
    sender.py and services/sms/expansion.py): MKT_SEND_WORKERS, by default 4 on PostgreSQL
    (workers on several machines) and 1 on SQLite (one writer at a time)."""
    from marketing_cli.storage import dialect

    raw = os.environ.get(WORKERS_ENV, "").strip()
    if not raw:
        return 4 if dialect.postgresql(conn) else 1
    value = parse_digits(raw, 2)
    if value is None or not 1 <= value <= 64:
        raise MktError(500, f"{WORKERS_ENV} must be a whole number from 1 to 64, not '{raw}'.")
    return value


def current_run() -> Run:
    """The run of the job this thread is running; outside the queue, a run of its own (a fresh
    token, never renewed: tests and direct calls finish within the default lease)."""
    run = _run.get()
    return run if run is not None else Run(new_owner(), DEFAULT_LEASE_SECONDS)


def heartbeat(conn: sqlite3.Connection) -> None:
    """For long handlers: renew the current job's lease (call it well within the lease time).

    Raises MktError(409) when the lease was lost (another worker took the job over), so
    the handler stops instead of doing the work twice at once.
    """
    current = _current.get()
    if current is None:
        return
    job_id, owner, lease_seconds, renewer = current
    if renewer is not None and renewer.path:
        lost = renewer.lost.is_set()  # the renewer thread keeps the lease; only ask it
    else:
        lost = not renew_lease(conn, job_id, owner, lease_seconds)
    if lost:
        raise MktError(409, f"Job {job_id} lost its lease to another worker.")

"""Several workers in one runner, fair across workspaces: `mkt serve`'s worker, `mkt jobs run`
(with or without --forever).

One dispatcher (the runner's own thread, on its connection) claims a job whenever one of the
`workers` threads is free and hands it over; each worker thread runs its jobs on a connection of
its own (opened when the thread starts: a thread counts as free only once connected, so no
lease runs while a connection is being opened). Every claim of the runner carries its `share`: a job of a
workspace of which this runner already runs `share` jobs is passed over (queue.claim, counted
from the running leases in the jobs table), so `workers - share` threads are always left to the
other workspaces. A webhook receiver that holds its job for the whole deadline (10 s), a feed
that trickles, a segment count of a million contacts: a workspace with many of them holds at
most `share` workers; another workspace's campaign send is claimed by a free one at once.

Why a share of half the workers by default: a workspace alone may use `share` workers, and
beside a workspace that holds its whole share it still finds `workers - share` of them free, so
a send (with its helper jobs on PostgreSQL) runs on as many workers with a stalled neighbour as
without one when `share <= workers / 2` (bench/bench_fairness.py measures it).

Why threads, not processes: the jobs that hold a worker long wait on the network or on the
database (a dripping receiver costs no CPU; SQLite and psycopg release the GIL while they
work), and a job's lease is kept by a thread of its own already (leases.py). Processes would
add a fork per runner and one more copy of the handlers' caches for what several machines'
`mkt jobs run` already give. Runners on several machines each keep their own share of their
own workers (the count is per lease owner), so a fleet of any size keeps room for every
workspace without knowing its own size. (One bound for the whole fleet would have to be sized
to the fleet, which no runner knows: 2 jobs of a workspace across 6 runners of 4 workers would
leave 22 idle while that workspace's campaign waited.)

Each claim has a lease owner of its own, the runner's followed by `#` and the claim's number:
a job whose lease lapsed (its thread starved past it) and that this runner claims again is
fenced from its first run as from another runner's (complete, fail and renewals check the
owner), and the share counts the leases that begin with the runner's owner.

Why one dispatcher and not N threads that each claim: an idle runner asks the queue once per
`interval`, not N times, and a finished job wakes the dispatcher at once (its follow-up jobs,
a send's helpers, are claimed without waiting for the interval).
"""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.jobs.leases import database_file
from marketing_cli.jobs.queue import claim
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.storage.db import RETIRED, connect, storage_error

log = logging.getLogger("mkt.jobs")

JOB_WORKERS_ENV = "MKT_JOB_WORKERS"
SHARE_ENV = "MKT_JOB_WORKSPACE_SHARE"
DEFAULT_WORKERS = 4
MAX_WORKERS = 64
PASS_HOURS = 1.0  # a pass of `mkt jobs run` (without --forever) claims nothing new after an hour
POLL = 0.2  # seconds: how often a waiting dispatcher looks at its stop event


def _env_number(name: str, high: int) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    value = parse_digits(raw, 2)
    if value is None or not 1 <= value <= high:
        raise MktError(500, f"{name} must be a whole number from 1 to {high}, not '{raw}'.")
    return value


def default_workers() -> int:
    """MKT_JOB_WORKERS, else 4."""
    return _env_number(JOB_WORKERS_ENV, MAX_WORKERS) or DEFAULT_WORKERS


def default_share(workers: int) -> int:
    """MKT_JOB_WORKSPACE_SHARE, else half the workers (at least 1); never more than the workers."""
    share = _env_number(SHARE_ENV, MAX_WORKERS) or max(1, workers // 2)
    return min(share, workers)


def check_environment() -> None:
    """A bad MKT_JOB_WORKERS or MKT_JOB_WORKSPACE_SHARE: MktError before any job runs."""
    default_share(default_workers())


def retired(exc: Exception) -> bool:
    """Whether `exc` is a write refused because `mkt db copy --retire-source` retired the database."""
    mapped = storage_error(exc) if isinstance(exc, sqlite3.DatabaseError) else None
    return mapped is not None and RETIRED in mapped.message


def log_pass_failure(exc: Exception) -> bool:
    """Log a failed pass; True when the worker should stop. A storage fault (a database turned
    read-only under a running server, a full disk) is one line per pass, not a traceback: the
    code is not at fault. A database `mkt db copy --retire-source` retired stops the worker
    (logged once): its jobs belong to the database that took over. Anything else is a bug."""
    mapped = storage_error(exc) if isinstance(exc, sqlite3.DatabaseError) else None
    if mapped is None:
        log.exception("job worker pass failed")
        return False
    if RETIRED in mapped.message:
        log.error("job worker stopped: %s", mapped.message)
        return True
    log.error("job worker pass failed: %s", mapped.message)
    return False


class Pool:
    """`workers` threads running the jobs one dispatcher claims; `run()` is the dispatcher."""

    def __init__(self, conn: sqlite3.Connection, owner: str, *, workers: int, share: int | None,
                 lease_seconds: int, run_job: Callable[[sqlite3.Connection, Any, str, int], bool]) -> None:
        self.conn = conn
        self.run_job = run_job  # runner.run_job: one claimed job, its lease kept alive
        self.owner = owner
        self.path = database_file(conn)
        # An in-memory database has no second connection: its jobs run on the dispatcher's.
        self.workers = workers if self.path else 1
        self.share = share if share is not None and share < self.workers else None
        self.lease_seconds = lease_seconds
        self.totals = {"processed": 0, "failed": 0}
        self._busy = 0
        self._lock = threading.Lock()
        # A free worker, connected: each thread adds itself once its connection is open, so a job is
        # never claimed (its lease running) for a thread still connecting.
        self._free = threading.Semaphore(0 if self.workers > 1 else 1)
        self._unconnected: list[BaseException] = []
        self._finished = threading.Event()
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._claims = 0

    def run(self, stop: threading.Event, *, forever: bool, interval: float,
            schedule: Callable[[], bool]) -> dict[str, int]:
        """Claim and hand out jobs until `stop` is set (forever) or, for one pass, until nothing is
        due and nothing runs; then wait for the jobs running to finish. `schedule()` runs the
        schedulers when their time has come."""
        if self.workers > 1:
            self._threads = [threading.Thread(target=self._work, name=f"mkt-job-{n + 1}", daemon=True)
                             for n in range(self.workers)]
            for thread in self._threads:
                thread.start()
        ends = time.monotonic() + PASS_HOURS * 3600
        try:
            while not stop.is_set():
                schedule()
                if not self._free.acquire(timeout=POLL):
                    if len(self._unconnected) == len(self._threads) > 0:  # no worker could connect
                        raise self._unconnected[0]
                    continue
                with self._lock:
                    idle = self._busy == 0  # read before the claim: a job finishing after it may queue more
                self._finished.clear()
                self._claims += 1
                try:
                    job = claim(self.conn, f"{self.owner}#{self._claims}", self.lease_seconds, share=self.share,
                                runner=f"{self.owner}#")
                except Exception as exc:  # noqa: BLE001 - keep the runner alive; the error is logged
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    job = None
                    if not forever or retired(exc):  # (a retired database: the runner stops, its caller says why)
                        self._free.release()
                        raise
                    log_pass_failure(exc)
                if job is None:
                    self._free.release()
                    if not forever and idle:
                        break
                    self._wait(stop, interval)
                    continue
                with self._lock:
                    self._busy += 1
                    self.totals["processed"] += 1
                if self._threads:
                    self._inbox.put(job)
                else:
                    self._run(self.conn, job)
                if not forever and time.monotonic() > ends:
                    break
        finally:
            for _ in self._threads:
                self._inbox.put(None)
            for thread in self._threads:
                thread.join()
        return self.totals

    def _wait(self, stop: threading.Event, interval: float) -> None:
        """Until a running job finishes (it may have queued more, or freed its workspace's share),
        `interval` passes, or `stop` is set."""
        ends = time.monotonic() + interval
        while not stop.is_set() and (left := ends - time.monotonic()) > 0:
            if self._finished.wait(min(left, POLL)):
                return

    def _run(self, conn: sqlite3.Connection, job: Any) -> None:
        ok = False
        try:
            ok = self.run_job(conn, job, job["lease_owner"], self.lease_seconds)
        except Exception:  # noqa: BLE001 - run_job records a job's failure; this is the database's
            log.exception("job %s (%s): its result could not be recorded", job["id"], job["type"])
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            with self._lock:
                self._busy -= 1
                self.totals["failed"] += not ok
            self._free.release()
            self._finished.set()

    def _work(self) -> None:
        try:
            conn = connect(self.path, upgrade=False)
        except Exception as exc:  # noqa: BLE001 - the runner goes on with the others (none: it stops)
            log.exception("a job worker could not connect to the database")
            self._unconnected.append(exc)
            return
        try:
            self._free.release()
            while (job := self._inbox.get()) is not None:
                self._run(conn, job)
        finally:
            conn.close()

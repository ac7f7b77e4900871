"""Running jobs: one claimed job with its lease kept alive (`run_job`), a pass over what is
due on this thread (`run_due`: tests and direct calls), `mkt jobs run` (`run_pass`), `mkt jobs
run --forever` (`run_forever`) and the worker thread of `mkt serve` (`Worker`); the last three
on several worker threads, fair across workspaces (pool.py).

A job's failure is recorded, not raised: an MktError with a 4xx status fails it at once (the
input is wrong), anything else is retried with backoff (queue.fail). While a handler runs, a
thread of the worker renews the job's lease every third of it (leases.Renewer), together with
the rows the handler claimed (context.Run.keep).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from marketing_cli.errors import MktError
from marketing_cli.jobs.context import Run, _current, _run
from marketing_cli.jobs.leases import Renewer
from marketing_cli.jobs.pool import Pool, default_share, default_workers, log_pass_failure
from marketing_cli.jobs.queue import (
    DEFAULT_LEASE_SECONDS,
    SCHEDULE_INTERVAL,
    claim,
    complete,
    fail,
    new_owner,
    renew_lease,
)
from marketing_cli.jobs.registry import _schedulers, load_handlers
from marketing_cli.kernel import clock
from marketing_cli.storage.db import connect

log = logging.getLogger("mkt.jobs")

def run_job(conn: sqlite3.Connection, job: sqlite3.Row, owner: str,
            lease_seconds: int = DEFAULT_LEASE_SECONDS) -> bool:
    """Run one claimed job; True when it succeeded."""
    fn = load_handlers().get(job["type"])
    run: Run

    def renew(c: sqlite3.Connection) -> bool:
        # The lease and the rows it keeps claimed in one transaction: on SQLite one wait for the
        # write lock, not two (an overloaded machine's long writer made a second wait time out).
        from marketing_cli.storage import dialect

        with dialect.row_claim(c):
            if not renew_lease(c, job["id"], owner, lease_seconds):
                return False
            run.renewed(c)
        return True

    renewer = Renewer(conn, renew, lease_seconds / 3)
    run = Run(f"{owner}/{job['id']}.{job['attempts']}", lease_seconds, renewer, job["id"])
    token = _current.set((job["id"], owner, lease_seconds, renewer))
    run_token = _run.set(run)
    try:
        if fn is None:
            raise MktError(500, f"No handler for job type '{job['type']}'.")
        renewer.start()
        fn(conn, {"id": job["id"], "workspace_id": job["workspace_id"], "attempt": job["attempts"],
                  **json.loads(job["payload"])})
    except Exception as exc:  # noqa: BLE001 - a job's failure is recorded, not raised
        if conn.in_transaction:
            conn.execute("ROLLBACK")  # before stopping the renewer, which may wait for this lock
        renewer.stop()
        permanent = isinstance(exc, MktError) and 400 <= exc.status < 500
        message = exc.message if isinstance(exc, MktError) else f"{type(exc).__name__}: {exc}"
        log.warning("job %s (%s) failed: %s", job["id"], job["type"], message, exc_info=not permanent)
        fail(conn, job["id"], owner, message, permanent=permanent)
        return False
    finally:
        renewer.stop()
        _current.reset(token)
        _run.reset(run_token)
    return complete(conn, job["id"], owner)


def run_schedulers(conn: sqlite3.Connection) -> None:
    load_handlers()
    for fn in _schedulers:
        try:
            fn(conn)
        except Exception:  # noqa: BLE001 - one broken schedule must not stop the queue
            log.exception("scheduler %s failed", getattr(fn, "__name__", fn))


def run_due(conn: sqlite3.Connection, owner: str | None = None, *, limit: int | None = None,
            lease_seconds: int = DEFAULT_LEASE_SECONDS, schedule: bool = True,
            stop: threading.Event | None = None) -> dict[str, int]:
    """Run every job that is due now, once; returns {"processed": n, "failed": m}.

    `stop` (serve's worker) ends the pass between two jobs when set.
    """
    owner = owner or new_owner()
    if schedule:
        run_schedulers(conn)
    processed = failed = 0
    started = clock.utcnow()
    while (limit is None or processed < limit) and not (stop is not None and stop.is_set()):
        job = claim(conn, owner, lease_seconds)
        if job is None:
            break
        # A job that failed and was re-queued for later is not retried in this pass.
        processed += 1
        if not run_job(conn, job, owner, lease_seconds):
            failed += 1
        if clock.utcnow() - started > timedelta(hours=1):
            break
    return {"processed": processed, "failed": failed}


def _schedule_every(conn: sqlite3.Connection, seconds: float) -> Callable[[], bool]:
    """A callable that runs the schedulers when `seconds` have passed since it last did (at once the first time)."""
    last = [float("-inf")]

    def schedule() -> bool:
        if time.monotonic() - last[0] < seconds:
            return False
        last[0] = time.monotonic()
        run_schedulers(conn)
        return True

    return schedule


def run_pass(conn: sqlite3.Connection, owner: str | None = None, *, workers: int | None = None,
             share: int | None = None, lease_seconds: int = DEFAULT_LEASE_SECONDS,
             schedule: bool = True) -> dict[str, int]:
    """`mkt jobs run`: every job due now and every job that becomes due meanwhile, on `workers`
    threads (default MKT_JOB_WORKERS, else 4), each workspace on at most `share` of them (pool.py);
    returns {"processed": n, "failed": m} once nothing is due and nothing runs."""
    workers = workers or default_workers()
    runner = Pool(conn, owner or new_owner(), workers=workers, share=share or default_share(workers),
                  lease_seconds=lease_seconds, run_job=run_job)
    ran = [not schedule]

    def once() -> bool:
        if not ran[0]:
            ran[0] = True
            run_schedulers(conn)
        return False

    return runner.run(threading.Event(), forever=False, interval=0.05, schedule=once)


def run_forever(conn: sqlite3.Connection, owner: str | None = None, *, lease_seconds: int = DEFAULT_LEASE_SECONDS,
                interval: float = 1.0, schedule_interval: float = SCHEDULE_INTERVAL,
                stop: threading.Event | None = None, workers: int | None = None,
                share: int | None = None) -> dict[str, int]:
    """`mkt jobs run --forever` (and serve's Worker): run due jobs on `workers` threads, each
    workspace on at most `share` of them (pool.py), looking at the queue every `interval` s when
    nothing is due, until `stop` is set or SIGTERM / SIGINT arrives (the jobs running then finish
    first); returns the totals. Schedulers run at most every `schedule_interval` s."""
    import signal

    owner = owner or new_owner()
    stop = stop or threading.Event()
    workers = workers or default_workers()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    runner = Pool(conn, owner, workers=workers, share=share or default_share(workers), lease_seconds=lease_seconds,
                  run_job=run_job)
    try:
        return runner.run(stop, forever=True, interval=interval, schedule=_schedule_every(conn, schedule_interval))
    finally:
        for signum, handler_ in previous.items():
            signal.signal(signum, handler_)


class Worker:
    """The background worker of `mkt serve`: a thread that runs `run_forever` on a connection of
    its own, with `workers` threads for the jobs (default MKT_JOB_WORKERS, else 4)."""

    def __init__(self, db_path: str | os.PathLike[str], interval: float = 1.0,
                 schedule_interval: float = SCHEDULE_INTERVAL, lease_seconds: int | None = None,
                 workers: int | None = None, share: int | None = None) -> None:
        self.db_path = db_path
        self.lease_seconds = lease_seconds or DEFAULT_LEASE_SECONDS
        self.interval = interval
        self.schedule_interval = schedule_interval
        self.workers = workers or default_workers()
        self.share = share or default_share(self.workers)
        self.owner = new_owner()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mkt-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        conn = connect(self.db_path, upgrade=False)
        try:
            while not self._stop.is_set():
                try:
                    run_forever(conn, self.owner, lease_seconds=self.lease_seconds, interval=self.interval,
                                schedule_interval=self.schedule_interval, stop=self._stop, workers=self.workers,
                                share=self.share)
                except Exception as exc:  # noqa: BLE001 - keep the worker alive; the error is logged
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    if log_pass_failure(exc):
                        break
                    self._stop.wait(self.interval)
        finally:
            conn.close()

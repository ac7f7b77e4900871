"""The durable job queue: a `jobs` table in the database itself.

    enqueue  ->  queued  --claim-->  running (leased)  --complete-->  done
                   ^                    |  fail, attempts left: back to queued,
                   |                    |  run_at pushed back (exponential backoff)
                   +--------------------+  fail, no attempts left: failed
                   lease expired (the worker died): claimable again

A claim takes a lease (`lease_owner`, `lease_expires_at`) inside one BEGIN IMMEDIATE
transaction, so two workers (serve's thread and a `mkt jobs run` from cron) never run
the same job at once. A worker that dies leaves its lease to expire; the job then runs
again, which is why every handler must be idempotent. `dedupe_key` keeps at most one
queued job per key (a second enqueue returns the queued one).

Handlers register with `@handler("type")` in the service module that owns the work: this
module names no service. The services package lists its modules with handlers
(`marketing_cli.services.JOB_MODULES`) and the faces that run jobs load them
(`services.load_job_handlers()`); modules named in the MKT_JOB_MODULES environment variable
(comma-separated) are loaded here as plugins. A runner claims only jobs of the types it
has a handler for, so a process that lacks one leaves those jobs to a runner that has it.
Schedulers (`@scheduler`) run at the start of a pass (`mkt jobs run`: every time; serve's
worker: at most every SCHEDULE_INTERVAL seconds) and enqueue periodic work (segment
recounts, pruning).

Hardening beyond the diagram:
- `dedupe_key` folds only into a QUEUED twin: a job asked for while its twin is running
  is queued anew, because the running one may have read the data before the change.
- A job whose lease expired after its last allowed attempt is marked failed (its worker
  died every time) instead of being reclaimed forever.
- MktError with a 4xx status is a permanent failure (the input is wrong; running it again
  cannot help): it fails at once, with the message recorded. Anything else is retried
  with exponential backoff (5 s, 10 s, 20 s ... capped at an hour) up to max_attempts.
- A lease is held by a live process: while a handler runs, a thread of the worker renews
  the lease every third of its length (leases.py), however long one step of the handler
  takes, so no job runs twice while its worker lives; a killed worker's job is claimable
  again within one lease (DEFAULT_LEASE_SECONDS). `heartbeat(conn)` tells a handler that
  lost its lease to stop; the lease is checked on complete/fail, so a worker that lost it
  never overwrites the new owner's result.
- Finished jobs are pruned: done after 7 days, failed after 30.
- A job that fails for good (no attempts left, a permanent error, or a worker that died on
  the last attempt) calls its type's `@gave_up` hook in the same transaction that marks it
  failed, so the work it stood for (a campaign in QUEUED or SENDING) never waits forever
  for a job that will not run again. A hook that raises is logged; the job stays failed.
"""

from __future__ import annotations

import contextvars
import importlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.jobs.leases import Renewer
from marketing_cli.kernel import clock
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.storage.db import connect, transaction

log = logging.getLogger("mkt.jobs")

# A killed worker's job is taken over within one lease (CONTRACT section 7 asks for 60 s);
# the lease is renewed every third of it while the worker lives. MKT_JOB_LEASE_SECONDS
# changes the default (a test shortens it; at most 60).
LEASE_ENV = "MKT_JOB_LEASE_SECONDS"


def _lease_default() -> int:
    raw = os.environ.get(LEASE_ENV, "").strip()
    value = parse_digits(raw, 2)
    if value is not None and 1 <= value <= 60:
        return value
    if raw:
        log.warning("%s must be a whole number of seconds from 1 to 60, not '%s': using 30", LEASE_ENV, raw)
    return 30


DEFAULT_LEASE_SECONDS = _lease_default()
MAX_BACKOFF_SECONDS = 3600
SCHEDULE_INTERVAL = 30.0
KEEP_DONE = timedelta(days=7)
KEEP_FAILED = timedelta(days=30)
STATUSES = ("queued", "running", "done", "failed")

Handler = Callable[[sqlite3.Connection, dict[str, Any]], Any]
GaveUp = Callable[[sqlite3.Connection, dict[str, Any], str], Any]
_handlers: dict[str, Handler] = {}
_gave_up: dict[str, GaveUp] = {}
_schedulers: list[Callable[[sqlite3.Connection], Any]] = []
_loaded_plugins = False
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


def handler(job_type: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _handlers[job_type] = fn
        return fn

    return register


def gave_up(job_type: str) -> Callable[[GaveUp], GaveUp]:
    """Register fn(conn, job, error), run inside the transaction that fails a job of that type for good.

    `job` is what the handler got (id, workspace_id, attempt and the payload's members).
    """
    def register(fn: GaveUp) -> GaveUp:
        _gave_up[job_type] = fn
        return fn

    return register


def _call_gave_up(conn: sqlite3.Connection, job: sqlite3.Row, error: str) -> None:
    fn = _gave_up.get(job["type"])
    if fn is None:
        return
    conn.execute("SAVEPOINT gave_up")
    try:
        fn(conn, {"id": job["id"], "workspace_id": job["workspace_id"], "attempt": job["attempts"],
                  **json.loads(job["payload"])}, error)
    except Exception:  # noqa: BLE001 - the job stays failed; the hook's own writes are undone
        conn.execute("ROLLBACK TO gave_up")
        log.exception("the gave-up hook of job %s (%s) failed", job["id"], job["type"])
    conn.execute("RELEASE gave_up")


def scheduler(fn: Callable[[sqlite3.Connection], Any]) -> Callable[[sqlite3.Connection], Any]:
    _schedulers.append(fn)
    return fn


def load_modules(names: list[str] | tuple[str, ...]) -> None:
    """Import modules that register handlers (a missing module is skipped, a broken one raises)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real import error inside the module
                raise


def load_handlers() -> dict[str, Handler]:
    """The registered handlers, after loading the MKT_JOB_MODULES plugins once."""
    global _loaded_plugins
    if not _loaded_plugins:
        load_modules([m.strip() for m in os.environ.get("MKT_JOB_MODULES", "").split(",") if m.strip()])
        _loaded_plugins = True
    return _handlers


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def job_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": row["type"],
        "workspace_id": row["workspace_id"],
        "payload": json.loads(row["payload"]),
        "status": row["status"],
        "attempts": row["attempts"],
        "max_attempts": row["max_attempts"],
        "run_at": row["run_at"],
        "lease_expires_at": row["lease_expires_at"],
        "last_error": row["last_error"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "finished_at": row["finished_at"],
    }


def enqueue(
    conn: sqlite3.Connection,
    job_type: str,
    payload: dict[str, Any] | None = None,
    *,
    workspace_id: int | None = None,
    dedupe_key: str | None = None,
    run_at: str | None = None,
    max_attempts: int = 5,
) -> int:
    """Add a job (joins the caller's transaction); returns its id, or its queued twin's.

    A queued twin (same dedupe_key) is reused, its run_at moved earlier if this one is due
    sooner. A running twin does not count: the new job is queued after it.
    """
    now = clock.now()
    run_at = clock.format_ts(clock.parse_ts(run_at)) if run_at else now
    with transaction(conn):
        if dedupe_key is not None:
            row = conn.execute(
                "SELECT id, run_at FROM jobs WHERE dedupe_key = ? AND status = 'queued'", (dedupe_key,)
            ).fetchone()
            if row is not None:
                if run_at < row["run_at"]:
                    conn.execute("UPDATE jobs SET run_at = ?, updated_at = ? WHERE id = ?", (run_at, now, row["id"]))
                return row["id"]
        return conn.execute(
            "INSERT INTO jobs (workspace_id, type, payload, dedupe_key, max_attempts, run_at, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (workspace_id, job_type, json.dumps(payload or {}), dedupe_key, max_attempts, run_at, now, now),
        ).lastrowid


def drop_queued(conn: sqlite3.Connection, member: str, value: Any, *, keep: tuple[str, ...] = ()) -> int:
    """Remove the queued (not running) jobs whose payload has `member` equal to `value` (a
    campaign's jobs: `drop_queued(conn, "campaign_id", id)`), except those of the types in
    `keep`, in the caller's transaction; returns how many. A running job is left to finish:
    its handler reads the state it acts on (a campaign's status) and does nothing when that
    changed."""
    kept = f" AND type NOT IN ({', '.join('?' * len(keep))})" if keep else ""  # (PostgreSQL has no `IN ()`)
    return conn.execute("DELETE FROM jobs WHERE status = 'queued' AND json_extract(payload, ?) = ?" + kept,
                        (f"$.{member}", value, *keep)).rowcount


def claim(conn: sqlite3.Connection, owner: str, lease_seconds: int = DEFAULT_LEASE_SECONDS,
          types: list[str] | None = None) -> sqlite3.Row | None:
    """Lease the next due job (or one whose lease expired) of the given types (default: the
    types this process has a handler for); None when nothing is due."""
    types = sorted(load_handlers()) if types is None else types
    now = clock.utcnow()
    stamp = clock.format_ts(now)
    with transaction(conn):
        # A worker died holding the lease of the job's last allowed attempt: give up on it.
        for dead in conn.execute(
            "UPDATE jobs SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL, finished_at = ?,"
            " updated_at = ?, last_error = 'The worker running this job stopped before it finished (lease expired'"
            " || ' after attempt ' || attempts || ' of ' || max_attempts || ').'"
            " WHERE status = 'running' AND lease_expires_at < ? AND attempts >= max_attempts RETURNING *",
            (stamp, stamp, stamp),
        ).fetchall():
            _call_gave_up(conn, dead, dead["last_error"])
        row = conn.execute(
            "SELECT id FROM jobs WHERE ((status = 'queued' AND run_at <= ?)"
            " OR (status = 'running' AND lease_expires_at < ?))"
            " AND type IN (SELECT value FROM json_each(?)) ORDER BY run_at, id LIMIT 1",
            (stamp, stamp, json.dumps(types)),
        ).fetchone()
        if row is None:
            return None
        conn.execute(
            "UPDATE jobs SET status = 'running', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1,"
            " updated_at = ? WHERE id = ?",
            (owner, clock.format_ts(now + timedelta(seconds=lease_seconds)), stamp, row["id"]),
        )
        return conn.execute("SELECT * FROM jobs WHERE id = ?", (row["id"],)).fetchone()


def complete(conn: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """Mark the job done; False when this owner no longer holds its lease."""
    now = clock.now()
    with transaction(conn):
        return conn.execute(
            "UPDATE jobs SET status = 'done', lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,"
            " finished_at = ?, updated_at = ? WHERE id = ? AND lease_owner = ? AND status = 'running'",
            (now, now, job_id, owner),
        ).rowcount == 1


def renew_lease(conn: sqlite3.Connection, job_id: int, owner: str, lease_seconds: int = DEFAULT_LEASE_SECONDS) -> bool:
    """Push the lease of a running job forward; False when the lease was lost. One row's
    UPDATE: on PostgreSQL it does not wait for the advisory write lock (dialect.row_claim),
    so a long writer (an SMS expansion) cannot make a live worker's lease lapse."""
    from marketing_cli.storage import dialect

    now = clock.utcnow()
    with dialect.row_claim(conn):
        return conn.execute(
            "UPDATE jobs SET lease_expires_at = ?, updated_at = ? WHERE id = ? AND lease_owner = ?"
            " AND status = 'running'",
            (clock.format_ts(now + timedelta(seconds=lease_seconds)), clock.format_ts(now), job_id, owner),
        ).rowcount == 1


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


def backoff_seconds(attempts: int) -> int:
    return min(MAX_BACKOFF_SECONDS, 5 * 2 ** max(0, attempts - 1))


def fail(conn: sqlite3.Connection, job_id: int, owner: str, error: str, *, permanent: bool = False) -> str:
    """Record the error; retry later with backoff, or give up. Returns the new status.

    `permanent` gives up at once (the input is wrong; another attempt cannot help).
    """
    now = clock.utcnow()
    with transaction(conn):
        row = conn.execute("SELECT * FROM jobs WHERE id = ? AND lease_owner = ? AND status = 'running'",
                           (job_id, owner)).fetchone()
        if row is None:  # the lease was lost to another worker: its result stands
            return "lost"
        status = "queued" if row["attempts"] < row["max_attempts"] and not permanent else "failed"
        superseded = False
        if status == "queued" and row["dedupe_key"] is not None and conn.execute(
            "SELECT 1 FROM jobs WHERE dedupe_key = ? AND status = 'queued'", (row["dedupe_key"],)
        ).fetchone() is not None:
            # A newer twin is already queued and will do the same work: this one ends here.
            status, superseded = "failed", True
            error = f"{error} (a newer queued job with the same key takes over)"
        conn.execute(
            "UPDATE jobs SET status = ?, lease_owner = NULL, lease_expires_at = NULL, last_error = ?, run_at = ?,"
            " updated_at = ?, finished_at = ? WHERE id = ?",
            (
                status,
                error[:2000],
                clock.format_ts(now + timedelta(seconds=backoff_seconds(row["attempts"]))),
                clock.format_ts(now),
                clock.format_ts(now) if status == "failed" else None,
                job_id,
            ),
        )
        if status == "failed" and not superseded:
            _call_gave_up(conn, row, error[:2000])
    return status


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


def run_forever(conn: sqlite3.Connection, owner: str | None = None, *, lease_seconds: int = DEFAULT_LEASE_SECONDS,
                interval: float = 1.0, schedule_interval: float = SCHEDULE_INTERVAL,
                stop: threading.Event | None = None) -> dict[str, int]:
    """`mkt jobs run --forever`: run due jobs, wait `interval` s when none is due, again, until
    `stop` is set or SIGTERM / SIGINT arrives (the job running then finishes first); returns
    the totals. Schedulers run at most every `schedule_interval` s."""
    import signal

    owner = owner or new_owner()
    stop = stop or threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    totals = {"processed": 0, "failed": 0}
    last_schedule = float("-inf")
    try:
        while not stop.is_set():
            schedule = time.monotonic() - last_schedule >= schedule_interval
            if schedule:
                last_schedule = time.monotonic()
            try:
                result = run_due(conn, owner, limit=100, lease_seconds=lease_seconds, schedule=schedule, stop=stop)
            except Exception:  # noqa: BLE001 - keep the worker alive; the error is logged
                log.exception("job worker pass failed")
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                result = {"processed": 0, "failed": 0}
            totals["processed"] += result["processed"]
            totals["failed"] += result["failed"]
            if not result["processed"]:
                stop.wait(interval)
    finally:
        for signum, handler_ in previous.items():
            signal.signal(signum, handler_)
    return totals


def list_jobs(conn: sqlite3.Connection, *, status: str | None = None, job_type: str | None = None,
              limit: int = 50) -> list[dict[str, Any]]:
    """The newest jobs first, optionally of one status and/or type."""
    if status is not None and status not in STATUSES:
        raise MktError(400, f"Invalid status '{status}'. Use queued, running, done or failed.")
    if not 1 <= limit <= 1000:
        raise MktError(400, "The limit must be between 1 and 1000.")
    where, params = [], []
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if job_type is not None:
        where.append("type = ?")
        params.append(job_type)
    sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT ?"
    return [job_view(r) for r in conn.execute(sql, (*params, limit))]


def prune_jobs(conn: sqlite3.Connection, now: datetime | None = None) -> int:
    """Delete done jobs finished over KEEP_DONE ago and failed ones over KEEP_FAILED ago."""
    now = now or clock.utcnow()
    with transaction(conn):
        return conn.execute(
            "DELETE FROM jobs WHERE finished_at IS NOT NULL AND ((status = 'done' AND finished_at < ?)"
            " OR (status = 'failed' AND finished_at < ?))",
            (clock.format_ts(now - KEEP_DONE), clock.format_ts(now - KEEP_FAILED)),
        ).rowcount


scheduler(prune_jobs)


class Worker:
    """The background worker of `mkt serve`: a thread that runs due jobs every `interval` s."""

    def __init__(self, db_path: str | os.PathLike[str], interval: float = 1.0,
                 schedule_interval: float = SCHEDULE_INTERVAL, lease_seconds: int | None = None) -> None:
        self.db_path = db_path
        self.lease_seconds = lease_seconds or DEFAULT_LEASE_SECONDS
        self.interval = interval
        self.schedule_interval = schedule_interval
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
        last_schedule = float("-inf")
        try:
            while not self._stop.is_set():
                try:
                    schedule = time.monotonic() - last_schedule >= self.schedule_interval
                    if schedule:
                        last_schedule = time.monotonic()
                    run_due(conn, self.owner, limit=100, lease_seconds=self.lease_seconds, schedule=schedule,
                            stop=self._stop)
                except Exception:  # noqa: BLE001 - keep the worker alive; the error is logged
                    log.exception("job worker pass failed")
                self._stop.wait(self.interval)
        finally:
            conn.close()

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
pending job per key (a second enqueue returns the first job).

Handlers register with `@handler("type")` in the module that owns the work; the modules
are listed in HANDLER_MODULES and imported on first use. Schedulers (`@scheduler`) run
at the start of every pass and enqueue periodic work (for example segment recounts).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import socket
import sqlite3
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from marketing_cli import clock
from marketing_cli.db import connect, transaction
from marketing_cli.errors import MktError

log = logging.getLogger("mkt.jobs")

HANDLER_MODULES: list[str] = [
    "marketing_cli.services.segments",
]
DEFAULT_LEASE_SECONDS = 300
MAX_BACKOFF_SECONDS = 3600

Handler = Callable[[sqlite3.Connection, dict[str, Any]], Any]
_handlers: dict[str, Handler] = {}
_schedulers: list[Callable[[sqlite3.Connection], Any]] = []
_loaded = False


def handler(job_type: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _handlers[job_type] = fn
        return fn

    return register


def scheduler(fn: Callable[[sqlite3.Connection], Any]) -> Callable[[sqlite3.Connection], Any]:
    _schedulers.append(fn)
    return fn


def load_handlers() -> dict[str, Handler]:
    global _loaded
    if not _loaded:
        for name in HANDLER_MODULES:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != name:  # a real import error inside the module
                    raise
        _loaded = True
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
    """Add a job (joins the caller's transaction); returns its id, or the pending twin's."""
    now = clock.now()
    with transaction(conn):
        if dedupe_key is not None:
            row = conn.execute(
                "SELECT id FROM jobs WHERE dedupe_key = ? AND status IN ('queued', 'running')", (dedupe_key,)
            ).fetchone()
            if row is not None:
                return row["id"]
        return conn.execute(
            "INSERT INTO jobs (workspace_id, type, payload, dedupe_key, max_attempts, run_at, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (workspace_id, job_type, json.dumps(payload or {}), dedupe_key, max_attempts, run_at or now, now, now),
        ).lastrowid


def claim(conn: sqlite3.Connection, owner: str, lease_seconds: int = DEFAULT_LEASE_SECONDS) -> sqlite3.Row | None:
    """Lease the next due job (or one whose lease expired); None when nothing is due."""
    now = clock.utcnow()
    stamp = clock.format_ts(now)
    with transaction(conn):
        row = conn.execute(
            "SELECT id FROM jobs WHERE (status = 'queued' AND run_at <= ?)"
            " OR (status = 'running' AND lease_expires_at < ?) ORDER BY run_at, id LIMIT 1",
            (stamp, stamp),
        ).fetchone()
        if row is None:
            return None
        conn.execute(
            "UPDATE jobs SET status = 'running', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1,"
            " updated_at = ? WHERE id = ?",
            (owner, clock.format_ts(now + timedelta(seconds=lease_seconds)), stamp, row["id"]),
        )
        return conn.execute("SELECT * FROM jobs WHERE id = ?", (row["id"],)).fetchone()


def complete(conn: sqlite3.Connection, job_id: int, owner: str) -> None:
    now = clock.now()
    with transaction(conn):
        conn.execute(
            "UPDATE jobs SET status = 'done', lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,"
            " finished_at = ?, updated_at = ? WHERE id = ? AND lease_owner = ?",
            (now, now, job_id, owner),
        )


def backoff_seconds(attempts: int) -> int:
    return min(MAX_BACKOFF_SECONDS, 5 * 2 ** max(0, attempts - 1))


def fail(conn: sqlite3.Connection, job_id: int, owner: str, error: str) -> str:
    """Record the error; retry later with backoff, or give up. Returns the new status."""
    now = clock.utcnow()
    with transaction(conn):
        row = conn.execute("SELECT attempts, max_attempts FROM jobs WHERE id = ? AND lease_owner = ?",
                           (job_id, owner)).fetchone()
        if row is None:  # the lease was lost to another worker: its result stands
            return "lost"
        status = "queued" if row["attempts"] < row["max_attempts"] else "failed"
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
    return status


def run_job(conn: sqlite3.Connection, job: sqlite3.Row, owner: str) -> bool:
    """Run one claimed job; True when it succeeded."""
    fn = load_handlers().get(job["type"])
    try:
        if fn is None:
            raise MktError(500, f"No handler for job type '{job['type']}'.")
        fn(conn, {"id": job["id"], "workspace_id": job["workspace_id"], **json.loads(job["payload"])})
    except Exception as exc:  # noqa: BLE001 - a job's failure is recorded, not raised
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        message = exc.message if isinstance(exc, MktError) else f"{type(exc).__name__}: {exc}"
        log.warning("job %s (%s) failed: %s", job["id"], job["type"], message)
        fail(conn, job["id"], owner, message)
        return False
    complete(conn, job["id"], owner)
    return True


def run_schedulers(conn: sqlite3.Connection) -> None:
    load_handlers()
    for fn in _schedulers:
        try:
            fn(conn)
        except Exception:  # noqa: BLE001 - one broken schedule must not stop the queue
            log.exception("scheduler %s failed", getattr(fn, "__name__", fn))


def run_due(conn: sqlite3.Connection, owner: str | None = None, *, limit: int | None = None,
            lease_seconds: int = DEFAULT_LEASE_SECONDS) -> dict[str, int]:
    """Run every job that is due now, once; returns {"processed": n, "failed": m}."""
    owner = owner or new_owner()
    run_schedulers(conn)
    processed = failed = 0
    started = clock.utcnow()
    while limit is None or processed < limit:
        job = claim(conn, owner, lease_seconds)
        if job is None:
            break
        # A job that failed and was re-queued for later is not retried in this pass.
        processed += 1
        if not run_job(conn, job, owner):
            failed += 1
        if clock.utcnow() - started > timedelta(hours=1):
            break
    return {"processed": processed, "failed": failed}


def list_jobs(conn: sqlite3.Connection, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    if status is not None and status not in ("queued", "running", "done", "failed"):
        raise MktError(400, f"Invalid status '{status}'. Use queued, running, done or failed.")
    sql = "SELECT * FROM jobs" + (" WHERE status = ?" if status else "") + " ORDER BY id DESC LIMIT ?"
    params: tuple[Any, ...] = (status, limit) if status else (limit,)
    return [job_view(r) for r in conn.execute(sql, params)]


class Worker:
    """The background worker of `mkt serve`: a thread that runs due jobs every `interval` s."""

    def __init__(self, db_path: str | os.PathLike[str], interval: float = 1.0) -> None:
        self.db_path = db_path
        self.interval = interval
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
                    run_due(conn, self.owner, limit=100)
                except Exception:  # noqa: BLE001 - keep the worker alive; the error is logged
                    log.exception("job worker pass failed")
                self._stop.wait(self.interval)
        finally:
            conn.close()

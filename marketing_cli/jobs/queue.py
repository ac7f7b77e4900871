"""The queue itself: the `jobs` table's rows and every statement that moves one between states.

enqueue (joins the caller's transaction), claim (takes a lease in one BEGIN IMMEDIATE
transaction, one statement, within a runner's share of its workers per workspace), complete and fail (only while this owner holds the lease), renew_lease,
drop_queued, list_jobs and prune_jobs (the scheduler that keeps done jobs 7 days and failed
ones 30). The package's docstring (jobs/__init__.py) draws the states.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import uuid
from datetime import datetime, timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.jobs.registry import _call_gave_up, load_handlers, scheduler
from marketing_cli.kernel import clock
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.storage.db import transaction

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
          types: list[str] | None = None, *, share: int | None = None,
          runner: str | None = None) -> sqlite3.Row | None:
    """Lease the next due job (or one whose lease expired) of the given types (default: the
    types this process has a handler for); None when nothing is due.

    `share` (a runner of several workers, pool.py): a job of a workspace of which the runner
    already runs `share` jobs is passed over, so one workspace's slow jobs never hold all of a
    runner's workers; the count is read from the jobs table (the running leases whose owner
    begins with `runner`, default `owner`) in the statement that takes the lease. Jobs of no
    workspace are not counted."""
    types = sorted(load_handlers()) if types is None else types
    now = clock.utcnow()
    stamp = clock.format_ts(now)
    bounded, bound = "", ()
    if share is not None:
        runner = runner or owner
        bounded = (" AND (j.workspace_id IS NULL OR (SELECT count(*) FROM jobs r WHERE r.status = 'running'"
                   " AND substr(r.lease_owner, 1, ?) = ? AND r.workspace_id = j.workspace_id) < ?)")
        bound = (len(runner), runner, share)
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
        # One statement picks the oldest due job (within the share) and leases it. (fetchall: the
        # statement is stepped to its end before the COMMIT.)
        rows = conn.execute(
            "UPDATE jobs SET status = 'running', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1,"
            " updated_at = ? WHERE id = (SELECT j.id FROM jobs j WHERE ((j.status = 'queued' AND j.run_at <= ?)"
            " OR (j.status = 'running' AND j.lease_expires_at < ?))"
            " AND j.type IN (SELECT value FROM json_each(?))" + bounded + " ORDER BY j.run_at, j.id LIMIT 1)"
            " RETURNING *",
            (owner, clock.format_ts(now + timedelta(seconds=lease_seconds)), stamp, stamp, stamp,
             json.dumps(types), *bound),
        ).fetchall()
        return rows[0] if rows else None


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

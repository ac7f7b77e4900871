"""The durable job queue: leases, a worker killed mid-job, retries with backoff, final
failure, dedupe, heartbeat, pruning and serve's worker thread."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.storage import db
from marketing_cli.storage.db import transaction


class FakeClock:
    def __init__(self) -> None:
        self.now = clock.utcnow()

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


@pytest.fixture
def calls() -> Iterator[list[dict[str, Any]]]:
    """Test handlers: test.ok records its call, test.flaky fails, test.bad fails with a 400."""
    seen: list[dict[str, Any]] = []

    def ok(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
        seen.append(job)

    def flaky(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
        seen.append(job)
        raise RuntimeError(f"boom {job['attempt']}")

    def bad(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
        raise MktError(400, "The input is wrong.")

    for name, fn in (("test.ok", ok), ("test.flaky", flaky), ("test.bad", bad)):
        jobs.handler(name)(fn)
    yield seen
    for name in ("test.ok", "test.flaky", "test.bad"):
        jobs._handlers.pop(name, None)


def job(conn: sqlite3.Connection, job_id: int) -> sqlite3.Row:
    return conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


# -- the required crash test ---------------------------------------------------------------

SLOW_HANDLER = '''
import os, time
from marketing_cli import jobs

@jobs.handler("test.slow")
def slow(conn, job):
    with open(job["log"], "a") as f:
        f.write(f"start {job['attempt']} {os.getpid()}\\n")
    if job["attempt"] == 1:
        time.sleep(120)  # the first worker is killed in here
    conn.execute("INSERT INTO effects (job_id) VALUES (?) ON CONFLICT DO NOTHING", (job["id"],))
    with open(job["log"], "a") as f:
        f.write(f"done {job['attempt']}\\n")
'''


def _wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


@pytest.mark.slow
def test_a_job_whose_worker_was_killed_finishes_after_restart(conn: sqlite3.Connection, db_path: Path,
                                                              tmp_path: Path) -> None:
    (tmp_path / "slowjob.py").write_text(SLOW_HANDLER)
    log = tmp_path / "job.log"
    conn.execute("CREATE TABLE effects (job_id INTEGER PRIMARY KEY)")  # the job's idempotent effect
    job_id = jobs.enqueue(conn, "test.slow", {"log": str(log)})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "MKT_JOB_MODULES": "slowjob"}
    command = [sys.executable, "-m", "marketing_cli", "--db", str(db_path), "jobs", "run", "--lease-seconds", "2",
               "--json"]

    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: log.exists() and "start 1" in log.read_text())
        held = job(conn, job_id)
        assert held["status"] == "running" and f":{first.pid}:" in held["lease_owner"]
        first.send_signal(signal.SIGKILL)  # the worker dies in the middle of the job
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == -signal.SIGKILL
    assert job(conn, job_id)["status"] == "running"  # the dead worker's lease still holds it

    # Before the lease expires nobody may take the job over.
    assert jobs.run_due(conn, lease_seconds=2) == {"processed": 0, "failed": 0}
    _wait_for(lambda: job(conn, job_id)["lease_expires_at"] < clock.now(), timeout=5)

    restarted = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert restarted.returncode == 0, restarted.stderr
    assert json.loads(restarted.stdout) == {"processed": 1, "failed": 0}
    done = job(conn, job_id)
    assert (done["status"], done["attempts"], done["lease_owner"], done["last_error"]) == ("done", 2, None, None)
    assert log.read_text().splitlines()[-1] == "done 2"
    assert conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0] == 1


def test_a_restarted_send_takes_its_dead_runs_rows_over_at_once_as_uncertain(conn: sqlite3.Connection,
                                                                            workspace: dict[str, Any]) -> None:
    """A send job taken over after its worker died does not wait for the dead run's row claims
    to expire (they were stamped a full lease from their claim, later than the job's lease):
    the rows of the job's earlier run go again at once, recorded uncertain (the crash rule);
    a claim of another job stays untouched until it expires."""
    from marketing_cli import services
    from marketing_cli.services.email import preparation
    from marketing_cli.services.email import schedule as email_schedule
    from tests import factories

    services.load_job_handlers()
    ws = workspace["id"]
    campaign = factories.sendable_campaign(conn, ws, [f"u{i}@example.org" for i in range(5)])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": campaign["id"]})  # frozen; the send job is queued
    dead = jobs.claim(conn, "deadhost:1:00000000", lease_seconds=30, types=["email.send"])
    assert dead is not None and dead["attempts"] == 1
    ids = [r[0] for r in conn.execute("SELECT id FROM email_messages ORDER BY id")]
    later = clock.format_ts(clock.utcnow() + timedelta(seconds=25))
    with transaction(conn):  # the dead run's round, and one round of a live helper of the campaign
        conn.execute("UPDATE email_messages SET status = 'sending', claim_token = ?, claim_expires_at = ?"
                     " WHERE id IN (?, ?)", (f"deadhost:1:00000000/{dead['id']}.1", later, ids[0], ids[1]))
        conn.execute("UPDATE email_messages SET status = 'sending', claim_token = ?, claim_expires_at = ?"
                     " WHERE id = ?", (f"otherhost:2:11111111/{dead['id'] + 1000}.1", later, ids[2]))
        conn.execute("UPDATE jobs SET lease_expires_at = ? WHERE id = ?",  # the dead worker's lease ran out
                     (clock.format_ts(clock.utcnow() - timedelta(seconds=1)), dead["id"]))
    assert jobs.run_due(conn, schedule=False)["processed"] >= 1
    rows = {r[0]: tuple(r[1:]) for r in conn.execute("SELECT id, status, coalesce(uncertain, 0) FROM email_messages")}
    assert [rows[i] for i in ids] == [("delivered", 1), ("delivered", 1), ("sending", 0), ("delivered", 0),
                                      ("delivered", 0)]
    assert job(conn, dead["id"])["attempts"] == 2
    # The campaign waits for the other worker's claim only: it is SENDING, its job back when that claim expires.
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign["id"],)).fetchone()[0] == "SENDING"


# -- retries, backoff, final failure -------------------------------------------------------

def test_retry_with_backoff_then_final_failure(conn: sqlite3.Connection, fake_clock: FakeClock,
                                               calls: list[dict[str, Any]]) -> None:
    job_id = jobs.enqueue(conn, "test.flaky", {"n": 1}, max_attempts=3)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("queued", 1, "RuntimeError: boom 1")
    assert row["run_at"] == clock.format_ts(fake_clock.now + timedelta(seconds=5))
    assert row["lease_owner"] is None and row["finished_at"] is None

    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}  # not due yet
    fake_clock.advance(5)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("queued", 2, "RuntimeError: boom 2")
    assert row["run_at"] == clock.format_ts(fake_clock.now + timedelta(seconds=10))  # doubled

    fake_clock.advance(9)
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}
    fake_clock.advance(1)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 3, "RuntimeError: boom 3")
    assert row["finished_at"] == clock.format_ts(fake_clock.now)
    fake_clock.advance(3600)
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}  # never again
    assert [c["attempt"] for c in calls] == [1, 2, 3] and calls[0]["n"] == 1


def test_backoff_grows_and_is_capped() -> None:
    assert [jobs.backoff_seconds(n) for n in (1, 2, 3, 4)] == [5, 10, 20, 40]
    assert jobs.backoff_seconds(30) == jobs.MAX_BACKOFF_SECONDS


def test_a_4xx_error_fails_at_once(conn: sqlite3.Connection, calls: list[dict[str, Any]]) -> None:
    job_id = jobs.enqueue(conn, "test.bad")
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 1, "The input is wrong.")


def test_a_runner_without_the_handler_leaves_the_job_queued(conn: sqlite3.Connection) -> None:
    job_id = jobs.enqueue(conn, "test.nobody", max_attempts=1)
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["lease_owner"]) == ("queued", 0, None)
    jobs.handler("test.nobody")(lambda c, j: None)  # a runner that has it takes it
    try:
        assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    finally:
        jobs._handlers.pop("test.nobody")
    assert job(conn, job_id)["status"] == "done"


def test_handler_writes_are_rolled_back_on_failure(conn: sqlite3.Connection) -> None:
    from marketing_cli.storage.db import transaction

    conn.execute("CREATE TABLE effects (n INTEGER)")

    def half(c: sqlite3.Connection, j: dict[str, Any]) -> None:
        with transaction(c):
            c.execute("INSERT INTO effects VALUES (1)")
            raise RuntimeError("half way")

    jobs.handler("test.half")(half)
    try:
        jobs.enqueue(conn, "test.half")
        assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    finally:
        jobs._handlers.pop("test.half")
    assert conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0] == 0


# -- leases --------------------------------------------------------------------------------

def test_a_lease_is_exclusive_until_it_expires(conn: sqlite3.Connection, fake_clock: FakeClock,
                                               calls: list[dict[str, Any]]) -> None:
    job_id = jobs.enqueue(conn, "test.ok")
    first = jobs.claim(conn, "A", lease_seconds=10)
    assert first["id"] == job_id and first["attempts"] == 1
    assert jobs.claim(conn, "B", lease_seconds=10) is None
    fake_clock.advance(11)
    second = jobs.claim(conn, "B", lease_seconds=10)
    assert second["id"] == job_id and second["attempts"] == 2 and second["lease_owner"] == "B"
    # The first owner woke up late: its result must not overwrite B's.
    assert jobs.complete(conn, job_id, "A") is False
    assert jobs.fail(conn, job_id, "A", "late") == "lost"
    assert jobs.renew_lease(conn, job_id, "A") is False
    assert job(conn, job_id)["status"] == "running"
    assert jobs.complete(conn, job_id, "B") is True
    assert job(conn, job_id)["status"] == "done"


def test_a_job_whose_worker_died_on_every_attempt_fails(conn: sqlite3.Connection, fake_clock: FakeClock,
                                                       calls: list[dict[str, Any]]) -> None:
    job_id = jobs.enqueue(conn, "test.ok", max_attempts=2)
    jobs.claim(conn, "A", lease_seconds=5)
    fake_clock.advance(6)
    jobs.claim(conn, "B", lease_seconds=5)
    fake_clock.advance(6)
    assert jobs.claim(conn, "C", lease_seconds=5) is None
    row = job(conn, job_id)
    assert row["status"] == "failed" and row["lease_owner"] is None
    assert row["last_error"] == ("The worker running this job stopped before it finished"
                                 " (lease expired after attempt 2 of 2).")


def test_heartbeat_stops_a_handler_that_lost_its_lease(conn: sqlite3.Connection) -> None:
    def long(c: sqlite3.Connection, j: dict[str, Any]) -> None:
        jobs.heartbeat(c)  # still ours
        with transaction(c):
            c.execute("UPDATE jobs SET lease_owner = 'thief' WHERE id = ?", (j["id"],))
        time.sleep(0.5)  # the renewer (every third of the 1 s lease) finds the lease gone
        jobs.heartbeat(c)
        raise AssertionError("heartbeat should have stopped the handler")

    jobs.handler("test.long")(long)
    try:
        job_id = jobs.enqueue(conn, "test.long")
        assert jobs.run_due(conn, lease_seconds=1) == {"processed": 1, "failed": 1}
    finally:
        jobs._handlers.pop("test.long")
    assert job(conn, job_id)["status"] == "running"  # the thief's now; the loser recorded nothing
    assert job(conn, job_id)["last_error"] is None
    jobs.heartbeat(conn)  # outside a job: nothing to do


# -- dedupe ---------------------------------------------------------------------------------

def test_dedupe_folds_into_the_queued_twin_only(conn: sqlite3.Connection, fake_clock: FakeClock,
                                                calls: list[dict[str, Any]]) -> None:
    later = clock.format_ts(fake_clock.now + timedelta(minutes=5))
    first = jobs.enqueue(conn, "test.ok", dedupe_key="k", run_at=later)
    assert jobs.enqueue(conn, "test.ok", dedupe_key="k", run_at=clock.format_ts(fake_clock.now + timedelta(hours=1))) == first
    assert job(conn, first)["run_at"] == later
    assert jobs.enqueue(conn, "test.ok", dedupe_key="k") == first  # due now: the twin moves earlier
    assert job(conn, first)["run_at"] == clock.format_ts(fake_clock.now)
    assert jobs.claim(conn, "A")["id"] == first
    # The twin is running (it may have read stale data): a new request queues a new job.
    second = jobs.enqueue(conn, "test.ok", dedupe_key="k")
    assert second != first
    # If the running one fails now, the queued twin takes over instead of a second retry.
    assert jobs.fail(conn, first, "A", "RuntimeError: x") == "failed"
    assert job(conn, first)["last_error"] == "RuntimeError: x (a newer queued job with the same key takes over)"
    assert job(conn, second)["status"] == "queued"


def test_enqueue_joins_the_callers_transaction(conn: sqlite3.Connection) -> None:
    from marketing_cli.storage.db import transaction

    with pytest.raises(RuntimeError), transaction(conn):
        jobs.enqueue(conn, "test.ok")
        raise RuntimeError("the operation failed")
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0


# -- listing, pruning, the worker -----------------------------------------------------------

def test_list_jobs_filters_and_messages(conn: sqlite3.Connection, calls: list[dict[str, Any]]) -> None:
    jobs.enqueue(conn, "test.ok")
    jobs.enqueue(conn, "test.bad")
    jobs.run_due(conn)
    jobs.enqueue(conn, "test.ok")
    assert [(j["type"], j["status"]) for j in jobs.list_jobs(conn)] == [
        ("test.ok", "queued"), ("test.bad", "failed"), ("test.ok", "done")]
    assert [j["type"] for j in jobs.list_jobs(conn, status="failed")] == ["test.bad"]
    assert [j["status"] for j in jobs.list_jobs(conn, job_type="test.ok")] == ["queued", "done"]
    assert len(jobs.list_jobs(conn, limit=1)) == 1
    with pytest.raises(MktError, match="^Invalid status 'x'. Use queued, running, done or failed.$"):
        jobs.list_jobs(conn, status="x")
    with pytest.raises(MktError, match="^The limit must be between 1 and 1000.$"):
        jobs.list_jobs(conn, limit=0)


def test_prune_keeps_recent_and_pending_jobs(conn: sqlite3.Connection, fake_clock: FakeClock,
                                             calls: list[dict[str, Any]]) -> None:
    jobs.enqueue(conn, "test.ok")
    jobs.enqueue(conn, "test.bad")
    jobs.run_due(conn)
    pending = jobs.enqueue(conn, "test.ok", run_at=clock.format_ts(fake_clock.now + timedelta(days=60)))
    fake_clock.advance(8 * 86400)
    assert jobs.prune_jobs(conn) == 1  # the done one; the failed one is kept 30 days
    fake_clock.advance(23 * 86400)
    assert jobs.prune_jobs(conn) == 1
    assert [j["id"] for j in jobs.list_jobs(conn)] == [pending]


def test_serve_worker_runs_due_jobs_and_stops(conn: sqlite3.Connection, db_path: Path,
                                              calls: list[dict[str, Any]]) -> None:
    job_id = jobs.enqueue(conn, "test.ok", {"x": 1})
    worker = jobs.Worker(db_path, interval=0.05)
    worker.start()
    try:
        _wait_for(lambda: job(conn, job_id)["status"] == "done", timeout=10)
    finally:
        worker.stop()
    assert not worker._thread.is_alive()
    assert calls[0]["x"] == 1


# -- leases renewed while the worker lives (issue 8, item 7) ---------------------------------

LONG_HANDLER = '''
import os, time
from marketing_cli import jobs

@jobs.handler("test.long")
def long(conn, job):
    with open(job["log"], "a") as f:
        f.write(f"{job['id']} {os.getpid()}\\n")
    time.sleep(1.6)  # longer than the 1 s lease, with no heartbeat call of its own
'''


@pytest.mark.slow
def test_jobs_longer_than_their_lease_run_exactly_once(conn: sqlite3.Connection, db_path: Path,
                                                     tmp_path: Path) -> None:
    """Two `mkt jobs run --lease-seconds 1` processes share six 1.6 s jobs: the lease is
    renewed while each job runs, so none is taken over by the other process (before the
    renewal 5 of 6 ran twice)."""
    (tmp_path / "longjob.py").write_text(LONG_HANDLER)
    log = tmp_path / "runs.log"
    ids = [jobs.enqueue(conn, "test.long", {"log": str(log)}) for _ in range(6)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "MKT_JOB_MODULES": "longjob"}
    command = [sys.executable, "-m", "marketing_cli", "--db", str(db_path), "jobs", "run", "--lease-seconds", "1",
               "--json"]
    workers = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        results.append(json.loads(out))
    runs = [line.split()[0] for line in log.read_text().splitlines()]
    assert sorted(runs) == sorted(str(i) for i in ids)  # each job ran exactly once
    assert sum(r["processed"] for r in results) == 6 and all(r["failed"] == 0 for r in results)
    rows = conn.execute("SELECT status, attempts FROM jobs ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [("done", 1)] * 6


def test_a_segment_count_longer_than_its_lease_keeps_it(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The segment.count handler itself: while its count runs past the lease, nobody else
    can claim the job."""
    from marketing_cli import services
    from marketing_cli.services.contacts import segment_filters, segments
    from marketing_cli.storage.db import connect

    services.load_job_handlers()
    segments.create_segment(conn, workspace["id"], {"name": "all", "filters": {
        "condition": "AND", "filters": [{"type": "open_rate", "operator": "gte", "value": 0}]}})
    counted = segment_filters.count_matching
    other = connect(db_path_of(conn), upgrade=False)
    stolen: list[Any] = []

    def slow_count(c: sqlite3.Connection, ws: int, filters: Any) -> int:
        time.sleep(0.6)  # past the 0.5 s lease
        stolen.append(jobs.claim(other, "thief", lease_seconds=1))
        return counted(c, ws, filters)

    monkeypatch.setattr(segments, "count_matching", slow_count)
    try:
        assert jobs.run_due(conn, lease_seconds=0.5, schedule=False) == {"processed": 1, "failed": 0}
    finally:
        other.close()
    assert stolen == [None]
    assert conn.execute("SELECT status, attempts FROM jobs").fetchone()[:] == ("done", 1)


def db_path_of(conn: sqlite3.Connection) -> Any:
    from marketing_cli.jobs.leases import database_file

    return database_file(conn)  # the file, or the PostgreSQL URL


@pytest.fixture
def gave_up() -> Iterator[list[tuple[dict[str, Any], str]]]:
    """Gave-up hooks for the test handlers: each records (job, error) and writes a row of its own."""
    seen: list[tuple[dict[str, Any], str]] = []

    def record(conn: sqlite3.Connection, job: dict[str, Any], error: str) -> None:
        conn.execute("INSERT INTO instance_secrets (name, value) VALUES (?, ?)", (f"gave-up-{job['id']}", b"\0"))
        seen.append((job, error))

    def broken(conn: sqlite3.Connection, job: dict[str, Any], error: str) -> None:
        conn.execute("INSERT INTO instance_secrets (name, value) VALUES ('broken', ?)", (b"\0",))
        raise RuntimeError("hook failed")

    def wrong(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
        raise MktError(400, "Wrong.")

    for name in ("test.ok", "test.flaky", "test.bad"):
        jobs.gave_up(name)(record)
    jobs.gave_up("test.broken")(broken)
    jobs.handler("test.broken")(wrong)
    yield seen
    for name in ("test.ok", "test.flaky", "test.bad", "test.broken"):
        jobs._gave_up.pop(name, None)
    jobs._handlers.pop("test.broken", None)


def _marked(conn: sqlite3.Connection, job_id: int) -> bool:
    return conn.execute("SELECT 1 FROM instance_secrets WHERE name = ?", (f"gave-up-{job_id}",)).fetchone() is not None


def test_gave_up_runs_once_when_the_last_attempt_fails(conn: sqlite3.Connection, fake_clock: FakeClock,
                                                       calls: list[dict[str, Any]],
                                                       gave_up: list[tuple[dict[str, Any], str]]) -> None:
    job_id = jobs.enqueue(conn, "test.flaky", {"n": 7}, max_attempts=2)
    jobs.run_due(conn)
    assert gave_up == [] and not _marked(conn, job_id)  # a retry is still to come
    fake_clock.advance(5)
    jobs.run_due(conn)
    assert [(j["id"], j["n"], e) for j, e in gave_up] == [(job_id, 7, "RuntimeError: boom 2")]
    assert _marked(conn, job_id)  # written in the transaction that failed the job


def test_gave_up_runs_on_a_permanent_error_and_on_a_dead_last_worker(
        conn: sqlite3.Connection, fake_clock: FakeClock, calls: list[dict[str, Any]],
        gave_up: list[tuple[dict[str, Any], str]]) -> None:
    bad = jobs.enqueue(conn, "test.bad")
    jobs.run_due(conn)
    dead = jobs.enqueue(conn, "test.ok", max_attempts=1)
    jobs.claim(conn, "A", lease_seconds=5)
    fake_clock.advance(6)
    assert jobs.claim(conn, "B", lease_seconds=5) is None
    assert [(j["id"], e) for j, e in gave_up] == [
        (bad, "The input is wrong."),
        (dead, "The worker running this job stopped before it finished (lease expired after attempt 1 of 1).")]
    assert _marked(conn, bad) and _marked(conn, dead)


def test_a_superseded_job_does_not_give_up(conn: sqlite3.Connection, fake_clock: FakeClock,
                                           calls: list[dict[str, Any]],
                                           gave_up: list[tuple[dict[str, Any], str]]) -> None:
    first = jobs.enqueue(conn, "test.flaky", dedupe_key="k")
    claimed = jobs.claim(conn, "A")
    jobs.enqueue(conn, "test.flaky", dedupe_key="k")  # queued while the first runs
    assert jobs.fail(conn, claimed["id"], "A", "boom") == "failed"
    assert claimed["id"] == first and gave_up == []


def test_a_failing_hook_leaves_the_job_failed_and_writes_nothing(
        conn: sqlite3.Connection, gave_up: list[tuple[dict[str, Any], str]]) -> None:
    job_id = jobs.enqueue(conn, "test.broken")
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    assert job(conn, job_id)["status"] == "failed"
    assert conn.execute("SELECT 1 FROM instance_secrets WHERE name = 'broken'").fetchone() is None


@pytest.mark.sqlite_only  # SQLite's single writer: a renewal waits for the lock
def test_a_renewal_that_waits_out_a_held_lock_logs_one_line(db_path: Any, conn: Any,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """A writer holding the lock past RENEW_BUSY_MS (a large import's batch under load) is
    expected: the failed renewal is one warning line, no traceback, and the next one holds."""
    from marketing_cli.jobs import leases

    monkeypatch.setattr(leases, "RENEW_BUSY_MS", 50)
    renewed = threading.Event()

    def renew(own: Any) -> bool:
        with db.transaction(own):
            own.execute("UPDATE jobs SET attempts = attempts WHERE id = -1")
        renewed.set()
        return True

    holder = db.connect(db_path)
    holder.execute("BEGIN IMMEDIATE")
    with caplog.at_level(logging.WARNING, logger="mkt.leases"), leases.Renewer(conn, renew, 0.1):
        time.sleep(0.5)
        assert not renewed.is_set()
        holder.execute("ROLLBACK")
        assert renewed.wait(5)
    holder.close()
    failed = [r for r in caplog.records if "lease renewal failed" in r.getMessage()]
    assert failed and all(not r.exc_info and "locked" in r.getMessage() for r in failed)

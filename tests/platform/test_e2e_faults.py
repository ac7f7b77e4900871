"""Concurrency and crash faults with real processes (docs/reliability.md, "Faults and concurrency").

- 50 parallel upserts of one email, and of one phone number, against a real `mkt serve`;
- a CLI import of 200,000 rows while `mkt serve` takes writes over HTTP;
- SIGKILL of `mkt jobs run` mid segment count and mid SMS expansion, and of `mkt serve`
  (its worker) mid SMS expansion, then a restart that finishes every job exactly once;
- two `mkt serve` processes and `mkt jobs run` beside them draining one queue.

On both engines: a SQLite file, or a PostgreSQL database (`--engine postgresql`; the world of
50,000 contacts is built once and copied for each test, CREATE DATABASE ... TEMPLATE).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from marketing_cli.kernel import clock
from tests.conftest import Server, mkt

pytestmark = pytest.mark.slow

LOCKED = "database is locked"
WORLD_CONTACTS = 50_000
SMS_TEXT = "Hi {{contact.first_name}}, our sale starts today. Reply STOP to opt out."
US_PRICE = Decimal("0.00830")  # the default rate for US numbers (GET /v1/sms-rates)
TOP_UP = Decimal("1000")


def spawn(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "marketing_cli", "--db", str(db), *args],
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def read(db: Path | str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows of a query, as tuples, on a connection of its own (sqlite3's on a file)."""
    if isinstance(db, Path):
        conn: Any = sqlite3.connect(db, timeout=30)
    else:
        from marketing_cli.storage.db import connect

        conn = connect(db, upgrade=False)
    try:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def one(db: Path, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return read(db, sql, params)[0][0]


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)  # reaps it and closes its pipes
    assert proc.returncode == -signal.SIGKILL


def integrity_ok(db: Path | str) -> None:
    """SQLite's integrity and foreign key checks of the file (PostgreSQL checks foreign keys as
    it writes, and a killed client cannot leave its pages half-written)."""
    if isinstance(db, Path):
        assert read(db, "PRAGMA integrity_check") == [("ok",)]
        assert read(db, "PRAGMA foreign_key_check") == []


def percentiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return f"n={len(ordered)} p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms, max {ordered[-1] * 1000:.1f} ms"


def field_id(db: Path, merge_tag: str) -> int:
    return next(f["id"] for f in mkt(db, "fields", "list") if f["merge_tag"] == merge_tag)


def new_workspace(db: Path, contacts: int = 1_000_000) -> str:
    key = mkt(db, "init", "--name", "Faults")["api_key"]
    mkt(db, "billing", "allowance", "set", "contacts", str(contacts))
    return key


# --- 1. 50 parallel upserts of one identity -------------------------------------------------

def _hammer(server: Server, key: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """Send every body at once (one thread each, released together by a barrier)."""
    barrier = threading.Barrier(len(bodies))
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=60,
                      limits=limits) as client:
        def send(body: dict[str, Any]) -> httpx.Response:
            barrier.wait()
            return client.post("/v1/contacts/upsert", json=body)

        with ThreadPoolExecutor(len(bodies)) as pool:
            return list(pool.map(send, bodies))


def test_fifty_parallel_upserts_of_one_email_and_of_one_phone_make_one_contact_each(
        new_db: Callable[..., Any]) -> None:
    db = new_db("upserts.db")
    key = new_workspace(db)
    mkt(db, "fields", "create", "--label", "Phone", "--merge-tag", "phone_number", "--type", "TEXT",
        "--default-region", "US")
    mkt(db, "workspace", "update", "--allow-contacts-without-email")
    server = Server(db)
    try:
        started = time.perf_counter()
        by_email = _hammer(server, key, [{"email_address": "Same@Example.org", "fields": {"first_name": f"N{i}"},
                                          "partial_update": i % 2 == 0} for i in range(50)])
        email_seconds = time.perf_counter() - started
        # One number written six ways: every spelling resolves to the same E.164 number.
        spellings = ["+14155550123", "+1 415 555 0123", "(415) 555-0123", "415.555.0123", "+1-415-555-0123",
                     "1 415 555 0123"]
        started = time.perf_counter()
        by_phone = _hammer(server, key, [{"phone_number": spellings[i % len(spellings)],
                                          "fields": {"last_name": f"L{i}"}} for i in range(50)])
        phone_seconds = time.perf_counter() - started
    finally:
        assert server.stop() == 0
    log = server.output()
    print(f"\n50 parallel upserts: one email {email_seconds:.2f} s, one phone number {phone_seconds:.2f} s")
    for answers in (by_email, by_phone):
        assert [r.status_code for r in answers] == [200] * 50, [r.text for r in answers if r.status_code != 200]
        assert len({r.json()["data"]["id"] for r in answers}) == 1
    assert LOCKED not in log and "Traceback" not in log
    assert read(db, "SELECT COUNT(*) FROM contacts WHERE email = 'same@example.org'") == [(1,)]
    assert read(db, "SELECT COUNT(*), MIN(email) FROM contacts WHERE phone = '+14155550123'") == [(1, None)]
    assert one(db, "SELECT COUNT(*) FROM contacts") == 2
    # The contact holds the first name one of the writers gave (stored by field id).
    data = json.loads(one(db, "SELECT data FROM contacts WHERE email = 'same@example.org'"))
    assert len(set(data.values()) & {f"N{i}" for i in range(50)}) == 1
    integrity_ok(db)


# --- 2. a 200,000-row CLI import while the server takes writes --------------------------------

IMPORT_ROWS = 200_000


def test_a_cli_import_of_200k_rows_while_the_server_takes_writes(tmp_path: Path, new_db: Callable[..., Any]) -> None:
    db = new_db("import.db")
    key = new_workspace(db)
    csv_file = tmp_path / "big.csv"
    with csv_file.open("w") as out:
        out.write("email,first_name,last_name\n")
        out.writelines(f"row{i}@import.example,First{i},Last{i}\n" for i in range(IMPORT_ROWS))
    server = Server(db)
    answers: list[tuple[int, float, float, str]] = []  # (status, sent at, seconds, body of a non-2xx answer)
    written: dict[str, str] = {}  # email -> the last first_name the API was told
    done = threading.Event()

    def writer() -> None:
        with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
            i = 0
            while not done.is_set():
                # A new contact, then an update of one written before (partial_update) and a tag change.
                email = f"api{i}@api.example"
                bodies = [{"email_address": email, "fields": {"first_name": f"New{i}"}}]
                if i >= 1:
                    older = f"api{i // 2}@api.example"
                    bodies.append({"email_address": older, "fields": {"first_name": f"Changed{i}"},
                                   "partial_update": True})
                for body in bodies:
                    started = time.perf_counter()
                    r = client.post("/v1/contacts/upsert", json=body)
                    answers.append((r.status_code, started, time.perf_counter() - started,
                                    "" if r.is_success else r.text))
                    if r.is_success:
                        written[body["email_address"]] = body["fields"]["first_name"]
                i += 1

    try:
        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(0.3)  # the writer is under way before the import starts
        import_started = time.perf_counter()
        try:
            importer = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), "contacts", "import",
                                       str(csv_file), "--json"], capture_output=True, text=True, timeout=600)
        finally:
            import_ended = time.perf_counter()
            time.sleep(0.3)
            done.set()
            thread.join(120)
    finally:
        assert server.stop() == 0
    log = server.output()
    import_seconds = import_ended - import_started
    during = [seconds for _, sent, seconds, _ in answers if import_started <= sent and sent + seconds <= import_ended]
    print(f"\n{IMPORT_ROWS:,}-row CLI import beside `mkt serve`: {import_seconds:.1f} s "
          f"({IMPORT_ROWS / import_seconds:,.0f} rows/s); API writes meanwhile: {percentiles(during)}")
    assert importer.returncode == 0, importer.stderr
    summary = json.loads(importer.stdout)
    assert (summary["rows"], summary["created"], summary["errors"]) == (IMPORT_ROWS, IMPORT_ROWS, [])
    assert LOCKED not in importer.stderr and LOCKED not in log and "Traceback" not in log
    failed = [(status, body) for status, _, _, body in answers if not 200 <= status < 300]
    assert failed == []
    assert len(during) >= 20, "the writer must have written during the import"
    assert one(db, "SELECT COUNT(*) FROM contacts WHERE email LIKE '%@import.example'") == IMPORT_ROWS
    first_name = f'$."{field_id(db, "first_name")}"'  # data holds values by field id
    assert one(db, "SELECT COUNT(*) FROM contacts WHERE email LIKE '%@import.example'"
                   " AND json_extract(data, ?) = 'First' || substr(email, 4, instr(email, '@') - 4)",
               (first_name,)) == IMPORT_ROWS
    stored = dict(read(db, "SELECT email, json_extract(data, ?) FROM contacts WHERE email LIKE '%@api.example'",
                       (first_name,)))
    assert stored == written  # every API write present, with its last value
    integrity_ok(db)


# --- 3. SIGKILL mid-job, then a restart --------------------------------------------------------

@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[Path | str]:
    """A database of 50,000 contacts with US phone numbers, a balance of $1,000 and a sender ID,
    built once; every test copies it."""
    folder = tmp_path_factory.mktemp("world")
    db: Path | str = folder / "world.db" if postgres_server is None else postgres_server.fresh()
    new_workspace(db)
    mkt(db, "fields", "create", "--label", "Phone", "--merge-tag", "phone_number", "--type", "TEXT")
    csv_file = folder / "people.csv"
    with csv_file.open("w") as out:
        out.write("email,first_name,phone_number\n")
        out.writelines(f"p{i}@example.org,Name{i},+1415{2_000_000 + i}\n" for i in range(WORLD_CONTACTS))
    assert mkt(db, "contacts", "import", str(csv_file))["created"] == WORLD_CONTACTS
    mkt(db, "sms", "balance", "add", str(TOP_UP))
    mkt(db, "sms", "sender-id", "set", "ACME")
    if isinstance(db, Path):
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    yield db
    if postgres_server is not None:
        postgres_server.drop(db)


@pytest.fixture
def world_copy(world: Path | str, tmp_path: Path, postgres_server: Any) -> Iterator[Path | str]:
    if postgres_server is None:
        db = tmp_path / "copy.db"
        shutil.copyfile(world, db)
        yield db
        return
    url = postgres_server.copy(world)
    yield url
    postgres_server.drop(url)


def test_sigkill_of_jobs_run_mid_segment_count_then_restart(world_copy: Path) -> None:
    db = world_copy
    first_name = field_id(db, "first_name")
    # 50 filters over every contact: each count reads all 50,000 rows (about 0.7 s here).
    filters = {"condition": "AND", "filters": [
        {"type": "field", "field_id": first_name, "operator": "not_in", "value": [f"zz{i}-{j}" for j in range(20)]}
        for i in range(50)]}
    segments = [mkt(db, "segments", "create", "--name", f"Everyone {n}", "--filters", json.dumps(filters))["id"]
                for n in range(3)]
    runner = spawn(db, "jobs", "run", "--lease-seconds", "2", "--json")
    wait_for(lambda: one(db, "SELECT COUNT(*) FROM jobs WHERE type = 'segment.count' AND status = 'running'"),
             30, "a count to start")
    kill(runner)
    # (The runner's workers run up to 2 counts of one workspace at once: its share of 4 workers.)
    killed = read(db, "SELECT id, attempts FROM jobs WHERE status = 'running'")
    assert 1 <= len(killed) <= 2 and {k[1] for k in killed} == {1}, "the kill must land mid-count"
    integrity_ok(db)
    time.sleep(2.2)  # the dead runner's lease (2 s) runs out
    restarted = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run", "--json"],
                               capture_output=True, text=True, timeout=120)
    assert restarted.returncode == 0, restarted.stderr
    statuses = read(db, "SELECT status, COUNT(*) FROM jobs WHERE type = 'segment.count' GROUP BY status")
    assert statuses == [("done", 3)]
    assert [one(db, "SELECT attempts FROM jobs WHERE id = ?", (k[0],)) for k in killed] == [2] * len(killed)
    counts = read(db, f"SELECT contact_count FROM segments WHERE id IN ({', '.join('?' * 3)})", tuple(segments))
    assert counts == [(WORLD_CONTACTS,)] * 3
    integrity_ok(db)


def _queue_sms_campaign(db: Path) -> str:
    campaign = mkt(db, "sms", "create", "Big send")["id"]
    mkt(db, "sms", "update", campaign, "--message", SMS_TEXT, "--audience", '{"type": "ENTIRE_AUDIENCE"}')
    assert mkt(db, "sms", "schedule", campaign, "--now")["status"] == "QUEUED"
    return campaign


def _charges_so_far(db: Path) -> int:
    return one(db, "SELECT COUNT(*) FROM sms_ledger WHERE kind = 'charge'")


def _assert_sms_campaign_reconciles(db: Path, campaign: str) -> None:
    """COMPLETED; one message per recipient, each handed over once; ledger = messages, to the cent."""
    integrity_ok(db)
    assert one(db, "SELECT status FROM sms_campaigns WHERE id = ?", (campaign,)) == "COMPLETED"
    assert read(db, "SELECT COUNT(*), COUNT(DISTINCT contact_id) FROM sms_messages WHERE campaign_id = ?",
                (campaign,)) == [(WORLD_CONTACTS, WORLD_CONTACTS)]
    assert read(db, "SELECT status, COUNT(*) FROM sms_messages GROUP BY status") == [("sent", WORLD_CONTACTS)]
    assert read(db, "SELECT COUNT(*), COUNT(DISTINCT message_id) FROM sms_outbox") == [(WORLD_CONTACTS,
                                                                                      WORLD_CONTACTS)]
    charges = [Decimal(a) for (a,) in read(db, "SELECT amount FROM sms_ledger WHERE kind = 'charge'"
                                               " AND campaign_id = ?", (campaign,))]
    billed = Decimal(one(db, "SELECT SUM(price_units) FROM sms_messages WHERE campaign_id = ?",
                         (campaign,))).scaleb(-5)
    assert -sum(charges, Decimal(0)) == billed == US_PRICE * WORLD_CONTACTS
    # One charge per batch: a batch re-run after the kill charged nothing again.
    assert len(charges) == one(db, "SELECT COUNT(DISTINCT batch) FROM sms_messages WHERE campaign_id = ?",
                               (campaign,))
    assert one(db, "SELECT COUNT(*) FROM sms_ledger WHERE kind = 'refund'") == 0
    balance = mkt(db, "sms", "balance", "show")["balance"]
    assert Decimal(balance) == TOP_UP - billed


SLOW_SMS = {"MKT_SMS_BATCH_SIZE": "1000", "MKT_SMS_BATCH_PAUSE": "0.04"}  # 50 batches: a kill lands mid-way


def test_sigkill_of_jobs_run_mid_sms_expansion_then_restart(world_copy: Path) -> None:
    db = world_copy
    campaign = _queue_sms_campaign(db)
    runner = spawn(db, "jobs", "run", "--lease-seconds", "2", "--json", env=SLOW_SMS)
    wait_for(lambda: _charges_so_far(db) >= 10, 60, "ten batches to be charged")
    kill(runner)
    written = one(db, "SELECT COUNT(*) FROM sms_messages")
    assert 0 < written < WORLD_CONTACTS, "the kill must land mid-expansion"
    assert one(db, "SELECT expanded_at FROM sms_campaigns") is None
    integrity_ok(db)
    time.sleep(2.2)  # the dead runner's lease (2 s) runs out
    started = time.perf_counter()
    restarted = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run", "--json"],
                               capture_output=True, text=True, timeout=120)
    print(f"\nkilled after {written:,} of {WORLD_CONTACTS:,} messages; the restart finished in "
          f"{time.perf_counter() - started:.1f} s")
    assert restarted.returncode == 0, restarted.stderr
    # The expansion, and its helpers (jobs.send_workers - 1: by default 3 on PostgreSQL, none on
    # SQLite), which the restarted job queued once it was expanded: each ran once.
    from marketing_cli import jobs
    from marketing_cli.storage.db import connect

    conn = connect(db, upgrade=False)
    try:
        helpers = jobs.send_workers(conn) - 1
    finally:
        conn.close()
    assert json.loads(restarted.stdout) == {"processed": 1 + helpers, "failed": 0}
    assert read(db, "SELECT status, attempts FROM jobs WHERE type = 'sms.expand'") == [("done", 2)]
    assert read(db, "SELECT status, attempts, COUNT(*) FROM jobs WHERE type = 'sms.send_helper'"
                    " GROUP BY status, attempts") == ([("done", 1, helpers)] if helpers else [])
    _assert_sms_campaign_reconciles(db, campaign)


def test_sigkill_of_mkt_serve_mid_sms_expansion_then_a_new_server_finishes(world_copy: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db = world_copy
    for name, value in SLOW_SMS.items():
        monkeypatch.setenv(name, value)
    campaign = _queue_sms_campaign(db)
    first = Server(db, "--lease-seconds", "2")
    try:
        wait_for(lambda: _charges_so_far(db) >= 10, 60, "ten batches to be charged")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
    finally:
        first.stop()
    assert first.proc.returncode == -signal.SIGKILL
    # The dead server's worker held the job on a 2 s lease (`--lease-seconds`), renewed while it lived.
    [(status, attempts, expires, updated)] = read(db, "SELECT status, attempts, lease_expires_at, updated_at"
                                                      " FROM jobs WHERE type = 'sms.expand'")
    lease = (clock.parse_ts(expires) - clock.parse_ts(updated)).total_seconds()
    assert (status, attempts) == ("running", 1) and 1.9 < lease < 2.1
    written = one(db, "SELECT COUNT(*) FROM sms_messages")
    assert 0 < written < WORLD_CONTACTS, "the kill must land mid-expansion"
    integrity_ok(db)
    second = Server(db, "--lease-seconds", "2")
    try:
        started = time.perf_counter()
        wait_for(lambda: one(db, "SELECT status FROM sms_campaigns WHERE id = ?", (campaign,)) == "COMPLETED",
                 90, "the new server to complete the campaign")
        print(f"\nserve killed after {written:,} of {WORLD_CONTACTS:,} messages; a new server finished in "
              f"{time.perf_counter() - started:.1f} s (including the 2 s lease)")
        wait_for(lambda: one(db, "SELECT status FROM jobs WHERE type = 'sms.expand'") == "done", 10,
                 "the job to be marked done")
    finally:
        assert second.stop() == 0
    assert "Traceback" not in second.output()
    assert read(db, "SELECT status, attempts FROM jobs WHERE type = 'sms.expand'") == [("done", 2)]
    _assert_sms_campaign_reconciles(db, campaign)


# --- 4. two servers and `mkt jobs run` on one queue --------------------------------------------

TRACE_HANDLER = '''
"""A job that leaves one row per run (on purpose not idempotent), so a second run shows."""
import os
import time

from marketing_cli import jobs


@jobs.handler("faults.trace")
def trace(conn, job):
    conn.execute("INSERT INTO job_runs (job_id, pid, attempt) VALUES (?, ?, ?)",
                 (job["id"], os.getpid(), job["attempt"]))
    time.sleep(0.02)  # a job long enough that the three runners overlap
'''
TRACED_JOBS = 300


@pytest.fixture
def trace_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / "faults_trace.py").write_text(TRACE_HANDLER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MKT_JOB_MODULES", "faults_trace")
    yield


def test_two_servers_and_jobs_run_on_one_database_never_run_a_job_twice(new_db: Callable[..., Any],
                                                                        trace_plugin: None) -> None:
    from marketing_cli import jobs
    from marketing_cli.storage.db import connect, transaction

    db = new_db("queue.db")
    new_workspace(db)
    conn = connect(db)
    conn.execute("CREATE TABLE job_runs (job_id INTEGER NOT NULL, pid INTEGER NOT NULL, attempt INTEGER NOT NULL)")
    # One worker thread each (--workers 1): with 4 each, the two servers drained the 300 jobs before
    # `mkt jobs run`'s process had started. (Several threads of one runner: test_jobs_fairness.py.)
    servers = [Server(db, "--workers", "1"), Server(db, "--workers", "1")]
    runners: list[subprocess.Popen[str]] = []
    try:
        with transaction(conn):  # all at once, while the three runners are polling
            ids = [jobs.enqueue(conn, "faults.trace", {"n": n}) for n in range(TRACED_JOBS)]
        started = time.perf_counter()

        def drained() -> bool:
            if not runners or runners[-1].poll() is not None:
                runners.append(spawn(db, "jobs", "run", "--json"))
            return one(db, "SELECT COUNT(*) FROM jobs WHERE type = 'faults.trace' AND status = 'done'") == TRACED_JOBS
        wait_for(drained, 120, "the queue to drain")
        seconds = time.perf_counter() - started
    finally:
        for runner in runners:
            out, err = runner.communicate(timeout=60)
            assert runner.returncode == 0, err
        codes = [server.stop() for server in servers]
        conn.close()
    assert codes == [0, 0]
    runs = read(db, "SELECT job_id, COUNT(*), MIN(attempt) FROM job_runs GROUP BY job_id")
    assert sorted(job_id for job_id, _, _ in runs) == ids
    assert [(n, attempt) for _, n, attempt in runs if (n, attempt) != (1, 1)] == []  # each ran once, first try
    assert read(db, "SELECT status, COUNT(*), MAX(attempts) FROM jobs WHERE type = 'faults.trace' GROUP BY status") \
        == [("done", TRACED_JOBS, 1)]
    by_process = dict(read(db, "SELECT pid, COUNT(*) FROM job_runs GROUP BY pid"))
    server_pids = {server.proc.pid for server in servers}
    print(f"\n{TRACED_JOBS} jobs drained in {seconds:.1f} s by {len(by_process)} processes: "
          f"servers {[by_process.get(pid, 0) for pid in server_pids]}, "
          f"`mkt jobs run` {sum(n for pid, n in by_process.items() if pid not in server_pids)}")
    assert server_pids <= set(by_process), "both servers' workers must have taken jobs"
    assert set(by_process) - server_pids, "`mkt jobs run` must have taken jobs"
    for server in servers:
        assert "Traceback" not in server.output() and LOCKED not in server.output()
    integrity_ok(db)

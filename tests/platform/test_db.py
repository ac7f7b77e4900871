"""The database layer: schema steps, upgrades in place, WAL, transactions, concurrent writers."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from marketing_cli.services.account import keys
from marketing_cli.storage import db


@pytest.mark.sqlite_only  # the file's PRAGMAs and user_version (PostgreSQL's: tests/platform/test_engines.py)
def test_new_database_gets_every_step(db_path: Path) -> None:
    conn = db.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.latest_version()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == db.BUSY_TIMEOUT_MS
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"workspaces", "api_keys", "contacts", "segments", "jobs", "sms_rates"} <= tables


def test_schema_steps_are_numbered_in_order() -> None:
    versions = [v for v, _ in db.schema_steps()]
    assert versions == list(range(1, len(versions) + 1))
    assert len(versions) >= 3


@pytest.mark.sqlite_only  # the file's PRAGMAs and user_version (PostgreSQL's: tests/platform/test_engines.py)
def test_upgrade_in_place_keeps_data(db_path: Path) -> None:
    """A file made by version 1 of the schema is upgraded on open and keeps its rows."""
    old = db.connect(db_path, upgrade=False)
    db.migrate(old, target=1)
    assert old.execute("PRAGMA user_version").fetchone()[0] == 1
    assert old.execute("SELECT name FROM sqlite_master WHERE name = 'contacts'").fetchone() is None
    # What version-1 code wrote: a workspace, its fields, a subscription and a key.
    old.execute("INSERT INTO workspaces (name, created_at) VALUES ('Before upgrade', '2026-01-01T00:00:00.000Z')")
    old.execute("INSERT INTO fields (workspace_id, label, merge_tag, type, created_at, updated_at)"
                " VALUES (1, 'First name', 'first_name', 'TEXT', 'x', 'x')")
    old.execute("INSERT INTO subscriptions (workspace_id, plan_id, status, current_period_start)"
                " VALUES (1, 1, 'active', 'x')")
    created = {"workspace": {"id": 1}, "api_key": keys.create_key(old, 1, "old")["key"]}
    old.close()

    conn = db.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.latest_version()
    assert conn.execute("SELECT name FROM workspaces").fetchone()[0] == "Before upgrade"
    assert keys.authenticate(conn, f"Bearer {created['api_key']}") == created["workspace"]["id"]
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'contacts_field_1'").fetchone() is not None
    # The upgraded tables work, triggers included: a contact counts toward usage.
    conn.execute(
        "INSERT INTO contacts (id, workspace_id, email, status, created_at, updated_at)"
        " VALUES ('0123456789abcdef01234567', 1, 'a@example.com', 'SUBSCRIBED', 'now', 'now')"
    )
    used = conn.execute("SELECT used FROM usage_counters WHERE resource = 'contacts'").fetchone()[0]
    assert used == 1


def test_migrating_twice_is_harmless(db_path: Path) -> None:
    db.connect(db_path).close()
    conn = db.connect(db_path)
    try:
        assert db.migrate(conn) == db.latest_version()
    finally:
        conn.close()


def test_transaction_rolls_back_on_error(conn: sqlite3.Connection) -> None:
    with pytest.raises(RuntimeError):
        with db.transaction(conn):
            conn.execute("INSERT INTO workspaces (name, created_at) VALUES ('x', 'now')")
            raise RuntimeError("boom")
    assert conn.execute("SELECT count(*) FROM workspaces").fetchone()[0] == 0
    assert not conn.in_transaction


def test_nested_transaction_joins_outer(conn: sqlite3.Connection) -> None:
    with pytest.raises(RuntimeError):
        with db.transaction(conn):
            with db.transaction(conn):
                conn.execute("INSERT INTO workspaces (name, created_at) VALUES ('x', 'now')")
            raise RuntimeError("outer fails")
    assert conn.execute("SELECT count(*) FROM workspaces").fetchone()[0] == 0


def test_split_statements_keeps_triggers_whole() -> None:
    sql = "CREATE TABLE t (a);\n-- note\nCREATE TRIGGER x AFTER INSERT ON t BEGIN\n  SELECT 1;\n  SELECT 2;\nEND;\n"
    statements = db.split_statements(sql)
    assert len(statements) == 2
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")


def test_concurrent_writers_lose_nothing(db_path: Path, workspace: dict) -> None:
    """Threads with their own connections write at once: no 'database is locked', no lost rows."""
    errors: list[BaseException] = []

    def write(n: int) -> None:
        conn = db.connect(db_path)
        try:
            for i in range(40):
                keys.create_key(conn, workspace["id"], f"t{n}-{i}")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    conn = db.connect(db_path)
    try:
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 1 + 4 * 40
    finally:
        conn.close()


def test_cli_process_writes_while_another_holds_the_write_lock(db_path: Path, workspace: dict) -> None:
    """A CLI command waits for a writer in another connection instead of failing."""
    holder = db.connect(db_path)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE workspaces SET name = 'held' WHERE id = ?", (workspace["id"],))
    proc = subprocess.Popen(
        [sys.executable, "-m", "marketing_cli", "--db", str(db_path), "keys", "create", "--name", "waiting", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    threading.Event().wait(0.8)  # the CLI is now blocked on the lock
    holder.execute("COMMIT")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "waiting" in out
    assert holder.execute("SELECT name FROM workspaces").fetchone()[0] == "held"
    holder.close()


def test_unusable_files_are_clear_errors(tmp_path: Path) -> None:
    from marketing_cli.errors import MktError

    not_db = tmp_path / "notes.txt"
    not_db.write_text("not a database at all, just some text that fills the header page" * 20)
    cases = [(tmp_path, "it is a directory"), (not_db, "file is not a database")]
    for path, reason in cases:
        with pytest.raises(MktError) as err:
            db.connect(path)
        assert err.value.message == f"Cannot open the database {path}: {reason}."


@pytest.mark.sqlite_only  # the file's PRAGMAs and user_version (PostgreSQL's: tests/platform/test_engines.py)
def test_a_newer_schema_is_refused(db_path: Path) -> None:
    from marketing_cli.errors import MktError

    conn = db.connect(db_path)
    conn.execute(f"PRAGMA user_version = {db.latest_version() + 1}")
    conn.close()
    with pytest.raises(MktError, match="newer than this mkt knows"):
        db.connect(db_path)


def test_cli_reports_an_unusable_database(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(tmp_path), "workspace", "show"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == f"Cannot open the database {tmp_path}: it is a directory."
    assert "Traceback" not in out.stderr


@pytest.mark.sqlite_only  # on PostgreSQL close() ends every session: a server keeps no session open after a stop
def test_close_leaves_a_busy_threads_sqlite_connection_to_its_thread(db_path: Path) -> None:
    """A stopping server interrupts a request's SQL and closes the Database at once; the request's
    thread is still unwinding on its connection. Closing a sqlite3 connection under it crashed the
    process (SIGSEGV, seen in CI). close() closes its own thread's connection and leaves the busy one."""
    database = db.Database(db_path)
    mine = database.conn()
    started, closed, seen = threading.Event(), threading.Event(), []

    def long_query() -> None:
        theirs = database.conn()
        theirs.set_progress_handler(lambda: started.set() or 0, 1000)  # the statement is running
        try:
            theirs.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c").fetchone()
        except sqlite3.OperationalError as e:
            seen.append(str(e))
        theirs.set_progress_handler(None, 0)
        closed.wait(10)
        seen.append(theirs.execute("SELECT 1").fetchone()[0])  # still open: close() left it alone

    thread = threading.Thread(target=long_query)
    thread.start()
    started.wait(10)
    database.interrupt_all()
    database.close()
    closed.set()
    thread.join(10)
    assert seen == ["interrupted", 1]
    with pytest.raises(sqlite3.ProgrammingError):
        mine.execute("SELECT 1")  # the calling thread's own connection is closed
    database.close()  # the thread has ended: its connection is closed now
    assert database._own == []


def test_a_closed_database_lends_connections_again(db_path: Path) -> None:
    """An app whose lifespan ran twice (two TestClients, a restarted server in one process): after
    close() the next borrow opens what it needs. On PostgreSQL a closed psycopg pool cannot be
    reopened: the dashboard answered 503 "the pool 'mkt' is already closed" on the second run."""
    database = db.Database(db_path)
    try:
        for _ in range(2):
            with database.borrow() as conn:
                assert conn.execute("SELECT 1").fetchone()[0] == 1
            database.close()
    finally:
        database.close()

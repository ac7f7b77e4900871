"""`mkt db copy` from a live source, and `--retire-source` (marketing_cli/storage/copy/retire.py;
docs/deploy.md "Moving to PostgreSQL"), on both engines.

A source is live when a worker holds an unexpired job lease, or (SQLite) its file was written
in the last minute, or (PostgreSQL) another session used it in the last minute: the copy
refuses without --force. A retired source refuses every write, whichever process makes it
(a server already running on it included), with a message naming the database that took
over; reads go on; `mkt serve` will not start on it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.account import workspaces
from marketing_cli.services.contacts import tags
from marketing_cli.storage import db
from tests.conftest import Server, free_port
from tests.factories import error_of

RETIRED = re.compile(r"This database was retired by `mkt db copy` on \S+Z: its data is now in (.+)\. Use that "
                     r"database \(--db or MKT_DB\); this one refuses every write\.")


def _age(db_path: Any, seconds: int = 120) -> None:
    """The SQLite file (and its -wal) as if last written `seconds` ago; nothing on PostgreSQL."""
    if isinstance(db_path, Path):
        then = time.time() - seconds
        for path in (db_path, Path(f"{db_path}-wal")):
            if path.exists():
                os.utime(path, (then, then))


def _world(db_path: Any) -> dict[str, Any]:
    """A workspace with a tag `vip`, last written two minutes ago, no connection left open."""
    conn = db.connect(db_path)
    try:
        created = workspaces.create_workspace(conn, "Moving")
        tags.create_tag(conn, created["workspace"]["id"], {"name": "vip"})
    finally:
        conn.close()
    _age(db_path)
    return {"id": created["workspace"]["id"], "key": created["api_key"]}


def _copy(db_path: Any, target: Path, *extra: str, scope: tuple[str, ...] = ("--all",)) -> Any:
    from typer.testing import CliRunner

    from marketing_cli.cli.main import app

    return CliRunner().invoke(app, ["--db", str(db_path), "db", "copy", "--to", str(target), *scope, "--yes",
                                    *extra], catch_exceptions=False)


def _lease(db_path: Any, expires_in: timedelta) -> None:
    now = clock.utcnow()
    conn = db.connect(db_path)
    try:
        with db.transaction(conn):
            conn.execute("INSERT INTO jobs (type, status, run_at, lease_owner, lease_expires_at, created_at, updated_at)"
                         " VALUES ('test.job', 'running', ?, 'host:1:abc', ?, ?, ?)",
                         (clock.format_ts(now), clock.format_ts(now + expires_in), clock.format_ts(now),
                          clock.format_ts(now)))
    finally:
        conn.close()
    _age(db_path)


@pytest.mark.sqlite_only(reason="the SQLite file's time of last write; PostgreSQL's sessions below")
def test_a_source_written_in_the_last_minute_is_refused_without_force(db_path: Path, tmp_path: Path) -> None:
    _world(db_path)
    target = tmp_path / "copy.db"
    assert _copy(db_path, target).exit_code == 0  # written two minutes ago: quiet
    target.unlink()
    conn = db.connect(db_path)
    tags.create_tag(conn, 1, {"name": "new"})  # a server's write, just now
    conn.close()
    refused = _copy(db_path, target)
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == [
        f"The source {db_path} looks live: it was written 0 s ago. What is written to it after the copy's snapshot "
        "will not be in the copy. Stop the `mkt serve` and `mkt jobs run` that use it (and wait a minute), or give "
        "--force."]
    assert not target.exists()
    forced = _copy(db_path, target, "--force", "--json")
    assert forced.exit_code == 0, forced.stderr
    assert json.loads(forced.stdout)["source_retired"] is False


def test_a_source_whose_worker_holds_a_lease_is_refused(db_path: Any, tmp_path: Path) -> None:
    _world(db_path)
    _lease(db_path, timedelta(seconds=30))
    target = tmp_path / "copy.db"
    refused = _copy(db_path, target)
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"The source {db_path} looks live: 1 job(s) held by a running worker "
                                     "(an unexpired lease).")
    assert not target.exists()
    conn = db.connect(db_path)
    with db.transaction(conn):  # the worker died: its lease ran out
        conn.execute("UPDATE jobs SET lease_expires_at = ?", (clock.format_ts(clock.utcnow() - timedelta(seconds=5)),))
    conn.close()
    _age(db_path)
    copied = _copy(db_path, target)
    assert copied.exit_code == 0, copied.stderr


@pytest.mark.postgresql_only
def test_a_postgresql_source_another_session_uses_is_refused(db_path: Any, tmp_path: Path) -> None:
    _world(db_path)
    other = db.connect(db_path)  # a server's connection, that just ran a statement
    try:
        other.execute("SELECT count(*) FROM tags").fetchone()
        refused = _copy(db_path, tmp_path / "copy.db")
    finally:
        other.close()
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"The source {db_path} looks live: 1 other session(s) used it in the last minute.")
    assert _copy(db_path, tmp_path / "copy.db").exit_code == 0  # the session is gone


def _mkt(db_path: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db_path), *args],
                          capture_output=True, text=True, timeout=60)


def test_a_retired_source_refuses_writes_naming_the_target_and_serve_will_not_start(
        db_path: Any, tmp_path: Path) -> None:
    world = _world(db_path)
    target = tmp_path / "copy.db"
    one = _copy(db_path, target, "--retire-source", scope=("--workspace", str(world["id"])))
    assert (one.exit_code, one.stderr.strip()) == (
        1, "--retire-source needs --all: the source would keep workspaces the copy did not take.")
    assert not target.exists()
    copied = _copy(db_path, target, "--retire-source", "--json")
    assert copied.exit_code == 0, copied.stderr
    assert json.loads(copied.stdout)["source_retired"] is True

    refused = _mkt(db_path, "tags", "create", "other")  # another process: the CLI
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    [line] = refused.stderr.splitlines()
    named = RETIRED.fullmatch(line)
    assert named is not None and named.group(1) == str(target), line
    listed = _mkt(db_path, "tags", "list", "--json")  # reads go on
    assert listed.returncode == 0 and [t["name"] for t in json.loads(listed.stdout)] == ["vip"]
    status = _mkt(db_path, "db", "status", "--json")  # and says so
    assert status.returncode == 0 and json.loads(status.stdout)["retired"] == line
    assert " ".join(_mkt(db_path, "db", "status").stdout.split()).endswith(line)  # the table wraps it

    from starlette.testclient import TestClient

    from marketing_cli.api.app import create_app

    auth = {"Authorization": f"Bearer {world['key']}"}
    with TestClient(create_app(db_path), raise_server_exceptions=False) as client:
        assert error_of(client.post("/v1/tags", json={"name": "other"}, headers=auth)) == (503, line)
        assert client.get("/v1/tags", headers=auth).status_code == 200

    served = _mkt(db_path, "serve", "--port", str(free_port()))
    assert served.returncode == 1 and served.stdout == ""
    assert served.stderr.splitlines() == [f"mkt serve will not start: {line}"]

    conn = db.connect(target)  # the copy takes writes
    try:
        assert tags.create_tag(conn, world["id"], {"name": "other"})["name"] == "other"
    finally:
        conn.close()


def test_a_server_still_running_on_the_source_is_refused_writes_once_it_is_retired(
        new_db: Callable[..., Any], tmp_path: Path) -> None:
    from marketing_cli import jobs

    source = new_db("served.db")
    world = _world(source)
    conn = db.connect(source)
    try:  # due once the source is retired: the worker's claim is then refused
        jobs.enqueue(conn, "email.ab_winner", {}, run_at=clock.format_ts(clock.utcnow() + timedelta(seconds=10)))
    finally:
        conn.close()
    server = Server(source)
    api = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {world['key']}"}, timeout=30)
    try:
        assert api.post("/v1/tags", json={"name": "before"}).status_code == 201
        live = _copy(source, tmp_path / "copy.db")
        assert live.exit_code == 1 and "looks live" in live.stderr
        copied = _copy(source, tmp_path / "copy.db", "--force", "--retire-source")
        assert copied.exit_code == 0, copied.stderr
        status, message = error_of(api.post("/v1/tags", json={"name": "after"}))
        assert status == 503 and RETIRED.fullmatch(message), message
        assert sorted(t["name"] for t in api.get("/v1/tags").json()["data"]) == ["before", "vip"]
        deadline = time.monotonic() + 40
        while "job worker stopped" not in server.output() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # a worker that went on would log again within a pass or two
    finally:
        api.close()
        log = server.output()
        assert server.stop() == 0
    stopped = [line for line in log.splitlines() if "job worker" in line]
    assert len(stopped) == 1 and RETIRED.search(stopped[0].split("job worker stopped: ")[1]), stopped
    assert "Traceback" not in log

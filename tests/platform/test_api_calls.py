"""api/calls.py: services in worker threads (`call`), bounded reads on the event loop (`quick_read`)."""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Any

import pytest

from marketing_cli.api import calls
from marketing_cli.services.account import workspaces


@pytest.fixture(autouse=True)
def _no_cooldown_left_over() -> Any:
    calls._in_threads_until.clear()
    yield
    calls._in_threads_until.clear()


def spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[str]:
    """Record the thread each call of module.name runs in: 'loop' (the app's event loop) or 'worker'."""
    seen: list[str] = []
    real = getattr(module, name)

    def spied(*args: Any, **kwargs: Any) -> Any:
        seen.append("worker" if threading.current_thread().name.startswith("AnyIO worker") else "loop")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spied)
    return seen


@pytest.mark.sqlite_only  # SQLite reads on the event loop within a step budget; PostgreSQL's always run in threads
def test_the_workspace_read_runs_on_the_event_loop(client: Any, auth: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spy(monkeypatch, workspaces, "get_workspace_info")
    for _ in range(3):
        assert client.get("/v1/workspace", headers=auth).status_code == 200
    # Every read ran on the loop (the answer is kept while the database is unchanged, so not
    # every request reads: the key's first use stamps it, a change, and the third is kept).
    assert seen == ["loop"] * 2
    # Writes and everything else still go to worker threads.
    writes = spy(monkeypatch, workspaces, "update_workspace")
    assert client.patch("/v1/workspace", headers=auth, json={"name": "Renamed", "conversion_tracking": False}
                        ).status_code == 200
    assert writes == ["worker"]


@pytest.mark.sqlite_only  # SQLite reads on the event loop within a step budget; PostgreSQL's always run in threads
def test_a_quick_read_that_outruns_its_budget_moves_to_a_thread_for_a_while(
        client: Any, auth: dict, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A read that turns out heavy (here: a million-row count) is stopped on the loop after its
    budget and answered from a worker thread; for the cooldown it goes straight to a thread."""
    real = workspaces.get_workspace_info
    threads: list[str] = []

    def heavy(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
        threads.append("worker" if threading.current_thread().name.startswith("AnyIO worker") else "loop")
        conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000000)"
                     " SELECT count(*) FROM c").fetchone()
        return real(conn, workspace_id)

    monkeypatch.setattr(workspaces, "get_workspace_info", heavy)
    with caplog.at_level(logging.WARNING, logger="mkt.api"):
        first = client.get("/v1/workspace", headers=auth)
        second = client.get("/v1/workspace", headers=auth)
    assert first.status_code == second.status_code == 200
    assert first.json()["data"]["workspace"] == second.json()["data"]["workspace"]
    assert threads == ["loop", "worker", "worker"]  # stopped on the loop, run again; then threads only
    assert "outran its budget on the event loop" in caplog.text
    monkeypatch.setattr(calls, "QUICK_COOLDOWN", 0.0)
    calls._in_threads_until.clear()
    monkeypatch.setattr(workspaces, "get_workspace_info", real)
    assert client.get("/v1/workspace", headers=auth).status_code == 200  # back on the loop, budget unharmed


@pytest.mark.sqlite_only  # SQLite reads on the event loop within a step budget; PostgreSQL's always run in threads
def test_the_workspace_read_is_far_inside_its_budget_and_other_statements_are_never_stopped(db_path: Any, conn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is the read's own SQLite steps: the workspace read takes a few hundred of the
    200,000; a statement run outside a quick read (authentication's lookup) is never stopped."""
    from marketing_cli.storage.db import Database

    db = Database(db_path)
    loop_conn, budget = calls._loop_connection(db)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    loop_conn.set_progress_handler(count, 1)
    workspace = workspaces.create_workspace(loop_conn, "Steps")["workspace"]["id"]
    steps[0] = 0
    workspaces.get_workspace_info(loop_conn, workspace)
    assert 0 < steps[0] < calls.QUICK_STEPS / 100
    loop_conn.set_progress_handler(budget, calls._PROGRESS_STEPS)
    assert loop_conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000000)"
                             " SELECT count(*) FROM c").fetchone()[0] == 1_000_000  # no quick read: not stopped


def test_an_error_of_the_read_itself_is_not_retried(client: Any, auth: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []

    def broken(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
        runs.append(workspace_id)
        conn.execute("SELECT * FROM no_such_table")
        return {}

    monkeypatch.setattr(workspaces, "get_workspace_info", broken)
    assert client.get("/v1/workspace", headers=auth).status_code == 500
    assert len(runs) == 1

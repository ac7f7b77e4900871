"""The due-work queries of the automations runner find work through the partial index on
next_run_at of active enrollments (a tick with a million contacts waiting is one index seek),
never by scanning automation_enrollments: checked with EXPLAIN QUERY PLAN on the very SQL
the functions run (captured from the connection, so an edit of the SQL is checked too)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from marketing_cli.services.automations import runner, steps

INDEX = "automation_enrollments_due"


def _statements(conn: Any, call: Callable[[], Any]) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return [s for s in seen if "automation_enrollments" in s]


def _plan(conn: Any, sql: str) -> list[str]:
    assert "?" not in sql, f"traced SQL still holds placeholders: {sql}"
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]


@pytest.mark.parametrize("name", ["due_enrollments", "next_due_at", "schedule"])
def test_due_work_seeks_the_partial_index_and_never_scans(conn: Any, workspace: dict[str, Any], name: str) -> None:
    call = {"due_enrollments": lambda: steps.due_enrollments(conn),
            "next_due_at": lambda: steps.next_due_at(conn),
            "schedule": lambda: runner.schedule(conn)}[name]
    statements = _statements(conn, call)
    assert statements, f"{name} ran no query on automation_enrollments"
    for sql in statements:
        # The trace shows the statement with its parameters bound (sqlite3 expands them).
        plan = _plan(conn, sql)
        text = " | ".join(plan)
        assert any(re.search(rf"SEARCH automation_enrollments USING (COVERING )?INDEX {INDEX}\b", p) for p in plan), \
            (name, sql, text)
        assert not any(re.match(r"SCAN automation_enrollments\b", p) for p in plan), (name, sql, text)


def test_the_partial_index_is_on_next_run_at_of_active_enrollments(conn: Any) -> None:
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (INDEX,)).fetchone()[0]
    assert re.search(r"ON automation_enrollments\s*\(next_run_at\)\s+WHERE status = 'active'", sql), sql

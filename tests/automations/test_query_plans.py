"""The due-work queries of the automations runner find work through the partial index on
next_run_at of active enrollments (a tick with a million contacts waiting is one index seek),
never by scanning automation_enrollments: checked with the engine's query plan of the very SQL
the functions run (recorded from the connection, so an edit of the SQL is checked too)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from marketing_cli.services.automations import runner, steps
from marketing_cli.storage.db import is_postgresql
from tests.engines import Recording, query_plan

INDEX = "automation_enrollments_due"


def _statements(conn: Any, call: Callable[[Any], Any]) -> list[tuple[str, Any]]:
    recording = Recording(conn)
    call(recording)
    return [(sql, params) for sql, params in recording.seen if "automation_enrollments" in sql]


@pytest.mark.parametrize("name", ["due_enrollments", "next_due_at", "schedule"])
def test_due_work_seeks_the_partial_index_and_never_scans(conn: Any, workspace: dict[str, Any], name: str) -> None:
    call = {"due_enrollments": steps.due_enrollments, "next_due_at": steps.next_due_at,
            "schedule": runner.schedule}[name]
    statements = _statements(conn, call)
    assert statements, f"{name} ran no query on automation_enrollments"
    for sql, params in statements:
        text = query_plan(conn, sql, params)
        if is_postgresql(conn):
            assert re.search(rf"Index (Only )?Scan using {INDEX} on automation_enrollments\b", text), (name, sql, text)
            assert not re.search(r"Seq Scan on automation_enrollments\b", text), (name, sql, text)
        else:
            plan = text.split(" | ")
            assert any(re.search(rf"SEARCH automation_enrollments USING (COVERING )?INDEX {INDEX}\b", p)
                       for p in plan), (name, sql, text)
            assert not any(re.match(r"SCAN automation_enrollments\b", p) for p in plan), (name, sql, text)


def test_the_partial_index_is_on_next_run_at_of_active_enrollments(conn: Any) -> None:
    if is_postgresql(conn):
        sql = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = ?", (INDEX,)).fetchone()[0]
        # PostgreSQL's spelling: "ON <schema>.automation_enrollments USING btree (...) WHERE (status = 'active'::text)"
        sql = re.sub(r"ON \w+\.", "ON ", sql).replace("USING btree ", "").replace(
            "(status = 'active'::text)", "status = 'active'")
    else:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (INDEX,)).fetchone()[0]
    assert re.search(r"ON automation_enrollments\s*\(next_run_at\)\s+WHERE status = 'active'", sql), sql

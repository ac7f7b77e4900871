"""A large import on SQLite: field indexes built after the load (and repaired after a crash),
rows read and checked in a worker process, the phone lookup by its index (issue 42)."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import batches, bulk, bulk_load, fields, parse_worker, rows, values
from marketing_cli.storage import deferred_indexes
from marketing_cli.storage.db import connect

pytestmark = pytest.mark.sqlite_only(reason="the SQLite import's own load path (PostgreSQL's reads ahead in a thread)")

HEADER = "email_address,city,signup,score,phone_number\n"


def _fields(conn: Any, ws: int) -> list[int]:
    made = [fields.create_field(conn, ws, body)["id"] for body in (
        {"label": "City", "merge_tag": "city", "type": "TEXT"},
        {"label": "Signup", "merge_tag": "signup", "type": "DATE"},
        {"label": "Score", "merge_tag": "score", "type": "NUMBER"},
        {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT", "default_region": "US"},
    )]
    return made[:3]  # the phone number keeps no field index


def _text(n: int) -> str:
    lines = [HEADER]
    for i in range(n):
        if i == 7:
            lines.append("not-an-address,Paris,2020-01-01,1,\n")  # rejected
        elif i == 11:
            lines.append(f"p{i}@example.com,Lyon,yesterday,2,\n")  # a bad date, left out
        elif i == 13:
            lines.append(f"zoë{i}@example.com,Nice,2020-01-01,3,\n")  # a warning (SMTPUTF8)
        else:
            lines.append(f"p{i}@example.com,City {i % 5},2021-02-{1 + i % 28:02d},{i},+1212555{i:04d}\n")
    return "".join(lines)


def _index_names(conn: Any) -> set[str]:
    return set(deferred_indexes.field_index_names(conn))


def _expected(field_ids: list[int]) -> set[str]:
    return {f"contacts_field_{i}" for i in field_ids}


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk_load, "DEFER_AFTER_ROWS", 10)


def _spy_indexes(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The field indexes present when each batch starts writing."""
    seen: list[set[str]] = []
    real = batches.BatchWriter._apply

    def spy(self: Any, batch: Any) -> None:
        seen.append(_index_names(self.conn))
        real(self, batch)

    monkeypatch.setattr(batches.BatchWriter, "_apply", spy)
    return seen


def test_a_large_import_builds_the_field_indexes_after_its_load(conn: Any, workspace: dict[str, Any],
                                                                small_bounds: None,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    ours = _expected(_fields(conn, ws))
    expected = _index_names(conn)
    assert ours < expected  # and the workspace's own fields' (first and last name)
    seen = _spy_indexes(monkeypatch)
    summary = bulk.import_contacts(conn, ws, io.StringIO(_text(40)), batch_size=10)
    assert summary["created"] == 39 and summary["skipped"] == 1
    assert seen[0] == expected and seen[1:] == [set()] * 3  # dropped from the second batch on
    assert _index_names(conn) == expected  # built again
    assert conn.execute("SELECT count(*) FROM deferred_field_indexes").fetchone()[0] == 0
    sql = {r[0]: r[1] for r in conn.execute("SELECT name, sql FROM sqlite_master WHERE name LIKE 'contacts_field_%'")}
    assert all("IS NOT NULL" in text for text in sql.values())  # the same partial indexes as field_sql makes
    city = conn.execute("EXPLAIN QUERY PLAN SELECT id FROM contacts WHERE workspace_id = ? AND "
                        f"json_extract(data, '$.\"{min(int(n.rsplit('_', 1)[1]) for n in sql)}\"') = 'Paris'",
                        (ws,)).fetchall()
    assert "contacts_field_" in " ".join(str(tuple(r)) for r in city)


def test_a_small_import_or_a_large_table_keeps_the_indexes(conn: Any, workspace: dict[str, Any],
                                                           small_bounds: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    ours = _expected(_fields(conn, ws))
    expected = _index_names(conn)
    assert ours < expected  # and the workspace's own fields' (first and last name)
    seen = _spy_indexes(monkeypatch)
    bulk.import_contacts(conn, ws, io.StringIO(_text(9)), batch_size=10)  # under DEFER_AFTER_ROWS
    monkeypatch.setattr(bulk_load, "DEFER_MAX_CONTACTS", 5)  # the table now holds more than this
    bulk.import_contacts(conn, ws, io.StringIO(_text(40)), batch_size=10)
    assert all(s == expected for s in seen) and _index_names(conn) == expected
    bulk.import_contacts(conn, ws, io.StringIO(_text(40)), batch_size=10, dry_run=True)  # a dry run drops nothing
    assert all(s == expected for s in seen)


def test_a_crash_between_the_load_and_the_build_is_repaired_by_the_next_open(
        conn: Any, workspace: dict[str, Any], db_path: Path, small_bounds: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    ours = _expected(_fields(conn, ws))
    expected = _index_names(conn)
    assert ours < expected  # and the workspace's own fields' (first and last name)
    monkeypatch.setattr(bulk_load.FieldIndexes, "build", lambda self, quietly=False: None)  # died before it
    bulk.import_contacts(conn, ws, io.StringIO(_text(40)), batch_size=10)
    assert _index_names(conn) == set()
    assert conn.execute("SELECT count(*) FROM deferred_field_indexes").fetchone()[0] == 1
    again = connect(db_path)  # its lock is gone (released, or expired after a crash): repaired
    try:
        assert _index_names(again) == expected
        assert again.execute("SELECT count(*) FROM deferred_field_indexes").fetchone()[0] == 0
    finally:
        again.close()


def test_a_live_imports_dropped_indexes_are_left_to_it(conn: Any, workspace: dict[str, Any], db_path: Path) -> None:
    ws = workspace["id"]
    _fields(conn, ws)
    expected = _index_names(conn)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO contact_io_locks (workspace_id, kind, owner, started_at, expires_at)"
                 " VALUES (?, 'import', 'live-owner', '2000-01-01T00:00:00Z', '9999-01-01T00:00:00Z')", (ws,))
    deferred_indexes.defer(conn, "live-owner", "2000-01-01T00:00:00Z")
    conn.execute("COMMIT")
    other = connect(db_path)
    try:
        assert _index_names(other) == set()  # its import still runs: not rebuilt under it
        assert not deferred_indexes.repair(other)
        conn.execute("UPDATE contact_io_locks SET expires_at = '2000-01-01T00:00:10Z' WHERE owner = 'live-owner'")
        assert deferred_indexes.repair(other)  # the lock expired: the import died
        assert _index_names(other) == expected
    finally:
        other.close()


def test_an_error_after_the_drop_still_builds_the_indexes(conn: Any, workspace: dict[str, Any],
                                                          small_bounds: None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    ours = _expected(_fields(conn, ws))
    expected = _index_names(conn)
    assert ours < expected  # and the workspace's own fields' (first and last name)
    real = batches.BatchWriter._apply
    calls = {"n": 0}

    def fail_third(self: Any, batch: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        real(self, batch)

    monkeypatch.setattr(batches.BatchWriter, "_apply", fail_third)
    with pytest.raises(KeyboardInterrupt):
        bulk.import_contacts(conn, ws, io.StringIO(_text(40)), batch_size=10)
    assert _index_names(conn) == expected
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 20  # two batches of 10 kept


def test_the_phone_lookup_seeks_the_phone_index(conn: Any, workspace: dict[str, Any]) -> None:
    """An ORDER BY created_at made SQLite walk contacts_created over the whole workspace for every
    batch (quadratic in a large import); the earliest contact of a number is picked in Python."""
    ws = workspace["id"]
    _fields(conn, ws)
    plans: list[str] = []
    conn.set_trace_callback(lambda sql: plans.append(sql) if "json_each" in sql and "phone AS k" in sql else None)
    bulk.import_contacts(conn, ws, io.StringIO(_text(20)))
    conn.set_trace_callback(None)
    assert plans
    plan = conn.execute("EXPLAIN QUERY PLAN " + plans[0]).fetchall()  # the statement as run, parameters in it
    assert "contacts_phone" in " ".join(str(tuple(r)) for r in plan)


def test_two_contacts_with_one_number_the_earliest_owns_it(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    _fields(conn, ws)
    conn.execute("INSERT INTO contacts (id, workspace_id, email, phone, status, data, created_at, updated_at) VALUES"
                 " ('b', ?, 'b@example.com', '+12125550001', 'SUBSCRIBED', '{}', '2020-01-02T00:00:00Z', 'x'),"
                 " ('a', ?, 'a@example.com', '+12125550001', 'SUBSCRIBED', '{}', '2020-01-01T00:00:00Z', 'x')",
                 (ws, ws))
    summary = bulk.import_contacts(conn, ws, io.StringIO(HEADER + "c@example.com,,,,+12125550001\n"))
    assert summary["cells_left_out"] == 1  # the number is taken
    found = batches.BatchWriter(conn, ws, values.load_fields(conn, ws), [], "SUBSCRIBED", True,
                                lambda *a: None)._lookup("phone", ["+12125550001"])
    assert found["+12125550001"]["id"] == "a"


# --- the worker process --------------------------------------------------------------------


@pytest.fixture
def always_a_worker(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every file import forks its worker (whatever its size); the list gets each worker's pid."""
    monkeypatch.setattr(parse_worker, "WORKER_MIN_BYTES", 0)
    forks: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(parse_worker.os, "fork", fork)
    return forks


def _reaped(pids: list[int]) -> bool:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "list.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_worker_reports_exactly_what_reading_here_reports(conn: Any, workspace: dict[str, Any],
                                                              tmp_path: Path, always_a_worker: list[int],
                                                              cli: Callable[..., Any]) -> None:
    ws = workspace["id"]
    _fields(conn, ws)
    path = _file(tmp_path, _text(45))
    here = bulk.import_contacts(conn, ws, io.StringIO(path.read_text(encoding="utf-8")), batch_size=10,
                                errors_out=(errors_here := io.StringIO()), dry_run=True)
    assert not always_a_worker
    with open(path, encoding="utf-8") as source:
        there = bulk.import_contacts(conn, ws, source, batch_size=10, errors_out=(errors_there := io.StringIO()),
                                     dry_run=True, parse_in_worker=True)
    assert len(always_a_worker) == 1
    assert there == here and errors_there.getvalue() == errors_here.getvalue()
    assert here["skipped"] == 1 and here["warned"] == 1 and here["cells_left_out"] == 1
    result = cli("contacts", "import", str(path), "--batch-size", "10", "--json")  # the CLI asks for the worker
    assert result.exit_code == 0, result.stderr
    written = json.loads(result.stdout)
    assert len(always_a_worker) == 2 and _reaped(always_a_worker)
    assert {k: written[k] for k in ("rows", "skipped", "errors", "left_out", "warnings")} == \
           {k: here[k] for k in ("rows", "skipped", "errors", "left_out", "warnings")}
    assert written["created"] == 44


def test_ctrl_c_with_a_worker_keeps_the_committed_batches(conn: Any, workspace: dict[str, Any], tmp_path: Path,
                                                          always_a_worker: list[int], cli: Callable[..., Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    real = batches.BatchWriter.apply
    calls = {"n": 0}

    def apply(self: Any, batch: Any, lock: Any = None) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        real(self, batch, lock)

    monkeypatch.setattr(batches.BatchWriter, "apply", apply)
    path = _file(tmp_path, "email_address\n" + "".join(f"p{i}@example.com\n" for i in range(25)))
    result = cli("contacts", "import", str(path), "--batch-size", "10")
    assert result.exit_code == 130 and len(always_a_worker) == 1
    assert "the first 20 rows of the file were imported and are kept" in result.stderr
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 20
    assert _reaped(always_a_worker)  # the worker was stopped and waited for: no child left behind


def test_an_error_in_the_worker_is_raised_here(conn: Any, workspace: dict[str, Any], tmp_path: Path,
                                               always_a_worker: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    real = rows.RowParser.parse

    def parse(self: Any, line: int, cells: list[str]) -> Any:
        if line == 15:
            raise MktError(400, "Line 15 is not what we expected.", "detail")
        return real(self, line, cells)

    monkeypatch.setattr(rows.RowParser, "parse", parse)  # the fork takes it along
    path = _file(tmp_path, "email_address\n" + "".join(f"p{i}@example.com\n" for i in range(25)))
    with open(path, encoding="utf-8") as source, pytest.raises(MktError) as raised:
        bulk.import_contacts(conn, workspace["id"], source, batch_size=10, parse_in_worker=True)
    assert (raised.value.status, raised.value.message, raised.value.detail) == \
           (400, "Line 15 is not what we expected.", "detail")
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 10  # the first batch is kept
    assert len(always_a_worker) == 1 and _reaped(always_a_worker)


def test_no_worker_for_a_small_file_or_text(tmp_path: Path) -> None:
    path = _file(tmp_path, "email_address\na@example.com\n")
    with open(path, encoding="utf-8") as small:
        assert not parse_worker.worth_a_worker(small)
    assert not parse_worker.worth_a_worker(io.StringIO("x" * (2 << 20)))
    assert not parse_worker.worth_a_worker(["email_address\n"])


def test_a_row_survives_the_pipe() -> None:
    import pickle

    row = rows.ContactRow(3, ["a@example.com"], "a@example.com", None, {"2": "x"}, "SUBSCRIBED", None, ["t"])
    row.left_out = [(3, 1, "why")]
    back = pickle.loads(pickle.dumps(row))
    same = [n for n in rows.ContactRow.__slots__ if n != "data_json"]
    assert [getattr(back, n) for n in same] == [getattr(row, n) for n in same]
    assert back.data_json == rows.dumps_json(row.data) == '{"2":"x"}'  # encoded by the worker
    back.merge(rows.ContactRow(4, [], "a@example.com", None, {"2": "y"}, None, None, None))
    assert back.data_json is None and back.data == {"2": "y"}  # a merged row is encoded where it is written


def test_the_worker_writes_the_same_data(conn: Any, workspace: dict[str, Any], tmp_path: Path,
                                         always_a_worker: list[int]) -> None:
    ws = workspace["id"]
    _fields(conn, ws)
    text = _text(30) + "p1@example.com,Zürich,,,\n"  # a key repeated: merged in the writer
    with open(_file(tmp_path, text), encoding="utf-8") as source:
        bulk.import_contacts(conn, ws, source, batch_size=10, parse_in_worker=True)
    there = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT email, data, phone FROM contacts")}
    conn.execute("DELETE FROM contacts")
    bulk.import_contacts(conn, ws, io.StringIO(text), batch_size=10)
    here = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT email, data, phone FROM contacts")}
    assert len(always_a_worker) == 1 and there == here and len(here) == 29
    assert '"Zürich"' in here["p1@example.com"][0]

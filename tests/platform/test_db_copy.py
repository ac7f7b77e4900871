"""`mkt db copy`: SQLite -> PostgreSQL -> SQLite row for row, the check report, a kill and a resume,
one workspace of two (marketing_cli/storage/copy/; docs/cli.md "mkt db copy").

The PostgreSQL tests run with `--engine postgresql`; the check report and the SQLite -> SQLite copy
run on either engine.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.storage import db, dialect
from tests import factories

ROOT = Path(__file__).resolve().parents[2]
NUL_ID = "0000000000000000000000a1"
TIMES = ("2024-01-02T03:04:05Z", "2024-01-02 03:04:05", "2024-01-02T03:04:05.123456+00:00")


def _contact_rows(ws: int, n: int, start: int = 0) -> list[tuple[Any, ...]]:
    return [(f"{start + i:024x}", ws, f"person{start + i}@example.com", "SUBSCRIBED", None,
             TIMES[i % 3], TIMES[(i + 1) % 3]) for i in range(n)]


def _add_contacts(conn: Any, rows: list[tuple[Any, ...]]) -> None:
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO contacts (id, workspace_id, email, status, phone, created_at, updated_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")


def _source(tmp_path: Path, *, odd: bool = True) -> tuple[Path, list[int]]:
    """A SQLite file with two workspaces holding one of every resource; the first also holds a NUL
    byte, timestamps in three formats and two emails that differ only in case."""
    path = tmp_path / "source.db"
    conn = db.connect(path)
    first = factories.workspace_world(conn, "Alpha", email="alpha@example.com", phone="+447911123401")
    second = factories.workspace_world(conn, "Beta", email="beta@example.com", phone="+447911123402")
    ws1, ws2 = first["workspace"]["id"], second["workspace"]["id"]
    _add_contacts(conn, _contact_rows(ws1, 30, start=1000) + _contact_rows(ws2, 20, start=2000))
    if odd:
        _add_contacts(conn, [
            (NUL_ID, ws1, "nul@example.com", "SUBSCRIBED", "+44\x007911123409", TIMES[0], TIMES[1]),
            ("0000000000000000000000a2", ws1, "Case@Example.com", "SUBSCRIBED", None, TIMES[1], TIMES[2]),
            ("0000000000000000000000a3", ws1, "case@example.com", "SUBSCRIBED", None, TIMES[2], TIMES[0]),
        ])
    conn.close()
    return path, [ws1, ws2]


def _mkt(*args: str) -> Any:
    from typer.testing import CliRunner

    from marketing_cli.cli.main import app

    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    conn.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                        " AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    tables = {name: sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr) for name in names}
    tables["(triggers)"] = sorted(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    conn.close()
    return tables


def _stripped(tables: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    return {name: sorted((tuple(v.replace("\x00", "") if isinstance(v, str) else v for v in row) for row in rows),
                         key=repr) for name, rows in tables.items()}


@pytest.mark.postgresql_only
def test_sqlite_to_postgresql_and_back_is_equal_row_for_row(tmp_path: Path, db_path: str) -> None:
    source, (ws1, _) = _source(tmp_path)
    report = tmp_path / "report.csv"

    stopped = _mkt("--db", str(source), "db", "copy", "--force", "--to", db_path, "--all", "--yes", "--json")
    assert stopped.exit_code == 1
    assert "NUL byte in text" in stopped.stderr and "Nothing was copied" in stopped.stderr

    out = _mkt("--db", str(source), "db", "copy", "--force", "--to", db_path, "--all", "--yes", "--json",
               "--fix", "nul=strip,case=keep", "--report", str(report))
    assert out.exit_code == 0, out.stderr
    copied = json.loads(out.stdout)
    assert copied["verified"] > 40 and copied["sequences"] > 5 and not copied["resumed"]
    with report.open() as handle:
        rows = list(csv.DictReader(handle))
    assert {"table": "contacts", "row_id": NUL_ID, "column": "phone", "problem": "NUL byte in text",
            "action": "NUL bytes stripped"} in rows
    assert [r["row_id"] for r in rows if r["problem"].startswith("email differs only in case")] == \
        ["0000000000000000000000a3"]

    # the copy works on PostgreSQL: the services read it, and new ids come after the copied ones
    from marketing_cli.services.account import workspaces
    from marketing_cli.services.contacts import records

    conn = db.connect(db_path)
    try:
        found = records.get_contact(conn, ws1, NUL_ID)
        assert found["id"] == NUL_ID
        # its triggers were turned off for the load and on again as they were (ALWAYS kept ALWAYS)
        from marketing_cli.services.contacts import batch_checks

        assert batch_checks.triggers_always(conn) or not dialect.postgresql(conn)
        made = workspaces.create_workspace(conn, "After the copy")["workspace"]["id"]
        assert made > max(copied["workspaces"])
        conn.execute("DELETE FROM workspaces WHERE id = ?", (made,))
    finally:
        conn.close()

    back = tmp_path / "back.db"
    out = _mkt("--db", db_path, "db", "copy", "--force", "--to", str(back), "--all", "--yes", "--json", "--fix", "case=keep")
    assert out.exit_code == 0, out.stderr
    assert [p["action"] for p in json.loads(out.stdout)["problems"]] == ["kept as it is"]  # the case pair only
    assert oct(back.stat().st_mode & 0o777) == "0o600"
    assert not Path(f"{back}.mkt-copy-partial").exists()
    assert _tables(back) == _stripped(_tables(source))

    again = _mkt("--db", str(source), "db", "copy", "--force", "--to", db_path, "--workspace", str(ws1), "--yes",
                 "--fix", "nul=strip,case=keep")
    assert again.exit_code == 1 and f"already holds workspace(s) {ws1}" in again.stderr


def test_the_check_stops_before_writing_and_reports_every_row(tmp_path: Path) -> None:
    source, (ws1, _) = _source(tmp_path)
    conn = sqlite3.connect(source)
    conn.execute("UPDATE contacts SET score = 'high' WHERE id = ?", (f"{1000:024x}",))
    conn.execute("UPDATE contacts SET phone = CAST(x'41ff42' AS TEXT) WHERE id = ?", (f"{1001:024x}",))
    conn.commit()
    conn.close()
    target, report = tmp_path / "copy.db", tmp_path / "report.csv"

    out = _mkt("--db", str(source), "db", "copy", "--force", "--to", str(target), "--all", "--yes",
               "--report", str(report))
    assert out.exit_code == 1
    assert "The source has 4 value(s) the target would refuse or change" in out.stderr
    assert not target.exists() and not Path(f"{target}.mkt-copy-partial").exists()
    with report.open() as handle:
        rows = {(r["row_id"], r["column"]): (r["problem"], r["action"]) for r in csv.DictReader(handle)}
    assert rows == {
        (f"{1000:024x}", "score"): ("text in an INTEGER column", "stopped"),
        (f"{1001:024x}", "phone"): ("text that is not UTF-8", "stopped"),
        (NUL_ID, "phone"): ("NUL byte in text", "stopped"),
        ("0000000000000000000000a3", "email"):
            ("email differs only in case from contacts 0000000000000000000000a2", "stopped"),
    }

    bad = _mkt("--db", str(source), "db", "copy", "--force", "--to", str(target), "--all", "--yes", "--fix", "nul=drop")
    assert bad.exit_code == 1 and "Unknown fix 'nul=drop'" in bad.stderr
    neither = _mkt("--db", str(source), "db", "copy", "--force", "--to", str(target), "--yes")
    assert neither.exit_code == 1 and "--workspace ID or --all" in neither.stderr

    assert actions_of(report)[(f"{1000:024x}", "score")] == "stopped"
    conn = sqlite3.connect(source)
    conn.execute("UPDATE contacts SET score = 0 WHERE id = ?", (f"{1000:024x}",))  # NOT NULL: no NULL to set
    record = conn.execute("SELECT min(r.id) FROM dns_records r JOIN domains d ON d.id = r.domain_id"
                          " WHERE d.workspace_id = ?", (ws1,)).fetchone()[0]
    conn.execute("UPDATE dns_records SET priority = 'ten' WHERE id = ?", (record,))
    conn.commit()
    conn.close()
    out = _mkt("--db", str(source), "db", "copy", "--force", "--to", str(target), "--workspace", str(ws1), "--yes", "--json",
               "--fix", "nul=replace", "--fix", "utf8=replace,type=null,case=keep-first", "--report", str(report))
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["rows_touched"] == 4
    copy = sqlite3.connect(target)
    assert copy.execute("SELECT priority FROM dns_records WHERE id = ?", (record,)).fetchone() == (None,)
    assert copy.execute("SELECT phone FROM contacts WHERE id = ?", (f"{1001:024x}",)).fetchone() == ("A\ufffdB",)
    assert copy.execute("SELECT phone FROM contacts WHERE id = ?", (NUL_ID,)).fetchone() == ("+44\ufffd7911123409",)
    assert copy.execute("SELECT count(*) FROM contacts WHERE id = '0000000000000000000000a3'").fetchone() == (0,)
    assert copy.execute("SELECT count(*) FROM contacts WHERE id = '0000000000000000000000a2'").fetchone() == (1,)
    assert copy.execute("SELECT DISTINCT workspace_id FROM contacts").fetchall() == [(ws1,)]
    copy.close()
    assert actions_of(report) == {
        (str(record), "priority"): "set to NULL",
        (f"{1001:024x}", "phone"): "invalid bytes replaced by U+FFFD",
        (NUL_ID, "phone"): "NUL bytes replaced by U+FFFD",
        ("0000000000000000000000a3", ""): "dropped",
    }


def actions_of(report: Path) -> dict[tuple[str, str], str]:
    with report.open() as handle:
        return {(r["row_id"], r["column"]): r["action"] for r in csv.DictReader(handle)}


@pytest.mark.postgresql_only
def test_a_killed_copy_resumes_from_the_staging_area(tmp_path: Path, db_path: str) -> None:
    import psycopg

    source, _ = _source(tmp_path, odd=False)
    conn = db.connect(source)
    ws = conn.execute("SELECT min(id) FROM workspaces").fetchone()[0]
    _add_contacts(conn, _contact_rows(ws, 30_000, start=10_000))
    conn.close()
    command = [sys.executable, "-m", "marketing_cli", "--db", str(source), "db", "copy", "--force", "--to", db_path, "--all",
               "--yes", "--json", "--batch-size", "500"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    staged = 0
    deadline = time.monotonic() + 120
    with psycopg.connect(db_path, autocommit=True) as watch:
        while time.monotonic() < deadline and run.poll() is None:
            try:
                staged = watch.execute("SELECT coalesce(rows, 0) FROM mkt_copy_staging.mkt_copy_state"
                                       " WHERE table_name = 'contacts'").fetchone() or (0,)
                staged = staged[0]
            except psycopg.errors.UndefinedTable:
                staged = 0
            if staged >= 3000:
                break
            time.sleep(0.02)
        assert run.poll() is None, run.communicate()
        run.send_signal(signal.SIGKILL)
        run.communicate()
        # killed mid-way: nothing is visible in the live tables
        assert watch.execute("SELECT count(*) FROM workspaces").fetchone()[0] == 0
        assert watch.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0

    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["resumed"] is True and report["resumed_rows"] >= 3000
    target = db.connect(db_path)
    try:
        assert target.execute("SELECT count(*) FROM contacts").fetchone()[0] == 30_000 + 2 + 50
        assert target.execute("SELECT to_regnamespace('mkt_copy_staging')").fetchone()[0] is None
    finally:
        target.close()


@pytest.mark.postgresql_only
def test_one_workspace_of_two(tmp_path: Path, db_path: str) -> None:
    source, (ws1, ws2) = _source(tmp_path, odd=False)
    out = _mkt("--db", str(source), "db", "copy", "--force", "--to", db_path, "--workspace", str(ws2), "--yes", "--json")
    assert out.exit_code == 0, out.stderr
    copied = {t["table"]: t["rows"] for t in json.loads(out.stdout)["tables"]}

    import sqlite_utils

    from marketing_cli.storage import copy as dbcopy

    src = db.connect(source, upgrade=False)
    tables = dbcopy.scope(dbcopy.ordered(dbcopy.sqlite_tables(src)), [ws2])
    target = db.connect(db_path)
    try:
        assert [r[0] for r in target.execute("SELECT id FROM workspaces").fetchall()] == [ws2]
        for table in tables:
            if table.instance:
                continue
            where = f" WHERE {table.scope}"
            expected = src.execute(f'SELECT count(*) FROM "{table.name}"{where}').fetchone()[0]
            assert target.execute(f'SELECT count(*) FROM "{table.name}"').fetchone()[0] == expected == \
                copied[table.name], table.name
        assert copied["contacts"] == 21 and copied["automation_enrollments"] == 1
        instance = {t.name for t in tables if t.instance}
        assert instance == {"plans", "plan_allowances", "addons", "sms_rates", "instance_secrets", "phone_zone_sets",
                            "token_cutovers", "mail_domain_lanes"}
        assert {t.name for t in tables} == set(sqlite_utils.Database(src).table_names()) - {
            "sqlite_sequence", "mkt_copy_retired",  # the source's own mark (--retire-source) stays
            "deferred_field_indexes"}  # and its own record of an import's dropped indexes
    finally:
        src.close()
        target.close()

    out = _mkt("--db", str(source), "db", "copy", "--force", "--to", db_path, "--workspace", str(ws1), "--yes", "--json")
    assert out.exit_code == 0, out.stderr
    target = db.connect(db_path)
    try:
        assert [r[0] for r in target.execute("SELECT id FROM workspaces ORDER BY id").fetchall()] == [ws1, ws2]
        assert target.execute("SELECT count(*) FROM contacts").fetchone()[0] == 21 + 31
    finally:
        target.close()


def test_a_copy_to_sqlite_makes_a_new_file(tmp_path: Path) -> None:
    source, _ = _source(tmp_path, odd=False)
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"")
    out = _mkt("--db", str(source), "db", "copy", "--force", "--to", str(taken), "--all", "--yes")
    assert out.exit_code == 1 and "already exists" in out.stderr
    fresh = tmp_path / "fresh.db"
    out = _mkt("--db", str(source), "db", "copy", "--force", "--to", str(fresh), "--all", "--yes")
    assert out.exit_code == 0, out.stderr
    assert "Verified: every table's row count and checksum match the source" in out.stdout
    assert _tables(fresh) == _tables(source)

"""`mkt bounces import` through typer's CliRunner: one bad file among good ones is reported
by name and reason on both outputs, the others are imported, and the exit status is 1."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import factories

REPORTS = Path(__file__).parent.parent / "data" / "reports"
DEEP = b"Content-Type: message/rfc822\n\n" * 5_000 + b"Subject: x\n\nhello\n"


@pytest.fixture
def files(conn: sqlite3.Connection, workspace: dict[str, Any], tmp_path: Path) -> list[str]:
    """A hard bounce, a message nested 5,000 levels deep, a missing file, a complaint."""
    factories.contact(conn, workspace["id"], "nobody@example.org")
    factories.contact(conn, workspace["id"], "reader@yahoo.example")
    (tmp_path / "hard.eml").write_bytes((REPORTS / "postfix_hard.eml").read_bytes())
    (tmp_path / "deep.eml").write_bytes(DEEP)
    (tmp_path / "complaint.eml").write_bytes((REPORTS / "yahoo_arf.eml").read_bytes())
    return [str(tmp_path / name) for name in ("hard.eml", "deep.eml", "missing.eml", "complaint.eml")]


def statuses(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT status FROM contacts WHERE email IN ('nobody@example.org', 'reader@yahoo.example') ORDER BY email")]


def test_json_lists_every_file_and_exits_1(cli: Callable[..., Any], files: list[str], conn: sqlite3.Connection) -> None:
    result = cli("bounces", "import", *files, "--json")
    assert result.exit_code == 1
    answer = json.loads(result.stdout)
    assert [(f["file"], f.get("failed", False), f["error"]) for f in answer["files"]] == [
        (files[0], False, None),
        (files[1], True, "The report nests MIME parts more than 16 levels deep."),
        (files[2], True, "The file cannot be read: No such file or directory."),
        (files[3], False, None),
    ]
    assert (answer["applied"], answer["hard"], answer["complaints"], answer["failed"]) == (2, 1, 1, 2)
    assert result.stderr.splitlines() == [f"{files[1]}: The report nests MIME parts more than 16 levels deep.",
                                          f"{files[2]}: The file cannot be read: No such file or directory."]
    assert "Traceback" not in result.stdout + result.stderr
    assert statuses(conn) == ["CLEANED", "COMPLAINED"]  # nobody@example.org, reader@yahoo.example


def test_the_table_names_each_failed_file_and_its_reason(cli: Callable[..., Any], files: list[str],
                                                         conn: sqlite3.Connection, monkeypatch: Any) -> None:
    # The files named as a person in their folder does (a worker's tmp_path is longer than the table's 200 columns)
    monkeypatch.chdir(Path(files[0]).parent)
    files = [Path(f).name for f in files]
    result = cli("bounces", "import", *files)
    assert result.exit_code == 1
    table = " ".join(result.stdout.split())
    assert "2 applied: 1 hard, 0 soft, 1 complaints; 2 of 4 files failed" in table
    assert "deep.eml" in table and "missing.eml" in table and "failed: The report nests MIME parts" in table
    assert f"{files[1]}: The report nests MIME parts more than 16 levels deep." in result.stderr
    assert statuses(conn) == ["CLEANED", "COMPLAINED"]


def test_without_a_failed_file_the_answer_and_exit_status_are_as_before(cli: Callable[..., Any], files: list[str],
                                                                         conn: sqlite3.Connection) -> None:
    result = cli("bounces", "import", files[0], files[3], "--json")
    assert result.exit_code == 0 and result.stderr == ""
    answer = json.loads(result.stdout)
    assert set(answer) == {"files", "applied", "hard", "soft", "complaints"}
    assert all(set(f) == {"file", "report_type", "error", "entries"} for f in answer["files"])
    assert (answer["applied"], answer["hard"], answer["complaints"]) == (2, 1, 1)


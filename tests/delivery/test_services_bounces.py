"""Importing bounce and complaint report files: every file that can be read is applied in one
transaction; a file that fails (unreadable, past a limit, an unforeseen parser error) is
listed with its reason and does not stop the others."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.delivery import bounce_reports, bounces
from marketing_cli.services.delivery.bounce_reports import MAX_REPORT_BYTES, TOO_DEEP, TOO_LARGE
from tests import factories

REPORTS = Path(__file__).parent.parent / "data" / "reports"
DEEP = b"Content-Type: message/rfc822\n\n" * 5_000 + b"Subject: x\n\nhello\n"


def load(name: str) -> bytes:
    return (REPORTS / name).read_bytes()


@pytest.fixture
def people(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    """The addresses of postfix_hard.eml (a hard bounce) and yahoo_arf.eml (a complaint)."""
    factories.contact(conn, workspace["id"], "nobody@example.org")
    factories.contact(conn, workspace["id"], "reader@yahoo.example")
    return workspace["id"]


def status(conn: sqlite3.Connection, address: str) -> str:
    return conn.execute("SELECT status FROM contacts WHERE email = ?", (address,)).fetchone()[0]


def test_a_bad_file_in_the_middle_fails_alone(conn: sqlite3.Connection, people: int) -> None:
    result = bounces.import_reports(conn, people, [
        ("hard.eml", load("postfix_hard.eml")), ("deep.eml", DEEP), ("complaint.eml", load("yahoo_arf.eml"))])
    assert [f["file"] for f in result["files"]] == ["hard.eml", "deep.eml", "complaint.eml"]
    assert result["files"][1] == {"file": "deep.eml", "report_type": None, "error": TOO_DEEP, "entries": [],
                                  "failed": True}
    assert [f.get("failed") for f in result["files"]] == [None, True, None]
    assert (result["applied"], result["hard"], result["complaints"], result["failed"]) == (2, 1, 1, 1)
    assert status(conn, "nobody@example.org") == "CLEANED" and status(conn, "reader@yahoo.example") == "COMPLAINED"


def test_a_successful_import_keeps_its_shape(conn: sqlite3.Connection, people: int) -> None:
    result = bounces.import_reports(conn, people, [("hard.eml", load("postfix_hard.eml")),
                                                   ("ordinary.eml", load("ordinary.eml"))])
    assert set(result) == {"files", "applied", "hard", "soft", "complaints"}
    assert [set(f) for f in result["files"]] == [{"file", "report_type", "error", "entries"}] * 2
    assert result["files"][1]["error"] == bounce_reports.NOT_A_REPORT  # not a report: listed, not failed


def test_files_are_read_one_by_one_within_the_size_limit(conn: sqlite3.Connection, people: int,
                                                         tmp_path: Path) -> None:
    paths = []
    for name, data in (("hard.eml", load("postfix_hard.eml")), ("huge.eml", b""), ("deep.eml", DEEP),
                       ("complaint.eml", load("yahoo_arf.eml"))):
        paths.append(tmp_path / name)
        paths[-1].write_bytes(data)
    with paths[1].open("wb") as handle:
        handle.truncate(MAX_REPORT_BYTES * 100)  # 400 MiB, sparse: only 4 MiB + 1 byte of it is read
    paths.insert(2, tmp_path / "missing.eml")
    result = bounces.import_report_files(conn, people, paths)
    assert [(f["file"].rsplit("/", 1)[-1], f.get("failed", False), f["error"]) for f in result["files"]] == [
        ("hard.eml", False, None),
        ("huge.eml", True, TOO_LARGE),
        ("missing.eml", True, "The file cannot be read: No such file or directory."),
        ("deep.eml", True, TOO_DEEP),
        ("complaint.eml", False, None),
    ]
    assert (result["applied"], result["failed"]) == (2, 3)
    assert status(conn, "nobody@example.org") == "CLEANED" and status(conn, "reader@yahoo.example") == "COMPLAINED"


def test_an_unforeseen_parser_error_fails_that_file_only(conn: sqlite3.Connection, people: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    real = bounce_reports.parse_report

    def parse(data: bytes) -> dict[str, Any]:
        if data == b"boom":
            raise LookupError("unknown encoding: x-boom")
        return real(data)

    monkeypatch.setattr(bounce_reports, "parse_report", parse)
    result = bounces.import_reports(conn, people, [("boom.eml", b"boom"), ("hard.eml", load("postfix_hard.eml"))])
    assert result["files"][0]["error"] == "The file could not be read as a report (LookupError)."
    assert (result["applied"], result["failed"]) == (1, 1)

"""`mkt contacts import` / `mkt contacts export` through typer's CliRunner."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from marketing_cli.services.contacts import bulk, fields, records, tags


@pytest.fixture
def ws(conn: Any, workspace: dict[str, Any]) -> int:
    fields.create_field(conn, workspace["id"], {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    return workspace["id"]


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    path.write_text("Email,First Name,Age\nann@example.com,Ann,30\nbad-address,Bob,2\nCy@Example.com,Cy,x\n"
                    "dan@example.com,Dan,\n", encoding="utf-8")
    return path


def test_import_json_summary(cli_json: Callable[..., Any], ws: int, sample: Path, conn: Any) -> None:
    summary = cli_json("contacts", "import", str(sample))
    assert summary["created"] == 3 and summary["updated"] == 0 and summary["skipped"] == 1
    assert [e["line"] for e in summary["errors"]] == [3]
    assert summary["left_out"] == [{"line": 4, "column": "Age", "reason": "Field 'age' must be a number."}]
    assert summary["dry_run"] is False and summary["rows"] == 4
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 3
    again = cli_json("contacts", "import", str(sample), "--bad-cells", "reject-row")
    assert [e["line"] for e in again["errors"]] == [3, 4] and again["cells_left_out"] == 0


def test_import_human_report_and_errors_file(cli: Callable[..., Any], ws: int, sample: Path, tmp_path: Path) -> None:
    errors = tmp_path / "rejected.csv"
    result = cli("contacts", "import", str(sample), "--errors", str(errors))
    assert result.exit_code == 0, result.stderr
    assert "Import finished" in result.stdout and "Rejected rows" in result.stdout
    assert "1 with an invalid email address" in result.stdout
    assert "Cells left out" in result.stdout and "Field 'age' must be a number." in result.stdout
    rows = list(csv.reader(io.StringIO(errors.read_text(encoding="utf-8"))))
    assert rows[0] == ["line", "reason", "Email", "First Name", "Age"]
    assert [r[0] for r in rows[1:]] == ["3"]
    bad = cli("contacts", "import", str(sample), "--bad-cells", "reject-all")
    assert bad.exit_code == 1 and "leave-out or reject-row" in bad.stderr


def test_import_from_stdin_with_map_tag_and_status(cli_json: Callable[..., Any], cli: Callable[..., Any], ws: int,
                                                   conn: Any) -> None:
    tag = tags.create_tag(conn, ws, {"name": "imported"})["id"]
    result = cli("contacts", "import", "-", "--map", "Courriel=email_address", "--map", "Notes=",
                 "--tag", str(tag), "--status", "UNCONFIRMED", "--json",
                 input="Courriel,Notes\nzoe@example.com,hello\n")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["created"] == 1
    row = conn.execute("SELECT id, status FROM contacts WHERE email = 'zoe@example.com'").fetchone()
    assert row["status"] == "UNCONFIRMED"
    assert [t["name"] for t in records.get_contact(conn, ws, row["id"])["tags"]] == ["imported"]


def test_dry_run_writes_nothing(cli: Callable[..., Any], ws: int, sample: Path, conn: Any) -> None:
    result = cli("contacts", "import", str(sample), "--dry-run")
    assert result.exit_code == 0
    assert "Dry run: nothing was written" in result.stdout and "would be created" in result.stdout
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0


def test_unknown_columns_fail_with_the_message(cli: Callable[..., Any], ws: int, tmp_path: Path, conn: Any) -> None:
    path = tmp_path / "x.csv"
    path.write_text("email,Shoe size\na@example.com,42\n")
    result = cli("contacts", "import", str(path))
    assert result.exit_code == 1
    assert "No field matches the column(s) 'Shoe size'" in result.stderr and result.stdout == ""
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0
    assert cli("contacts", "import", str(path), "--ignore-unknown", "--json").exit_code == 0


def test_usage_errors(cli: Callable[..., Any], ws: int, sample: Path, tmp_path: Path) -> None:
    assert cli("contacts", "import", str(sample), "--map", "no-equals-sign").exit_code == 2
    missing = cli("contacts", "import", str(tmp_path / "nope.csv"))
    assert missing.exit_code == 1 and "Cannot read" in missing.stderr
    bad_tag = cli("contacts", "import", str(sample), "--tag", "77")
    assert bad_tag.exit_code == 1 and "Tag ID 77 does not exist in this workspace" in bad_tag.stderr


def test_import_refused_while_another_runs(cli: Callable[..., Any], ws: int, sample: Path, conn: Any) -> None:
    bulk.acquire_io_lock(conn, ws, "import", "elsewhere")
    result = cli("contacts", "import", str(sample))
    assert result.exit_code == 1 and "Another contact import is running" in result.stderr


def test_export_csv_to_stdout_is_only_the_data(cli: Callable[..., Any], ws: int, sample: Path) -> None:
    cli("contacts", "import", str(sample), "--bad-cells", "reject-row")
    for args in ((), ("--json",)):
        result = cli("contacts", "export", *args)
        assert result.exit_code == 0
        rows = list(csv.DictReader(io.StringIO(result.stdout)))
        assert [r["email_address"] for r in rows] == ["ann@example.com", "dan@example.com"]
        assert rows[0]["age"] == "30" and rows[0]["first_name"] == "Ann"


def test_export_jsonl_and_fields(cli: Callable[..., Any], ws: int, sample: Path, conn: Any) -> None:
    cli("contacts", "import", str(sample), "--bad-cells", "reject-row")
    result = cli("contacts", "export", "--format", "jsonl", "--fields", "email_address,age")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [c["data"] for c in lines] == [{"email_address": "ann@example.com", "age": 30},
                                          {"email_address": "dan@example.com", "age": None}]
    bad = cli("contacts", "export", "--format", "xml")
    assert bad.exit_code == 1 and "csv, jsonl" in bad.stderr


def test_export_to_file_then_import_it_back(cli_json: Callable[..., Any], cli: Callable[..., Any], ws: int,
                                            sample: Path, tmp_path: Path, conn: Any) -> None:
    cli("contacts", "import", str(sample), "--bad-cells", "reject-row")
    before = [dict(r) for r in conn.execute("SELECT * FROM contacts ORDER BY id")]
    out = tmp_path / "export.csv"
    assert cli_json("contacts", "export", "--output", str(out)) == {"exported": 2, "format": "csv",
                                                                      "output": str(out)}
    assert not (tmp_path / "export.csv.part").exists()
    summary = cli_json("contacts", "import", str(out))
    assert (summary["created"], summary["updated"], summary["skipped"]) == (0, 2, 0)
    assert [dict(r) for r in conn.execute("SELECT * FROM contacts ORDER BY id")] == before


def test_refused_export_leaves_an_existing_file_alone(cli: Callable[..., Any], ws: int, tmp_path: Path,
                                                       conn: Any) -> None:
    out = tmp_path / "keep.csv"
    out.write_text("precious\n")
    bulk.acquire_io_lock(conn, ws, "import", "elsewhere")
    result = cli("contacts", "export", "--output", str(out))
    assert result.exit_code == 1 and "Another contact import is running" in result.stderr
    assert out.read_text() == "precious\n" and not (tmp_path / "keep.csv.part").exists()


def test_import_tells_which_addresses_need_smtputf8(cli: Callable[..., Any], cli_json: Callable[..., Any], ws: int,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "intl.csv"
    path.write_text("Email\nann@example.com\ngül.kowalski.6@example.com\nann@bücher.de\n", encoding="utf-8")
    summary = cli_json("contacts", "import", str(path), "--dry-run")
    assert (summary["created"], summary["warned"]) == (3, 1) and summary["warnings"][0]["line"] == 3
    shown = cli("contacts", "import", str(path)).stdout
    assert "Rows with a warning" in shown and "gül.kowalski.6@example.com has non-ASCII characters" in shown


def test_import_report_breaks_rejections_down_and_files_every_rejected_row(cli: Callable[..., Any], ws: int,
                                                                           tmp_path: Path, conn: Any) -> None:
    from marketing_cli.services.account import billing

    billing.set_allowance(conn, ws, "contacts", 1)
    path, errors = tmp_path / "in.csv", tmp_path / "rejected.csv"
    path.write_text("email,age\na@example.com,1\nb@example.com,2\nb@example.com,3\nc@example.com,4\nnope,5\n",
                    encoding="utf-8")
    result = cli("contacts", "import", str(path), "--errors", str(errors))
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "rejected 4" in text
    assert "3 over the contacts allowance of 1: mkt billing allowance set contacts N" in text
    assert "1 with an invalid email address" in text
    assert len(list(csv.reader(io.StringIO(errors.read_text(encoding="utf-8"))))) == 1 + 4

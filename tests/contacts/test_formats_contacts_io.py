"""Files as spreadsheets write them, through both faces of the import: semicolon and tab
delimiters, Latin-1 (named or detected), dates in other orders, national phone numbers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.contacts import fields
from tests.factories import error_of

EXCEL_EU = "Email;First Name;Age\nann@example.com;Ann;30\nbob@example.com;Bob;41\n"
TABBED = "Email\tFirst Name\tAge\nann@example.com\tAnn\t30\nbob@example.com\tBob\t41\n"
LATIN1 = "Email,First Name\nzoe@example.com,Zoë\nann@example.com,Anaïs\nmia@example.com,Müller\n"


@pytest.fixture
def ws(conn: Any, workspace: dict[str, Any]) -> int:
    fields.create_field(conn, workspace["id"], {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    fields.create_field(conn, workspace["id"], {"label": "Born", "merge_tag": "born", "type": "DATE"})
    return workspace["id"]


def post(client: Any, auth: dict[str, str], body: str | bytes, params: Any = None) -> Any:
    return client.post("/v1/contacts/import", params=params, content=body,
                       headers={**auth, "Content-Type": "text/csv"})


def names(conn: Any) -> dict[str, str]:
    rows = conn.execute("SELECT email, json_extract(data, '$.\"2\"') AS first FROM contacts").fetchall()
    return {r["email"]: r["first"] for r in rows}


def born(conn: Any, ws: int) -> dict[str, str]:
    field_id = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'born'", (ws,)).fetchone()[0]
    rows = conn.execute(f"SELECT email, json_extract(data, '$.\"{field_id}\"') AS born FROM contacts").fetchall()
    return {r["email"]: r["born"] for r in rows}


def cli_import(cli: Callable[..., Any], path: Path | str, *args: str, input: Any = None) -> tuple[int, Any, str]:
    result = cli("contacts", "import", str(path), *args, "--json", input=input)
    return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else None, result.stderr


# -- delimiters -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "name"), [(EXCEL_EU, "semicolon"), (TABBED, "tab")])
def test_semicolon_and_tab_files_through_the_cli(text: str, name: str, cli: Callable[..., Any], ws: int,
                                                 tmp_path: Path, conn: Any) -> None:
    path = tmp_path / "people.csv"
    path.write_text(text, encoding="utf-8")
    code, summary, stderr = cli_import(cli, path)
    assert code == 0, stderr
    assert (summary["created"], summary["skipped"], summary["delimiter"]) == (2, 0, name)
    assert summary["columns"] == {"Email": "email_address", "First Name": "first_name", "Age": "age"}
    assert names(conn) == {"ann@example.com": "Ann", "bob@example.com": "Bob"}
    human = cli("contacts", "import", "-", "--dry-run", input=text)
    assert human.exit_code == 0 and name in human.stdout


@pytest.mark.parametrize(("text", "name"), [(EXCEL_EU, "semicolon"), (TABBED, "tab")])
def test_semicolon_and_tab_files_through_the_api(text: str, name: str, client: Any, auth: dict[str, str], ws: int,
                                                 conn: Any) -> None:
    r = post(client, auth, text)
    assert r.status_code == 200, r.text
    summary = r.json()["data"]
    assert (summary["created"], summary["delimiter"], summary["encoding"]) == (2, name, "utf-8")
    assert names(conn) == {"ann@example.com": "Ann", "bob@example.com": "Bob"}


def test_the_delimiter_can_be_named(client: Any, auth: dict[str, str], cli: Callable[..., Any], ws: int,
                                    tmp_path: Path, conn: Any) -> None:
    # A header of one column has nothing to sniff: the cells hold commas, the file is pipe-delimited.
    text = "Email|First Name\nann@example.com|Ann, Jr\n"
    assert post(client, auth, text, {"delimiter": "|"}).json()["data"]["created"] == 1
    code, summary, _ = cli_import(cli, "-", "--delimiter", "semicolon", input="Email;First Name\nbob@example.com;Bob\n")
    assert code == 0 and summary["delimiter"] == "semicolon"
    assert names(conn) == {"ann@example.com": "Ann, Jr", "bob@example.com": "Bob"}
    message = ("The delimiter (--delimiter / delimiter=) must be one of: comma (,), semicolon (;), tab, pipe (|); "
               "got ':'.")
    assert error_of(post(client, auth, text, {"delimiter": ":"})) == (400, message)
    result = cli("contacts", "import", "-", "--delimiter", ":", input=text)
    assert (result.exit_code, result.stderr.strip()) == (1, message)


# -- encodings --------------------------------------------------------------------------------

def test_latin1_with_the_encoding_named(client: Any, auth: dict[str, str], cli: Callable[..., Any], ws: int,
                                        tmp_path: Path, conn: Any) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(LATIN1.encode("latin-1"))
    code, summary, stderr = cli_import(cli, path, "--encoding", "latin-1")
    assert code == 0, stderr
    assert (summary["created"], summary["encoding"], summary["encoding_detected"]) == (3, "iso8859-1", False)
    assert names(conn)["zoe@example.com"] == "Zoë" and names(conn)["ann@example.com"] == "Anaïs"
    api = post(client, auth, LATIN1.encode("latin-1"), {"encoding": "latin-1", "dry_run": "true"}).json()["data"]
    assert (api["updated"], api["encoding"]) == (3, "iso8859-1")


def test_latin1_detected_and_said_so(client: Any, auth: dict[str, str], cli: Callable[..., Any], ws: int,
                                     tmp_path: Path, conn: Any) -> None:
    data = LATIN1.encode("latin-1")
    path = tmp_path / "latin1.csv"
    path.write_bytes(data)
    api = post(client, auth, data, {"dry_run": "true"}).json()["data"]
    assert (api["created"], api["encoding"], api["encoding_detected"]) == (3, "cp1252", True)
    code, summary, stderr = cli_import(cli, path)
    assert code == 0, stderr
    assert (summary["created"], summary["encoding"], summary["encoding_detected"]) == (3, "cp1252", True)
    assert names(conn)["mia@example.com"] == "Müller"
    code, piped, _ = cli_import(cli, "-", "--dry-run", input=data)
    assert code == 0 and (piped["updated"], piped["encoding"]) == (3, "cp1252")
    human = cli("contacts", "import", str(path), "--dry-run")
    assert "cp1252 (detected)" in human.stdout


def test_a_utf8_file_with_one_bad_byte_is_not_re_decoded(client: Any, auth: dict[str, str], cli: Callable[..., Any],
                                                         ws: int, tmp_path: Path, conn: Any) -> None:
    data = "Email,First Name\nzoe@example.com,Zoë\n".encode() + b"ann@example.com,Ana\xefs\nmia@example.com,M\xfcller\n"
    path = tmp_path / "mixed.csv"
    path.write_bytes(data)
    bad = data.index(b"\xef")
    message = (f"The file is not UTF-8 text (invalid continuation byte at line 3, byte {bad}): "
               "nothing was imported."
               " If it is in another encoding, name it with --encoding (API: encoding=).")
    assert error_of(post(client, auth, data)) == (400, message)
    result = cli("contacts", "import", str(path))
    assert (result.exit_code, result.stderr.strip()) == (1, message)
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0


def test_an_encoding_that_does_not_fit_or_does_not_exist(client: Any, auth: dict[str, str], cli: Callable[..., Any],
                                                         ws: int, tmp_path: Path) -> None:
    data = b"Email,First Name\nzoe@example.com,Zo\x81\n"
    assert error_of(post(client, auth, data, {"encoding": "cp1252"})) == (
        400, "The file is not cp1252 text (character maps to <undefined> at line 2, byte 35): nothing was imported.")
    unknown = ("Unknown text encoding 'klingon' (--encoding / encoding=): give one Python knows, for example utf-8, "
               "cp1252, latin-1, utf-16.")
    assert error_of(post(client, auth, data, {"encoding": "klingon"})) == (400, unknown)
    result = cli("contacts", "import", "-", "--encoding", "klingon", input=data)
    assert (result.exit_code, result.stderr.strip()) == (1, unknown)


# -- dates ------------------------------------------------------------------------------------

DATES = "Email,Born\na@example.com,17.01.1987\nb@example.com,01/17/1987\nc@example.com,05/06/1987\n"


def test_dates_without_a_choice_are_read_only_when_unambiguous(cli: Callable[..., Any], ws: int, conn: Any,
                                                               client: Any, auth: dict[str, str]) -> None:
    code, summary, stderr = cli_import(cli, "-", input=DATES)
    assert code == 0, stderr
    assert summary["created"] == 3 and [e["line"] for e in summary["left_out"]] == [4]
    reason = summary["left_out"][0]["reason"]
    assert reason == ("Field 'born': '05/06/1987' is 1987-06-05 read day first and 1987-05-06 read month first: "
                      "choose with --day-first or --month-first (API: day_first=true|false), or give --date-format.")
    assert born(conn, ws) == {"a@example.com": "1987-01-17", "b@example.com": "1987-01-17", "c@example.com": None}
    assert post(client, auth, DATES, {"dry_run": "true"}).json()["data"]["left_out"] == summary["left_out"]


def test_dates_in_both_orders(cli: Callable[..., Any], ws: int, conn: Any, client: Any, auth: dict[str, str]) -> None:
    code, summary, stderr = cli_import(cli, "-", "--day-first", input=DATES)
    assert code == 0 and summary["skipped"] == 0, stderr
    assert born(conn, ws)["c@example.com"] == "1987-06-05"
    api = post(client, auth, DATES, {"day_first": "false"}).json()["data"]
    assert api["skipped"] == 0 and api["updated"] == 3
    assert born(conn, ws)["c@example.com"] == "1987-05-06"
    code, summary, stderr = cli_import(cli, "-", "--month-first", input="Email,Born\nc@example.com,06/05/1987\n")
    assert code == 0 and born(conn, ws)["c@example.com"] == "1987-06-05"


def test_a_date_format(cli: Callable[..., Any], ws: int, conn: Any, client: Any, auth: dict[str, str]) -> None:
    text = "Email,Born\na@example.com,05.06.1987\nb@example.com,1990-02-03\nc@example.com,06/05/1987\n"
    code, summary, stderr = cli_import(cli, "-", "--date-format", "%d.%m.%Y", "--bad-cells", "reject-row", input=text)
    assert code == 0, stderr
    assert summary["errors"] == [{"line": 4, "reason": "Field 'born' must be a date in the format %d.%m.%Y "
                                                       "(--date-format), or YYYY-MM-DD."}]
    assert born(conn, ws) == {"a@example.com": "1987-06-05", "b@example.com": "1990-02-03"}
    api = post(client, auth, "Email,Born\nc@example.com,05/06/1987\n", {"date_format": "%m/%d/%Y"}).json()["data"]
    assert api["created"] == 1 and born(conn, ws)["c@example.com"] == "1987-05-06"
    bad = ("The date format '%m/%Y' (--date-format / date_format=) must read a day, a month and a year, for example "
           "%d.%m.%Y or %m/%d/%Y.")
    assert error_of(post(client, auth, text, {"date_format": "%m/%Y"})) == (400, bad)
    both = cli("contacts", "import", "-", "--date-format", "%d.%m.%Y", "--day-first", input=text)
    assert both.exit_code == 1 and "not both" in both.stderr


# -- phone numbers ----------------------------------------------------------------------------

def test_a_refused_national_number_names_the_region_that_read_it(cli: Callable[..., Any], ws: int, conn: Any,
                                                                 client: Any, auth: dict[str, str]) -> None:
    phone = fields.create_field(conn, ws, {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT",
                                           "default_region": "US"})
    text = "Email,Phone\na@example.com,07911 200005\nb@example.com,+44 7911 200006\n"
    code, summary, stderr = cli_import(cli, "-", input=text)
    assert code == 0, stderr
    assert summary["created"] == 2 and summary["skipped"] == 0  # a@example.com without its number
    assert summary["left_out"] == [{"line": 2, "column": "Phone", "reason": (
        "phone number is invalid: '07911 200005' is not a valid phone number. It has no + country code, so it was "
        "read as a number of US, the phone_number field's default region: write it with + and its country code, "
        f"or change the default region (mkt fields update {phone['id']} --default-region CC; API: PATCH "
        f"/v1/fields/{phone['id']} with default_region).")}]
    assert post(client, auth, text, {"dry_run": "true"}).json()["data"]["left_out"] == summary["left_out"]
    # With the region the file was written for, the same row goes in whole.
    fields.update_field(conn, ws, phone["id"], {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT",
                                                "default_region": "GB"})
    again = post(client, auth, text).json()["data"]
    assert again["skipped"] == 0 and again["cells_left_out"] == 0


def test_a_national_number_without_a_region_says_how_to_set_one(cli: Callable[..., Any], ws: int,
                                                                conn: Any) -> None:
    phone = fields.create_field(conn, ws, {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT"})
    code, summary, _ = cli_import(cli, "-", input="Email,Phone\na@example.com,07911 200005\n")
    assert code == 0
    assert summary["left_out"][0]["reason"] == (
        "phone number is invalid: '07911 200005' has no country code (+...) and no default region is set. Set the "
        f"phone_number field's default region (mkt fields update {phone['id']} --default-region CC; API: PATCH "
        f"/v1/fields/{phone['id']} with default_region), or write the number with + and its country code.")


# -- odd options are 400s, never 500s ---------------------------------------------------------

@pytest.mark.parametrize("params", [
    {"encoding": "idna"}, {"encoding": "undefined"}, {"encoding": "rot13"}, {"encoding": "x" * 500},
    {"encoding": "utf-16"}, {"encoding": "\x00"},
    {"date_format": "%d%d%m%Y"}, {"date_format": "%"}, {"date_format": "%d" * 100}, {"date_format": "%m/%Y"},
    {"day_first": "maybe"}, {"delimiter": "\x00"}, {"delimiter": ",,"},
])
def test_odd_options_are_refused_whole(params: dict[str, str], client: Any, auth: dict[str, str], ws: int,
                                       conn: Any) -> None:
    r = post(client, auth, "Email,Born\na@example.com,05/06/1987\n", params)
    assert r.status_code == 400, r.text
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0


@pytest.mark.parametrize("cell", ["1987", "Tuesday", "9" * 40, "05/06", "31/02/1987", "x" * 300, "1/2/3/4"])
def test_cells_that_are_not_whole_dates_are_refused(cell: str, client: Any, auth: dict[str, str],
                                                    ws: int) -> None:
    for params in ({}, {"day_first": "true"}):
        summary = post(client, auth, f"Email,Born\na@example.com,{cell}\n", params).json()["data"]
        assert summary["cells_left_out"] == 1 and summary["left_out"][0]["reason"].startswith("Field 'born'")
        summary = post(client, auth, f"Email,Born\nb@example.com,{cell}\n",
                       {**params, "bad_cells": "reject-row"}).json()["data"]
        assert summary["skipped"] == 1 and summary["errors"][0]["reason"].startswith("Field 'born'")

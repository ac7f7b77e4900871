"""POST /v1/contacts/import and GET /v1/contacts/export: the HTTP twins of `mkt contacts import/export`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from marketing_cli.api import contacts_io as api_contacts_io
from marketing_cli.services.account import workspaces
from marketing_cli.services.contacts import bulk as contacts_io
from marketing_cli.services.contacts import fields, importer, tags
from marketing_cli.storage.db import connect
from tests.factories import error_of

SAMPLE = ("Email,First Name,Age\nann@example.com,Ann,30\nbad-address,Bob,2\nCy@Example.com,Cy,x\n"
          "dan@example.com,Dan,\n")


@pytest.fixture
def ws(conn: Any, workspace: dict[str, Any]) -> int:
    fields.create_field(conn, workspace["id"], {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    return workspace["id"]


def post_csv(client: Any, auth: dict[str, str], text: str | bytes, params: Any = None,
             content_type: str = "text/csv") -> Any:
    return client.post("/v1/contacts/import", params=params, content=text,
                       headers={**auth, "Content-Type": content_type})


def count(conn: Any) -> int:
    return conn.execute("SELECT count(*) FROM contacts").fetchone()[0]


def contact_by_email(client: Any, auth: dict[str, str], conn: Any, email: str) -> dict[str, Any]:
    contact_id = conn.execute("SELECT id FROM contacts WHERE email = ?", (email,)).fetchone()[0]
    response = client.get(f"/v1/contacts/{contact_id}", headers=auth)
    assert response.status_code == 200
    return response.json()["data"]


def test_import_creates_then_updates(client: Any, auth: dict, ws: int, conn: Any) -> None:
    response = post_csv(client, auth, "email,first_name,age\nann@example.com,Ann,30\nbob@example.com,Bob,41\n")
    assert response.status_code == 200
    summary = response.json()["data"]
    assert set(response.json()) == {"data"}  # envelope B
    assert (summary["rows"], summary["created"], summary["updated"], summary["skipped"]) == (2, 2, 0, 0)
    assert summary["columns"] == {"email": "email_address", "first_name": "first_name", "age": "age"}
    assert contact_by_email(client, auth, conn, "ann@example.com")["data"]["age"] == 30

    # Non-empty cells merge into the existing contact; an empty cell erases nothing.
    again = post_csv(client, auth, "email,first_name,age\nANN@example.com,,31\ncy@example.com,Cy,\n").json()["data"]
    assert (again["created"], again["updated"]) == (1, 1)
    ann = contact_by_email(client, auth, conn, "ann@example.com")
    assert ann["data"]["first_name"] == "Ann" and ann["data"]["age"] == 31
    found = client.post("/v1/contacts/search", headers=auth,
                        json={"fields": [{"merge_tag": "first_name", "operator": "EQUALS", "value": "Cy"}]})
    assert [c["data"]["email_address"] for c in found.json()["data"]["contacts"]] == ["cy@example.com"]


def test_bad_rows_are_reported_by_line_and_good_rows_go_in(client: Any, auth: dict, ws: int, conn: Any) -> None:
    summary = post_csv(client, auth, SAMPLE, {"bad_cells": "reject-row"}).json()["data"]
    assert (summary["created"], summary["skipped"], summary["rows"]) == (2, 2, 4)
    assert [e["line"] for e in summary["errors"]] == [3, 4]
    assert summary["errors"][1]["reason"] == "Field 'age' must be a number."
    assert sorted(r[0] for r in conn.execute("SELECT email FROM contacts")) == ["ann@example.com",
                                                                               "dan@example.com"]


def test_a_bad_optional_cell_is_left_out_by_default(client: Any, auth: dict, ws: int, conn: Any) -> None:
    summary = post_csv(client, auth, SAMPLE).json()["data"]
    assert (summary["created"], summary["skipped"], summary["rows"], summary["bad_cells"]) == (3, 1, 4, "leave-out")
    assert summary["left_out"] == [{"line": 4, "column": "Age", "reason": "Field 'age' must be a number."}]
    assert summary["left_out_by_column"] == [{"column": "Age", "count": 1}]
    assert summary["rejections"] == [{"kind": "email", "count": 1, "reason": "with an invalid email address"}]
    assert contact_by_email(client, auth, conn, "cy@example.com")["data"]["first_name"] == "Cy"
    assert error_of(post_csv(client, auth, SAMPLE, {"bad_cells": "drop"})) == (
        400, "The bad cells option must be leave-out or reject-row (--bad-cells / bad_cells=).")


def test_dry_run_writes_nothing_and_takes_no_lock(client: Any, auth: dict, ws: int, conn: Any) -> None:
    contacts_io.acquire_io_lock(conn, ws, "export", "elsewhere")  # a dry run does not need the lock
    summary = post_csv(client, auth, "email,tags\nann@example.com,vip\n", {"dry_run": "true"}).json()["data"]
    assert summary["dry_run"] is True and summary["created"] == 1 and summary["tags_created"] == ["vip"]
    assert count(conn) == 0 and conn.execute("SELECT count(*) FROM tags").fetchone()[0] == 0


def test_tag_status_and_map_parameters(client: Any, auth: dict, ws: int, conn: Any) -> None:
    first = tags.create_tag(conn, ws, {"name": "imported"})["id"]
    second = tags.create_tag(conn, ws, {"name": "spring"})["id"]
    params = [("tag", str(first)), ("tag", str(second)), ("status", "UNCONFIRMED"),
              ("map", "Courriel=email_address"), ("map", "Notes=")]
    response = post_csv(client, auth, "Courriel,Notes\nzoe@example.com,hello\n", params)
    assert response.status_code == 200 and response.json()["data"]["created"] == 1
    zoe = contact_by_email(client, auth, conn, "zoe@example.com")
    assert zoe["status"] == "UNCONFIRMED"
    assert [t["name"] for t in zoe["tags"]] == ["imported", "spring"]


@pytest.mark.parametrize(("params", "message"), [
    ({"tag": "77"}, "Tag ID 77 does not exist in this workspace"),
    ({"tag": "abc"}, "The query parameter 'tag' must be a tag ID (an integer), got 'abc'."),
    ({"dry_run": "maybe"}, "The query parameter 'dry_run' must be true or false."),
    ({"ignore_unknown": "2"}, "The query parameter 'ignore_unknown' must be true or false."),
    ({"status": "ASLEEP"}, "The status you provided is not valid."),
    ({"map": "no-equals-sign"},
     "Invalid query parameter 'map': expected 'Column Name=merge_tag', got 'no-equals-sign'."),
])
def test_bad_parameters_are_400_and_write_nothing(client: Any, auth: dict, ws: int, conn: Any,
                                                  params: dict[str, str], message: str) -> None:
    assert error_of(post_csv(client, auth, SAMPLE, params)) == (400, message)
    assert count(conn) == 0


def test_unknown_column_is_refused_unless_ignored(client: Any, auth: dict, ws: int, conn: Any) -> None:
    text = "email,Shoe size\na@example.com,42\n"
    status, message = error_of(post_csv(client, auth, text))
    assert status == 400 and message.startswith("No field matches the column(s) 'Shoe size'")
    assert count(conn) == 0
    response = post_csv(client, auth, text, {"ignore_unknown": "true"})
    assert response.status_code == 200 and response.json()["data"]["created"] == 1


def test_body_size_limit_and_empty_or_undecodable_body(client: Any, auth: dict, ws: int, conn: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert api_contacts_io.IMPORT_MAX_BYTES == 64 * 1024 * 1024
    monkeypatch.setattr(api_contacts_io, "IMPORT_MAX_BYTES", 2048)
    big = "email\n" + "".join(f"user{i}@example.com\n" for i in range(200))
    assert error_of(post_csv(client, auth, big)) == (413, "The request body is too large: the limit is 2 KiB.")
    assert count(conn) == 0
    assert post_csv(client, auth, "email\na@example.com\n").status_code == 200  # under the limit: fine
    for empty in ("", "  \r\n"):
        assert error_of(post_csv(client, auth, empty)) == (400, api_contacts_io.EMPTY_BODY)
    status, message = error_of(post_csv(client, auth, b"email\nb\xff@example.com\n"))
    assert status == 400 and message.startswith("The file is not UTF-8 text")


def test_content_types(client: Any, auth: dict, ws: int, conn: Any) -> None:
    text = "\ufeffemail\r\nann@example.com\r\n"  # a byte-order mark and CRLF lines are fine
    assert post_csv(client, auth, text.encode(), content_type="application/octet-stream").status_code == 200
    assert post_csv(client, auth, text, content_type="text/csv; charset=utf-8").json()["data"]["updated"] == 1
    assert error_of(post_csv(client, auth, text, content_type="application/json")) == (
        415, api_contacts_io.WRONG_TYPE)


def test_auth_and_methods(client: Any, auth: dict, ws: int) -> None:
    for response in (client.post("/v1/contacts/import", content=SAMPLE, headers={"Content-Type": "text/csv"}),
                     client.get("/v1/contacts/export")):
        assert error_of(response) == (401, "Please provide an API key.")
    bad_key = {"Authorization": "Bearer nope"}
    assert error_of(client.get("/v1/contacts/export", headers=bad_key))[0] == 401
    assert error_of(client.get("/v1/contacts/import", headers=auth)) == (405, "Method not allowed.")
    assert error_of(client.post("/v1/contacts/export", headers=auth)) == (405, "Method not allowed.")


def test_a_running_import_or_export_refuses_both(client: Any, auth: dict, ws: int, conn: Any,
                                                  cli: Callable[..., Any]) -> None:
    contacts_io.acquire_io_lock(conn, ws, "import", "elsewhere")
    for response in (post_csv(client, auth, SAMPLE), client.get("/v1/contacts/export", headers=auth)):
        status, message = error_of(response)
        assert status == 409 and message.startswith("Another contact import is running in this workspace")
    assert count(conn) == 0
    cli_result = cli("contacts", "import", "-", input=SAMPLE)
    assert cli_result.exit_code == 1 and message in cli_result.stderr  # the same refusal as the CLI's


def test_export_is_byte_for_byte_the_cli_export(client: Any, auth: dict, ws: int, conn: Any,
                                                cli: Callable[..., Any]) -> None:
    post_csv(client, auth, "email,first_name,age,tags\nann@example.com,\"Ann, Jr\",30,vip;x\n"
                           "dan@example.com,Dän,,\n")
    csv_response = client.get("/v1/contacts/export", headers=auth)
    assert csv_response.status_code == 200
    assert csv_response.headers["content-type"] == "text/csv; charset=utf-8"
    assert csv_response.headers["content-disposition"] == 'attachment; filename="contacts.csv"'
    assert csv_response.content == cli("contacts", "export").stdout_bytes
    assert csv_response.text.splitlines()[0].startswith("email_address,first_name,last_name,age,status")

    jsonl = client.get("/v1/contacts/export", params={"format": "jsonl", "fields": "email_address,age"},
                       headers=auth)
    assert jsonl.headers["content-type"] == "application/x-ndjson"
    assert jsonl.content == cli("contacts", "export", "--format", "jsonl", "--fields",
                                "email_address,age").stdout_bytes
    assert [json.loads(line)["data"] for line in jsonl.text.splitlines()] == [
        {"email_address": "ann@example.com", "age": 30}, {"email_address": "dan@example.com", "age": None}]
    assert conn.execute("SELECT count(*) FROM contact_io_locks").fetchone()[0] == 0


def test_export_then_import_round_trip(client: Any, auth: dict, ws: int, conn: Any) -> None:
    post_csv(client, auth, "email,first_name,age,tags,status\nann@example.com,Ann,30,vip,UNSUBSCRIBED\n"
                           "dan@example.com,Dan,,,\n")
    before = [dict(r) for r in conn.execute("SELECT * FROM contacts ORDER BY id")]
    exported = client.get("/v1/contacts/export", headers=auth)
    summary = post_csv(client, auth, exported.content).json()["data"]
    assert (summary["created"], summary["updated"], summary["skipped"]) == (0, 2, 0)
    assert [dict(r) for r in conn.execute("SELECT * FROM contacts ORDER BY id")] == before


def test_bad_export_requests_are_400_before_streaming(client: Any, auth: dict, ws: int, conn: Any) -> None:
    assert error_of(client.get("/v1/contacts/export?format=xml", headers=auth)) == (
        400, "The export format must be one of: csv, jsonl.")
    status, message = error_of(client.get("/v1/contacts/export?fields=email_address,shoe", headers=auth))
    assert status == 400 and "shoe" in message
    assert conn.execute("SELECT count(*) FROM contact_io_locks").fetchone()[0] == 0


def test_api_summary_equals_the_cli_json_summary(client: Any, auth: dict, ws: int, conn: Any, tmp_path: Path,
                                                  cli: Callable[..., Any]) -> None:
    # A second workspace with the same fields takes the same file through the CLI.
    other = workspaces.create_workspace(conn, "CLI twin")["workspace"]["id"]
    fields.create_field(conn, other, {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    text = ("Email,First Name,Age,tags\nann@example.com,Ann,30,new;vip\nbad-address,Bob,2,\n"
            "Cy@Example.com,Cy,x,vip\ndan@example.com,Dan,,\nann@example.com,,31,\n")
    path = tmp_path / "people.csv"
    path.write_text(text, encoding="utf-8")
    for args in (("--dry-run",), ()):
        api = post_csv(client, auth, text, {"dry_run": "true" if args else "false"}).json()["data"]
        result = cli("--workspace", str(other), "contacts", "import", str(path), *args, "--json")
        assert result.exit_code == 0, result.stderr
        assert api == json.loads(result.stdout)
        assert (api["created"], api["updated"], api["skipped"], api["tags_created"]) == (3, 1, 1, ["new", "vip"])
        assert api["cells_left_out"] == 1


def test_slow_work_runs_off_the_event_loop(client: Any, auth: dict, ws: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def on_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    real_import, real_chunks = contacts_io.import_contacts, contacts_io.ContactExport.chunks

    def spy_import(*args: Any, **kwargs: Any) -> Any:
        seen.append(f"import on loop: {on_loop()}")
        return real_import(*args, **kwargs)

    def spy_chunks(self: Any, *args: Any, **kwargs: Any) -> Any:
        for piece in real_chunks(self, *args, **kwargs):
            seen.append(f"export on loop: {on_loop()}")
            yield piece

    monkeypatch.setattr(contacts_io, "import_contacts", spy_import)
    monkeypatch.setattr(contacts_io.ContactExport, "chunks", spy_chunks)
    assert post_csv(client, auth, "email\nann@example.com\n").status_code == 200
    assert client.get("/v1/contacts/export", headers=auth).status_code == 200
    assert seen == ["import on loop: False", "export on loop: False", "export on loop: False"]


@pytest.mark.parametrize("how", ["send fails", "disconnect message", "request cancelled"])
def test_export_holds_the_lock_while_streaming_and_releases_it_on_disconnect(
        app: Any, db_path: Path, workspace: dict[str, Any], ws: int, conn: Any, how: str) -> None:
    for i in range(3):
        conn.execute("INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
                     " VALUES (?, ?, ?, 'SUBSCRIBED', '{}', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
                     (f"{i:024x}", ws, f"c{i}@example.com"))
    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.0" if how == "disconnect message" else "2.4"},
        "http_version": "1.1", "method": "GET", "scheme": "http", "path": "/v1/contacts/export",
        "raw_path": b"/v1/contacts/export", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"test"), (b"authorization", f"Bearer {workspace['api_key']}".encode())],
        "client": ("127.0.0.1", 5000), "server": ("test", 80),
    }
    locks_during: list[tuple[str, ...]] = []
    bodies: list[bytes] = []

    async def run() -> None:
        gone = anyio.Event()
        request_scope = anyio.CancelScope()  # what a server cancels when it drops the request

        async def receive() -> dict[str, Any]:
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] != "http.response.body":
                return
            bodies.append(message["body"])
            watcher = connect(db_path, upgrade=False)
            locks_during.extend(tuple(r) for r in watcher.execute("SELECT kind FROM contact_io_locks"))
            watcher.close()
            gone.set()
            if how == "send fails":
                raise OSError("the client went away")
            if how == "request cancelled":
                request_scope.cancel()

        # The server sees the failed send; the point is what is left behind.
        with request_scope, contextlib.suppress(Exception):
            await app(scope, receive, send)

    anyio.run(run)
    assert bodies and bodies[0].startswith(b"email_address,")  # the header went out, then the client left
    if how != "disconnect message":
        assert len(bodies) == 1  # nothing more was produced for a client that is gone
    assert set(locks_during) == {("export",)}  # held while the stream ran
    assert conn.execute("SELECT count(*) FROM contact_io_locks").fetchone()[0] == 0


def test_a_non_ascii_local_part_is_imported_with_a_warning(client: Any, auth: dict, ws: int, conn: Any) -> None:
    summary = post_csv(client, auth, "email\nann@example.com\ngül.kowalski.6@example.com\n".encode()).json()["data"]
    assert (summary["created"], summary["skipped"], summary["warned"]) == (2, 0, 1)
    assert summary["warnings"] == [{"line": 3, "reason": importer.NEEDS_SMTPUTF8.format(
        email="gül.kowalski.6@example.com")}]


def test_the_summary_counts_each_rejected_row_once_with_a_breakdown_by_reason(client: Any, auth: dict, ws: int,
                                                                              conn: Any) -> None:
    from marketing_cli.services.account import billing

    billing.set_allowance(conn, ws, "contacts", 1)
    text = "email,age\na@example.com,1\nb@example.com,2\nb@example.com,3\nc@example.com,x\nnope,4\n"
    summary = post_csv(client, auth, text).json()["data"]
    assert summary["skipped"] == len(summary["errors"]) == 4
    assert sorted(e["line"] for e in summary["errors"]) == [3, 4, 5, 6]
    assert [(r["kind"], r["count"]) for r in summary["rejections"]] == [("allowance", 3), ("email", 1)]
    assert summary["rejections"][0]["reason"] == ("over the contacts allowance of 1: mkt billing allowance set "
                                                  "contacts N")
    assert summary["left_out"] == []  # c@example.com's bad age: its row was rejected, nothing was left out of it

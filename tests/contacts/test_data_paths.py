"""The data paths under hostile input and process faults (issue 8, items 2, 3, 4, 11):
limits past which both faces answer a 400 naming the limit, one decoding path for
uploaded files with identical outcomes on both faces, bounded import batches, and the
import/export lock held by a live process (a SIGKILLed import blocks for seconds, not
ten minutes). docs/reliability.md, "Data paths", lists what each test proves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.kernel import limits, text_files
from marketing_cli.services.contacts import bulk
from marketing_cli.services.contacts import io_lock as contact_io_lock
from tests.factories import error_of, field, segment, tag

# -- limits: both faces, a 400 naming the limit, before any SQL -----------------------------


def _condition(n: int) -> dict[str, Any]:
    return {"merge_tag": "city", "operator": "CONTAINS", "value": f"x{n}"}


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    city = field(conn, ws, "city")
    tags = [tag(conn, ws, f"t{i}") for i in range(limits.SEARCH_TAGS + 1)]
    seg = segment(conn, ws, "Paris", {"condition": "AND", "filters": [
        {"type": "field", "field_id": city, "operator": "eq", "value": "Paris"}]})["id"]
    return {"ws": ws, "city": city, "tags": tags, "segment": seg}


def _search_cases(w: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    return [
        ({"fields": [_condition(n) for n in range(1000)]},
         "A search can have at most 100 conditions in 'fields'."),
        ({"tags": w["tags"]}, "The member 'tags' can hold at most 100 tag IDs."),
    ]


def test_search_limits_on_both_faces(client: Any, auth: dict[str, str], cli: Callable[..., Any],
                                     world: dict[str, Any]) -> None:
    for body, message in _search_cases(world):
        assert error_of(client.post("/v1/contacts/search", json=body, headers=auth)) == (400, message)
        result = cli("contacts", "search", "--body", json.dumps(body))
        assert (result.exit_code, result.stderr.strip()) == (1, message)
    # At the limit the search runs (no "Expression tree is too large").
    body = {"fields": [_condition(n) for n in range(limits.SEARCH_CONDITIONS)]}
    assert client.post("/v1/contacts/search", json=body, headers=auth).status_code == 200


def test_multi_select_options_per_condition(client: Any, auth: dict[str, str], conn: Any,
                                            world: dict[str, Any]) -> None:
    options = ",".join(f"o{i}" for i in range(150))
    field(conn, world["ws"], "langs", "DROPDOWN_MULTIPLE", definition=options)
    body = {"fields": [{"merge_tag": "langs", "operator": "CONTAINS", "value": [f"o{i}" for i in range(101)]}]}
    assert error_of(client.post("/v1/contacts/search", json=body, headers=auth)) == (
        400, "The member 'fields[0].value' can hold at most 100 options.")


def test_segment_values_in_all(client: Any, auth: dict[str, str], cli: Callable[..., Any],
                               world: dict[str, Any]) -> None:
    many = {"type": "field", "field_id": world["city"], "operator": "in", "value": [str(i) for i in range(600)]}
    filters = {"condition": "AND", "filters": [many, many]}
    message = "A segment's filters can hold at most 1000 values in all"
    assert error_of(client.post("/v1/segments", json={"name": "big", "filters": filters}, headers=auth)) == (
        400, message)
    result = cli("segments", "create", "--name", "big", "--filters", json.dumps(filters))
    assert (result.exit_code, result.stderr.strip()) == (1, message)


def test_audience_limits_on_both_faces(client: Any, auth: dict[str, str], cli: Callable[..., Any],
                                       world: dict[str, Any]) -> None:
    cases = [
        ([{"type": "ENTIRE_AUDIENCE"}] * 1000, "An audience can have at most 10 entries."),
        ({"type": "TAGS", "include_tag_ids": list(range(1, 1001))},
         "The member 'audience.include_tag_ids' can hold at most 100 IDs."),
        ([{"type": "SEGMENTS", "include_segment_ids": [world["segment"]],
           "exclude_segment_ids": [world["segment"]]}] * 5, None),
        ([{"type": "SEGMENTS", "include_segment_ids": [world["segment"]],
           "exclude_segment_ids": [world["segment"]]}] * 6,
         "An audience can use at most 10 segments in all."),
    ]
    for audience, message in cases:
        response = client.post("/v1/audience/count", json={"audience": audience}, headers=auth)
        result = cli("audience", "count", "--audience", json.dumps(audience))
        if message is None:  # exactly at the limits: answered
            assert response.status_code == 200 and result.exit_code == 0
            continue
        assert error_of(response) == (400, message)
        assert (result.exit_code, result.stderr.strip()) == (1, message)


def test_import_option_limits_on_both_faces(client: Any, auth: dict[str, str], cli: Callable[..., Any],
                                            world: dict[str, Any], tmp_path: Path, conn: Any) -> None:
    path = tmp_path / "a.csv"
    path.write_text("email\na@example.com\n")
    batch = "The batch size must be between 1 and 20,000 rows (one write transaction each)."
    for size in ("0", "20001", "5000000"):
        r = client.post("/v1/contacts/import", params={"batch_size": size}, content=path.read_bytes(),
                        headers={**auth, "Content-Type": "text/csv"})
        assert error_of(r) == (400, batch)
        result = cli("contacts", "import", str(path), "--batch-size", size)
        assert (result.exit_code, result.stderr.strip()) == (1, batch)
    message = "An import can tag contacts with at most 100 tags (--tag / tag=)."
    r = client.post("/v1/contacts/import", params=[("tag", str(t)) for t in world["tags"]],
                    content=path.read_bytes(), headers={**auth, "Content-Type": "text/csv"})
    assert error_of(r) == (400, message)
    result = cli("contacts", "import", str(path), *[a for t in world["tags"] for a in ("--tag", str(t))])
    assert (result.exit_code, result.stderr.strip()) == (1, message)
    r = client.post("/v1/contacts/import", params={"tag": "12x"}, content=b"email\n",
                    headers={**auth, "Content-Type": "text/csv"})
    assert error_of(r) == (400, "The query parameter 'tag' must be a tag ID (an integer), got '12x'.")
    assert conn.execute("SELECT COUNT(*) FROM contacts").fetchone()[0] == 0
    ok = cli("contacts", "import", str(path), "--batch-size", "20000", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["created"] == 1


# -- one decoding path: the same bad files through both faces ---------------------------------

GOOD_ROWS = "".join(f"user{i}@example.com,User {i}\n" for i in range(40))
BAD_FILES: dict[str, tuple[bytes, str]] = {
    # a bad byte in the middle, after whole batches of good rows
    "bad byte mid-file": (
        b"email,first_name\n" + GOOD_ROWS.encode() + b"caf\xe9@example.com,Bad\n" + GOOD_ROWS.encode(),
        "The file is not UTF-8 text (invalid continuation byte at line 42, byte {}): nothing was imported."
        " If it is in another encoding, name it with --encoding (API: encoding=).",
    ),
    "lone continuation byte": (
        b"email,first_name\na@example.com,\x80\n",
        "The file is not UTF-8 text (invalid start byte at line 2, byte 31): nothing was imported."
        " If it is in another encoding, name it with --encoding (API: encoding=).",
    ),
    "cut character at the end": (
        b"email,first_name\na@example.com,Zo\xc3",
        "The file is not UTF-8 text (unexpected end of data at line 2, byte 33): nothing was imported."
        " If it is in another encoding, name it with --encoding (API: encoding=).",
    ),
    "a surrogate encoded in UTF-8": (
        b"email,first_name\na@example.com,\xed\xa0\x80\n",
        "The file is not UTF-8 text (invalid continuation byte at line 2, byte 31): nothing was imported."
        " If it is in another encoding, name it with --encoding (API: encoding=).",
    ),
}


def _bad_file(name: str) -> tuple[bytes, str]:
    data, message = BAD_FILES[name]
    if "{}" in message:
        message = message.format(data.index(b"\xe9"))
    return data, message


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_bad_files_identical_on_both_faces(name: str, client: Any, auth: dict[str, str],
                                           cli: Callable[..., Any], workspace: dict[str, Any],
                                           tmp_path: Path, conn: Any) -> None:
    data, message = _bad_file(name)
    path = tmp_path / "bad.csv"
    path.write_bytes(data)
    r = client.post("/v1/contacts/import", params={"batch_size": "10"}, content=data,
                    headers={**auth, "Content-Type": "text/csv"})
    from_file = cli("contacts", "import", str(path), "--batch-size", "10")
    from_stdin = cli("contacts", "import", "-", "--batch-size", "10", input=data)
    assert error_of(r) == (400, message)
    assert (from_file.exit_code, from_file.stderr.strip()) == (1, message)
    assert (from_stdin.exit_code, from_stdin.stderr.strip()) == (1, message)
    assert conn.execute("SELECT COUNT(*) FROM contacts").fetchone()[0] == 0  # nothing written by any face
    assert conn.execute("SELECT COUNT(*) FROM contact_io_locks").fetchone()[0] == 0


def test_good_file_identical_on_both_faces(client: Any, auth: dict[str, str], cli_json: Callable[..., Any],
                                           workspace: dict[str, Any], tmp_path: Path) -> None:
    data = "\ufeffemail,first_name\nzoë@example.com,Zoë\n".encode()
    path = tmp_path / "good.csv"
    path.write_bytes(data)
    api = client.post("/v1/contacts/import", params={"dry_run": "true"}, content=data,
                      headers={**auth, "Content-Type": "text/csv"}).json()["data"]
    assert cli_json("contacts", "import", str(path), "--dry-run") == api
    assert api["created"] == 1 and api["errors"] == []


def test_check_utf8_across_chunk_boundaries() -> None:
    data = "é€😀\n".encode() * 50 + b"\xff" + "é\n".encode()
    expected = data.index(b"\xff")
    for size in (1, 2, 3, 5, 64):
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        with pytest.raises(Exception) as caught:
            text_files.check_utf8(chunks)
        assert caught.value.message == (  # type: ignore[attr-defined]
            f"The file is not UTF-8 text (invalid start byte at line 51, byte {expected}): nothing was imported."
            " If it is in another encoding, name it with --encoding (API: encoding=).")
    text_files.check_utf8([data[:10], data[10:expected]])  # the good part passes in any split


# -- the import lock is held by a live process ------------------------------------------------

def _mkt(db: Path, *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "marketing_cli", "--db", str(db), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.slow
def test_a_killed_import_blocks_for_seconds_not_minutes(conn: Any, workspace: dict[str, Any], db_path: Path,
                                                        tmp_path: Path) -> None:
    from marketing_cli.services.account import billing
    from marketing_cli.services.contacts import fields

    billing.set_allowance(conn, workspace["id"], "contacts", 1_000_000)
    big = tmp_path / "big.csv"
    big.write_text("email,first_name\n" + "".join(f"u{i}@example.com,U{i}\n" for i in range(60_000)))
    importer = _mkt(db_path, "contacts", "import", str(big), "--batch-size", "20", "--json")
    try:
        deadline = time.monotonic() + 30
        while billing.usage(conn, workspace["id"], "contacts") == 0:
            assert time.monotonic() < deadline and importer.poll() is None, "the import did not start"
            time.sleep(0.05)
        importer.send_signal(signal.SIGKILL)  # dies holding the lock, mid-file
        importer.communicate(timeout=10)
    finally:
        if importer.poll() is None:
            importer.kill()
            importer.communicate()
    killed_at = time.monotonic()
    written = billing.usage(conn, workspace["id"], "contacts")
    assert 0 < written < 60_000  # committed batches stay; the rest never came
    assert contact_io_lock.io_in_progress(conn, workspace["id"])  # the dead holder's lock, until it expires
    with pytest.raises(Exception) as refused:
        fields.create_field(conn, workspace["id"], {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    assert (refused.value.status, refused.value.detail) == (400, fields.IO_IN_PROGRESS)  # type: ignore[attr-defined]

    while contact_io_lock.io_in_progress(conn, workspace["id"]):
        time.sleep(0.1)
    waited = time.monotonic() - killed_at
    assert waited <= contact_io_lock.LOCK_SECONDS + 1
    fields.create_field(conn, workspace["id"], {"label": "Age", "merge_tag": "age", "type": "NUMBER"})
    small = tmp_path / "small.csv"
    small.write_text("email,age\nnew@example.com,41\n")
    again = _mkt(db_path, "contacts", "import", str(small), "--json")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert json.loads(out)["created"] == 1


def test_a_live_import_keeps_its_lock_past_the_expiry(conn: Any, workspace: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch slower than the whole expiry: the renewer thread keeps the lock alive."""
    monkeypatch.setattr(contact_io_lock, "LOCK_SECONDS", 0.5)
    monkeypatch.setattr(contact_io_lock, "RENEW_SECONDS", 0.1)
    seen: list[bool] = []

    def slow(rows: int) -> None:
        time.sleep(0.6)  # past the expiry, between two batches
        seen.append(contact_io_lock.io_in_progress(conn, workspace["id"]))

    result = bulk.import_contacts(conn, workspace["id"], ["email\n", "a@example.com\n", "b@example.com\n"],
                                         batch_size=1, progress=slow)
    assert result["created"] == 2 and seen and all(seen)
    assert not contact_io_lock.io_in_progress(conn, workspace["id"])  # released at the end


def test_an_expired_lock_is_taken_over(conn: Any, workspace: dict[str, Any]) -> None:
    from marketing_cli.kernel import clock
    from marketing_cli.storage.db import transaction

    contact_io_lock.acquire_io_lock(conn, workspace["id"], "import", "dead:1:x")
    with pytest.raises(Exception) as refused:
        contact_io_lock.acquire_io_lock(conn, workspace["id"], "export", "live:2:y")
    assert refused.value.message.startswith("Another contact import is running")  # type: ignore[attr-defined]
    with transaction(conn):
        conn.execute("UPDATE contact_io_locks SET expires_at = ?", (clock.now(),))
    contact_io_lock.acquire_io_lock(conn, workspace["id"], "export", "live:2:y")
    assert contact_io_lock.renew_io_lock(conn, workspace["id"], "dead:1:x") is False
    assert os.environ.get("MKT_DB")  # the autouse fixture points every test at its own file


@pytest.mark.slow
def test_a_killed_server_mid_http_import_blocks_for_seconds(conn: Any, workspace: dict[str, Any], db_path: Path,
                                                             tmp_path: Path) -> None:
    """SIGKILL of `mkt serve` while it imports over HTTP: its lock expires within LOCK_SECONDS."""
    import socket
    import threading

    import httpx

    from marketing_cli.services.account import billing

    billing.set_allowance(conn, workspace["id"], "contacts", 1_000_000)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = _mkt(db_path, "serve", "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "server did not start"
            try:
                httpx.get(base + "/v1/sms-rates", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        body = ("email,first_name\n" + "".join(f"u{i}@example.com,U{i}\n" for i in range(60_000))).encode()

        def post() -> None:
            try:
                httpx.post(base + "/v1/contacts/import", params={"batch_size": "20"}, content=body, timeout=60,
                           headers={"Authorization": f"Bearer {workspace['api_key']}", "Content-Type": "text/csv"})
            except httpx.HTTPError:
                pass  # the server dies under it

        client = threading.Thread(target=post)
        client.start()
        while billing.usage(conn, workspace["id"], "contacts") == 0:
            assert server.poll() is None and time.monotonic() < deadline + 30, "the import did not start"
            time.sleep(0.05)
        server.send_signal(signal.SIGKILL)
        server.communicate(timeout=10)
        client.join(30)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    killed_at = time.monotonic()
    assert contact_io_lock.io_in_progress(conn, workspace["id"])
    while contact_io_lock.io_in_progress(conn, workspace["id"]):
        time.sleep(0.1)
    assert time.monotonic() - killed_at <= contact_io_lock.LOCK_SECONDS + 1
    small = tmp_path / "small.csv"
    small.write_text("email\nafter@example.com\n")
    again = _mkt(db_path, "contacts", "import", str(small), "--json")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert json.loads(out)["created"] == 1

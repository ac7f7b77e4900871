"""End to end against a real `mkt serve` process on a free local port."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server, mkt

pytestmark = pytest.mark.slow


@pytest.fixture
def served(new_db: Callable[..., Any]) -> Iterator[tuple[Server, Path, str]]:
    db = new_db("served.db")
    key = mkt(db, "init", "--name", "Served")["api_key"]
    server = Server(db)
    yield server, db, key
    server.stop()


def test_serves_the_api_and_logs_each_request(served: tuple[Server, Path, str]) -> None:
    server, _, key = served
    r = httpx.get(server.base + "/v1/workspace", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200 and r.json()["data"]["workspace"]["name"] == "Served"
    assert httpx.get(server.base + "/v1/workspace").status_code == 401
    time.sleep(0.2)
    assert '"GET /v1/workspace HTTP/1.1" 200' in server.output()
    assert '"GET /v1/workspace HTTP/1.1" 401' in server.output()


def test_cli_writes_while_serving(served: tuple[Server, Path, str]) -> None:
    """CLI commands and HTTP writes on the same file at once: nothing lost, nothing locked."""
    server, db, key = served
    headers = {"Authorization": f"Bearer {key}"}
    errors: list[str] = []

    def patch_loop() -> None:
        with httpx.Client(base_url=server.base, headers=headers) as client:
            for i in range(40):
                r = client.patch("/v1/workspace", json={"name": f"Name {i}", "conversion_tracking": False})
                if r.status_code != 200:
                    errors.append(r.text)

    thread = threading.Thread(target=patch_loop)
    thread.start()
    created = [mkt(db, "keys", "create", "--name", f"k{i}") for i in range(4)]
    thread.join()
    assert errors == []
    for key_info in created:  # a key made by the CLI works over HTTP at once
        r = httpx.get(server.base + "/v1/workspace", headers={"Authorization": f"Bearer {key_info['key']}"})
        assert r.status_code == 200
    assert r.json()["data"]["workspace"]["name"] == "Name 39"
    mkt(db, "keys", "revoke", str(created[0]["id"]))
    r = httpx.get(server.base + "/v1/workspace", headers={"Authorization": f"Bearer {created[0]['key']}"})
    assert r.status_code == 401
    assert "database is locked" not in server.output()


def test_background_worker_runs_queued_jobs(served: tuple[Server, Path, str]) -> None:
    from marketing_cli import jobs
    from marketing_cli.storage.db import connect

    _, db, _ = served
    conn = connect(db)
    unknown = jobs.enqueue(conn, "no-such-type", {}, max_attempts=1)
    job_id = jobs.enqueue(conn, "segment.count", {"segment_id": 999_999}, workspace_id=1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status = conn.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
        if status == "done":
            break
        time.sleep(0.1)
    assert status == "done"  # the worker ran it (a segment that is gone: nothing to count)
    # A type the server has no handler for is never claimed: it waits for a runner that has one.
    assert conn.execute("SELECT status, attempts FROM jobs WHERE id = ?", (unknown,)).fetchone()[:] == ("queued", 0)
    conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stops_cleanly_on_signals(new_db: Callable[..., Any], sig: int) -> None:
    db = new_db("stop.db")
    mkt(db, "init", "--name", "Stopper")
    server = Server(db)
    code = server.stop(sig)
    out = server.output()
    assert code == 0, out
    assert "Finished server process" in out and "Traceback" not in out


def test_first_run_creates_a_workspace_and_shows_a_key(new_db: Callable[..., Any]) -> None:
    db = new_db("fresh.db", empty=True)  # a file not there yet; on PostgreSQL a database with no schema
    server = Server(db)
    try:
        out = server.output()
        key = re.search(r"^  export MKT_KEY=(mkt_\S+)$", out, re.MULTILINE).group(1)
        assert out.count(key) == 1  # shown once, not again in the example command
        curl = next(line for line in out.splitlines() if "curl" in line)
        assert curl == f'  curl -H "Authorization: Bearer $MKT_KEY" {server.base}/v1/workspace'
        assert len(curl) <= 80  # one line, pasted as it is, even in an 80-column terminal
        r = httpx.get(server.base + "/v1/workspace", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200
    finally:
        server.stop()
    second = Server(db)  # a second start creates nothing new
    try:
        assert not re.search(r"mkt_[A-Za-z0-9_-]{32}", second.output())  # no key shown (a URL may say mkt_)
    finally:
        second.stop()


def test_contacts_and_segment_count_through_the_server(served: tuple[Server, Path, str], tmp_path: Path) -> None:
    """Fields, an import from the CLI, upserts over HTTP, and the worker counting a segment."""
    server, db, key = served
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.base, headers=headers) as client:
        field = client.post("/v1/fields", json={"label": "City", "merge_tag": "city", "type": "TEXT"})
        assert field.status_code == 201, field.text
        csv_file = tmp_path / "people.csv"
        csv_file.write_text("email,city\nann@example.com,Paris\nbob@example.com,Lyon\n")
        summary = mkt(db, "contacts", "import", str(csv_file))
        assert summary["created"] == 2
        r = client.post("/v1/contacts/upsert", json={"email_address": "cat@example.com", "fields": {"city": "Paris"}})
        assert r.status_code == 200, r.text
        segment = client.post("/v1/segments", json={"name": "Parisians", "filters": {"condition": "AND", "filters": [
            {"type": "field", "field_id": field.json()["data"]["id"], "operator": "eq", "value": "Paris"}]}})
        assert segment.status_code == 201 and segment.json()["data"]["contact_count"] == 0
        segment_id = segment.json()["data"]["id"]
        deadline = time.monotonic() + 15
        count = 0
        while time.monotonic() < deadline:
            count = client.get(f"/v1/segments/{segment_id}").json()["data"]["contact_count"]
            if count:
                break
            time.sleep(0.2)
        assert count == 2  # counted by the worker inside `mkt serve`
        found = client.post("/v1/contacts/search", json={"fields": [
            {"merge_tag": "city", "operator": "EQUALS", "value": "Paris"}]}).json()["data"]
        assert found["pagination"]["total"] == 2

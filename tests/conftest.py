"""Shared fixtures: every test gets its own database file; nothing touches real data.

    db_path    a fresh database file path (MKT_DB points at it)
    conn       a connection to it (schema applied)
    workspace  {"id", "api_key", ...}: a workspace created with create_workspace
    client     Starlette TestClient over create_app(db_path); errors never re-raised
    auth       headers carrying the workspace's key
    cli        run `mkt` through typer's CliRunner against db_path
    cli_json   the same with --json appended, returning the parsed stdout
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.db import connect

# Pinned before any test module is imported: rich consoles created while modules load
# (collection) read COLUMNS once, and would otherwise be 80 wide under xdist.
os.environ["COLUMNS"] = "200"
os.environ["NO_COLOR"] = "1"
os.environ["TERM"] = "dumb"


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_DB", str(tmp_path / "mkt.db"))
    monkeypatch.delenv("MKT_WORKSPACE", raising=False)
    monkeypatch.delenv("MKT_SMTP_URL", raising=False)
    monkeypatch.setenv("MKT_OUTBOX", str(tmp_path / "outbox"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "mkt.db"


@pytest.fixture
def conn(db_path: Path) -> Iterator[Any]:
    connection = connect(db_path)
    yield connection
    connection.close()


@pytest.fixture
def workspace(conn: Any) -> dict[str, Any]:
    from marketing_cli.services import workspaces

    created = workspaces.create_workspace(conn, "Test workspace")
    return {"id": created["workspace"]["id"], "api_key": created["api_key"], **created["workspace"]}


@pytest.fixture
def app(db_path: Path, conn: Any) -> Any:
    from marketing_cli.api.app import create_app

    return create_app(db_path)


@pytest.fixture
def client(app: Any) -> Iterator[Any]:
    from starlette.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def auth(workspace: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {workspace['api_key']}"}


@pytest.fixture
def runner() -> Any:
    from typer.testing import CliRunner

    return CliRunner()


@pytest.fixture
def cli(runner: Any, db_path: Path) -> Callable[..., Any]:
    from marketing_cli.cli.main import app

    def invoke(*args: str, input: str | None = None) -> Any:
        return runner.invoke(app, ["--db", str(db_path), *args], input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def cli_json(cli: Callable[..., Any]) -> Callable[..., Any]:
    def invoke(*args: str) -> Any:
        result = cli(*args, "--json")
        assert result.exit_code == 0, result.stderr or result.stdout
        return json.loads(result.stdout)

    return invoke


@pytest.fixture
def segment_world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    """Three contacts, a City field and a vip tag (the API and CLI segment tests)."""
    from marketing_cli.services import fields, tags
    from tests.test_segment_filters import add_contact

    ws = workspace["id"]
    city = fields.create_field(conn, ws, {"label": "City", "merge_tag": "city", "type": "TEXT"})["id"]
    vip = tags.create_tag(conn, ws, {"name": "vip"})["id"]
    add_contact(conn, ws, "a@x.io", data={city: "Paris"}, tags=(vip,), delivered=2, opens=2)
    add_contact(conn, ws, "b@x.io", data={city: "Lyon"}, delivered=2, opens=0)
    add_contact(conn, ws, "c@x.io", phone="+447911123401", tags=(vip,), delivered=1, opens=0)
    return {"ws": ws, "city": city, "vip": vip}


def error_of(response: Any) -> tuple[int, str]:
    """(status, message) of an error response, checking the CONTRACT body shape."""
    body = response.json()
    assert set(body) == {"data", "error"} and body["data"] is None, body
    assert set(body["error"]) == {"status", "message"}, body
    assert body["error"]["status"] == response.status_code
    return response.status_code, body["error"]["message"]


# --- a real `mkt serve` process (end-to-end tests) ------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mkt(db: Path, *args: str) -> Any:
    """`mkt --db DB ARGS --json` in a subprocess; the parsed output (exit 0 asserted)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), *args, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


class Server:
    """`mkt serve` on a free port until stop(); output() is everything it printed."""

    def __init__(self, db: Path, *extra: str, preexec_fn: Callable[[], Any] | None = None) -> None:
        import subprocess
        import sys
        import time

        import httpx

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = db.parent / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "marketing_cli", "--db", str(db), "serve", "--port", str(self.port),
             "--worker-interval", "0.2", *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=preexec_fn,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                httpx.get(self.base + "/v1/sms-rates", timeout=0.5)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError("server did not start:\n" + self.output())

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def stop(self, sig: int | None = None) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if sig is None else sig)
        try:
            code = self.proc.wait(20)
        except Exception:
            self.proc.kill()
            code = self.proc.wait(5)
        self.log.close()
        return code

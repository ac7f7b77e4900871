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
from tests.factories import error_of  # noqa: F401 - kept for modules of other branches

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
    from tests.factories import filter_contact as add_contact

    ws = workspace["id"]
    city = fields.create_field(conn, ws, {"label": "City", "merge_tag": "city", "type": "TEXT"})["id"]
    vip = tags.create_tag(conn, ws, {"name": "vip"})["id"]
    add_contact(conn, ws, "a@x.io", data={city: "Paris"}, tags=(vip,), delivered=2, opens=2)
    add_contact(conn, ws, "b@x.io", data={city: "Lyon"}, delivered=2, opens=0)
    add_contact(conn, ws, "c@x.io", phone="+447911123401", tags=(vip,), delivered=1, opens=0)
    return {"ws": ws, "city": city, "vip": vip}

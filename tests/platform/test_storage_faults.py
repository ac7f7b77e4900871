"""A read-only database, a full disk, and the modes of new database files (docs/reliability.md)."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import db as db_module
from marketing_cli.db import connect, storage_error
from marketing_cli.errors import MktError
from marketing_cli.services.contacts import fields
from tests.conftest import error_of

READ_ONLY = ("The database is read-only: nothing was written. Check the permissions of the database file "
             "and of its folder.")
FULL = "The disk holding the database is full: nothing was written."
CITY = {"label": "City", "merge_tag": "city", "type": "TEXT"}


def _with_pragma(monkeypatch: pytest.MonkeyPatch, pragma: str) -> None:
    """Every connection opened from now on runs `pragma` (a read-only or full database)."""
    configure = db_module._configure

    def configured(conn: sqlite3.Connection) -> None:
        configure(conn)
        conn.execute(pragma)

    monkeypatch.setattr(db_module, "_configure", configured)


def _fill_the_disk(conn: sqlite3.Connection) -> None:
    """SQLite's page limit at the current size: the next write that needs a page is SQLITE_FULL."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_is_a_503_and_writes_nothing(conn: Any, workspace: dict[str, Any]) -> None:
    before = fields.list_fields(conn, workspace["id"])
    _fill_the_disk(conn)
    with pytest.raises(sqlite3.OperationalError) as raised:
        fields.create_field(conn, workspace["id"], CITY)
    error = storage_error(raised.value)
    assert isinstance(error, MktError) and (error.status, error.message) == (503, FULL)
    assert not conn.in_transaction
    assert fields.list_fields(conn, workspace["id"]) == before


def test_storage_error_maps_only_storage_faults() -> None:
    assert storage_error(sqlite3.OperationalError("attempt to write a readonly database")).message == READ_ONLY
    assert "disk I/O error" in storage_error(sqlite3.OperationalError("disk I/O error")).message
    assert storage_error(sqlite3.OperationalError("no such table: x")) is None


@pytest.fixture
def read_only_client(db_path: Path, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from starlette.testclient import TestClient

    from marketing_cli.api.app import create_app

    _with_pragma(monkeypatch, "PRAGMA query_only = ON")
    with TestClient(create_app(db_path), raise_server_exceptions=False) as client:
        yield client


def test_http_writes_on_a_read_only_database_get_503_and_reads_keep_working(
        read_only_client: Any, auth: dict[str, str]) -> None:
    r = read_only_client.post("/v1/fields", json=CITY, headers=auth)
    assert error_of(r) == (503, READ_ONLY)
    assert read_only_client.get("/v1/fields", headers=auth).status_code == 200
    assert read_only_client.get("/v1/workspace", headers=auth).status_code == 200


def test_http_writes_on_a_full_disk_get_503(db_path: Path, workspace: dict[str, Any], auth: dict[str, str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.testclient import TestClient

    from marketing_cli.api.app import create_app

    app = create_app(db_path)
    with TestClient(app, raise_server_exceptions=False) as client:
        client.get("/v1/workspace", headers=auth)  # opens the pool thread's connection
        _with_pragma(monkeypatch, "PRAGMA max_page_count = 1")  # connections opened from now on
        app.state.db = db_module.Database(db_path)
        assert error_of(client.post("/v1/fields", json=CITY, headers=auth)) == (503, FULL)
        assert client.get("/v1/fields", headers=auth).status_code == 200


def test_cli_on_a_read_only_database_prints_one_line(cli: Callable[..., Any], workspace: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _with_pragma(monkeypatch, "PRAGMA query_only = ON")
    result = cli("tags", "create", "vip")
    assert result.exit_code == 1
    assert result.stderr.strip() == READ_ONLY
    assert "Traceback" not in result.output
    assert cli("tags", "list", "--json").exit_code == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file modes; query_only stands in above")
def test_cli_on_a_read_only_file_prints_one_line(cli: Callable[..., Any], db_path: Path,
                                                 workspace: dict[str, Any]) -> None:
    db_path.chmod(0o444)
    try:
        result = cli("tags", "create", "vip")
    finally:
        db_path.chmod(0o600)
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_new_database_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "private.db"
    old_umask = os.umask(0o022)
    try:
        conn = connect(path)
        conn.execute("CREATE TABLE IF NOT EXISTS probe (x)")
        conn.execute("INSERT INTO probe VALUES (1)")
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode)
            assert mode == 0o600, (suffix, oct(mode))
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        conn.close()
    finally:
        os.umask(old_umask)


def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    connect(path).close()
    path.chmod(0o640)  # the operator's choice
    connect(path).close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640

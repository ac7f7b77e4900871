"""A read-only database, a full disk, and the modes of new database files (docs/reliability.md)."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import fields
from marketing_cli.storage import db as db_module
from marketing_cli.storage import postgres
from marketing_cli.storage.db import connect, storage_error
from tests.conftest import error_of

READ_ONLY = ("The database is read-only: nothing was written. Check the permissions of the database file "
             "and of its folder.")
FULL = "The disk holding the database is full: nothing was written."
READ_ONLY_POSTGRESQL = ("The database is read-only: nothing was written. Check that the PostgreSQL server accepts "
                        "writes (not a standby, default_transaction_read_only off).")
LOST = "The connection to the database was lost: try again."
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


@pytest.mark.sqlite_only(reason="SQLite's page limit stands in for a full disk")
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
    assert storage_error(postgres.OperationalError(postgres.LOST)).message == LOST
    assert storage_error(postgres.OperationalError(
        "cannot execute INSERT in a read-only transaction")).message == READ_ONLY_POSTGRESQL
    assert storage_error(postgres.OperationalError(  # PostgreSQL's full disk
        'could not extend file "base/16384/16385": No space left on device')).message == FULL


# --- PostgreSQL: a read-only database, a lost connection, a server that is not there ------------


@pytest.fixture
def read_only_postgresql(db_path: Any, workspace: dict[str, Any]) -> Iterator[None]:
    """The test's PostgreSQL database turned read-only for new sessions (as a standby, or an
    operator's default_transaction_read_only, makes it)."""
    name = str(db_path).rsplit("/", 1)[1]
    with closing(connect(db_path)) as admin:
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    yield


@pytest.mark.postgresql_only
def test_cli_on_a_read_only_postgresql_database_prints_one_line(cli: Callable[..., Any],
                                                                read_only_postgresql: None) -> None:
    result = cli("tags", "create", "vip")
    assert (result.exit_code, result.stderr.strip(), result.stdout) == (1, READ_ONLY_POSTGRESQL, "")
    listed = cli("tags", "list", "--json")
    assert listed.exit_code == 0, listed.output


@pytest.mark.postgresql_only
def test_http_writes_on_a_read_only_postgresql_database_get_503_and_reads_keep_working(
        client: Any, auth: dict[str, str], read_only_postgresql: None) -> None:
    assert error_of(client.post("/v1/fields", json=CITY, headers=auth)) == (503, READ_ONLY_POSTGRESQL)
    assert client.get("/v1/fields", headers=auth).status_code == 200
    assert client.get("/v1/workspace", headers=auth).status_code == 200


def serve_refused(db_path: Any) -> Any:
    """A real `mkt serve` on `db_path` that must stop by itself (the test fails if it serves)."""
    import subprocess
    import sys

    from tests.conftest import free_port

    try:
        return subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db_path), "serve", "--port",
                               str(free_port())], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("mkt serve started on a read-only database")


@pytest.mark.postgresql_only
def test_serve_on_a_read_only_postgresql_database_says_so_in_one_line_and_exits_1(
        db_path: Any, read_only_postgresql: None) -> None:
    out = serve_refused(db_path)
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines() == [
        f"mkt serve needs to write {db_path}, which is read-only: check that the PostgreSQL server accepts "
        "writes (not a standby, default_transaction_read_only off)."]
    assert out.stdout == "" and "Traceback" not in out.stderr


@pytest.mark.sqlite_only(reason="PRAGMA query_only; the real read-only file is test_database_file's (as nobody)")
def test_serve_checks_the_database_with_a_write(db_path: Path, workspace: dict[str, Any],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.storage.serving import check_servable

    check_servable(db_path)  # writable: nothing to say
    _with_pragma(monkeypatch, "PRAGMA query_only = ON")
    with pytest.raises(MktError) as raised:
        check_servable(db_path)
    assert raised.value.status == 503 and raised.value.message.startswith(f"mkt serve needs to write {db_path},")


@pytest.mark.postgresql_only
def test_sessions_ended_by_the_server_cost_a_reconnect_not_an_error(client: Any, auth: dict[str, str],
                                                                     db_path: Any, app: Any) -> None:
    """A PostgreSQL restart (or an operator's pg_terminate_backend) ends the server's sessions:
    the next requests are answered on new connections, never a 500."""
    assert client.get("/v1/workspace", headers=auth).status_code == 200
    name = str(db_path).rsplit("/", 1)[1]
    with closing(connect(db_path)) as admin:
        ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                              " WHERE datname = ? AND pid <> pg_backend_pid()", (name,)).fetchone()[0]
    assert ended >= 1
    answers = [client.get("/v1/workspace", headers=auth).status_code for _ in range(3)]
    assert 500 not in answers and answers[-1] == 200, answers
    assert client.post("/v1/fields", json=CITY, headers=auth).status_code == 201


@pytest.fixture
def read_only_client(db_path: Path, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from starlette.testclient import TestClient

    from marketing_cli.api.app import create_app

    _with_pragma(monkeypatch, "PRAGMA query_only = ON")
    with TestClient(create_app(db_path), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.sqlite_only(reason="PRAGMA query_only on every SQLite connection; PostgreSQL's read-only database below")
def test_http_writes_on_a_read_only_database_get_503_and_reads_keep_working(
        read_only_client: Any, auth: dict[str, str]) -> None:
    r = read_only_client.post("/v1/fields", json=CITY, headers=auth)
    assert error_of(r) == (503, READ_ONLY)
    assert read_only_client.get("/v1/fields", headers=auth).status_code == 200
    assert read_only_client.get("/v1/workspace", headers=auth).status_code == 200


@pytest.mark.sqlite_only(reason="SQLite's page limit stands in for a full disk")
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


@pytest.mark.sqlite_only(reason="PRAGMA query_only on every SQLite connection; PostgreSQL's read-only database below")
def test_cli_on_a_read_only_database_prints_one_line(cli: Callable[..., Any], workspace: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _with_pragma(monkeypatch, "PRAGMA query_only = ON")
    result = cli("tags", "create", "vip")
    assert result.exit_code == 1
    assert result.stderr.strip() == READ_ONLY
    assert "Traceback" not in result.output
    assert cli("tags", "list", "--json").exit_code == 0


@pytest.mark.sqlite_only(reason="a database file's mode")
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file modes; query_only stands in above")
def test_cli_on_a_read_only_file_prints_one_line(cli: Callable[..., Any], db_path: Path,
                                                 workspace: dict[str, Any]) -> None:
    db_path.chmod(0o444)
    try:
        result = cli("tags", "create", "vip")
    finally:
        db_path.chmod(0o600)
    assert result.exit_code == 1 and "Traceback" not in result.output


@pytest.mark.sqlite_only(reason="the modes of database files")
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


@pytest.mark.sqlite_only(reason="the modes of database files")
def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    connect(path).close()
    path.chmod(0o640)  # the operator's choice
    connect(path).close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640

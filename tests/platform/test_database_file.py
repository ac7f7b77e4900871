"""The database file on an operator's first hour (docs/cli.md "The database file", docs/reliability.md).

- only `mkt init` and `mkt serve` create a database: a mistyped `--db` is an error that creates nothing;
- a failed `mkt init` removes what it created and leaves an existing database untouched;
- a database in a read-only folder, or a read-only file, answers reads and refuses writes with
  the documented message (run as a user that file modes stop: the tests run as root).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import workspaces
from marketing_cli.services.contacts import tags
from marketing_cli.storage.db import connect
from tests.engines import tables

REPO = Path(__file__).resolve().parents[2]
READ_ONLY = ("The database is read-only: nothing was written. Check the permissions of the database file "
             "and of its folder.")


def missing(path: Path) -> str:
    return f"No database at {path} (create one with mkt init)."


# --- A missing file: only init and serve create one ------------------------------------------


@pytest.mark.sqlite_only(reason="a database file's path: PostgreSQL's missing database is tested below")
@pytest.mark.parametrize("args", [
    ("tags", "list"),
    ("tags", "list", "--json"),
    ("tags", "create", "vip"),
    ("workspace", "show"),
    ("keys", "create", "--name", "ci"),
    ("jobs", "run", "--json"),
    ("contacts", "search", "--json"),
])
def test_a_command_on_a_missing_database_says_so_and_creates_nothing(runner: Any, tmp_path: Path,
                                                                     args: tuple[str, ...]) -> None:
    from marketing_cli.cli.main import app

    typo = tmp_path / "typo" / "mkt.db"
    result = runner.invoke(app, ["--db", str(typo), *args], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == missing(typo)
    assert result.stdout == ""
    assert not typo.parent.exists()


@pytest.mark.sqlite_only(reason="a database file's path: PostgreSQL's missing database is tested below")
def test_a_mistyped_db_in_an_existing_folder_creates_no_file(tmp_path: Path) -> None:
    """The real program (exit status, stderr) with the path from MKT_DB."""
    typo = tmp_path / "tyop.db"
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "tags", "list", "--json"],
                         env={**os.environ, "MKT_DB": str(typo), "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == missing(typo) and out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.sqlite_only(reason="a database file's path: PostgreSQL's missing database is tested below")
def test_connect_without_create_refuses_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    with pytest.raises(MktError) as err:
        connect(path, create=False)
    assert err.value.message == missing(path)
    assert not path.exists()
    connect(path).close()  # the library's default (tests, the server) still creates
    connect(path, create=False).close()


@pytest.mark.sqlite_only(reason="a database file's path: PostgreSQL's missing database is tested below")
def test_init_creates_the_database_and_its_folders(cli_json: Callable[..., Any], runner: Any,
                                                   tmp_path: Path) -> None:
    from marketing_cli.cli.main import app

    path = tmp_path / "new" / "dir" / "mkt.db"
    result = runner.invoke(app, ["--db", str(path), "init", "--name", "Acme", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["workspace"]["name"] == "Acme"
    assert runner.invoke(app, ["--db", str(path), "tags", "list", "--json"]).exit_code == 0


# --- A failed init ----------------------------------------------------------------------------


@pytest.mark.sqlite_only(reason="the file and folders a failed init made: on PostgreSQL init creates no database")
@pytest.mark.parametrize("name", ["A", "x" * 51])
def test_a_failed_init_removes_the_file_it_created(runner: Any, tmp_path: Path, name: str) -> None:
    from marketing_cli.cli.main import app

    path = tmp_path / "fresh.db"
    result = runner.invoke(app, ["--db", str(path), "init", "--name", name], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr.strip() == "Workspace name must be between 2 and 50 characters."
    assert list(tmp_path.iterdir()) == []  # no file, no -wal, no -shm


@pytest.mark.sqlite_only(reason="the file and folders a failed init made: on PostgreSQL init creates no database")
def test_a_failed_init_removes_the_folders_it_made(runner: Any, tmp_path: Path) -> None:
    from marketing_cli.cli.main import app

    path = tmp_path / "a" / "b" / "mkt.db"
    result = runner.invoke(app, ["--db", str(path), "init", "--name", "A"], catch_exceptions=False)
    assert result.exit_code == 1
    assert list(tmp_path.iterdir()) == []


def _snapshot(path: Any) -> list[tuple[str, list[tuple[Any, ...]]]]:
    conn = connect(path, upgrade=False)
    try:
        return [(n, sorted((tuple(r) for r in conn.execute(f'SELECT * FROM "{n}"')), key=repr)) for n in tables(conn)]
    finally:
        conn.close()


@pytest.mark.parametrize("with_workspace", [True, False])
def test_a_failed_init_leaves_an_existing_database_untouched(cli: Callable[..., Any], db_path: Path,
                                                             with_workspace: bool) -> None:
    conn = connect(db_path)
    if with_workspace:
        ws = workspaces.create_workspace(conn, "Kept")["workspace"]["id"]
        tags.create_tag(conn, ws, {"name": "vip"})
    conn.close()
    before = _snapshot(db_path)
    files = sorted(p.name for p in db_path.parent.iterdir()) if isinstance(db_path, Path) else None
    result = cli("init", "--name", "A")
    assert result.exit_code == 1
    assert _snapshot(db_path) == before
    if files is not None:
        assert db_path.exists() and sorted(p.name for p in db_path.parent.iterdir()) == files


# --- Read-only folder and file, as a user that file modes stop ----------------------------------


def _as_unprivileged(env: dict[str, str]) -> list[str] | None:
    """The command prefix that runs a program as `nobody`, or None when this machine has none.

    setpriv keeps CAP_DAC_READ_SEARCH for the child (reads and directory searches bypass file
    modes, writes do not): the Python of this test run may live in a folder that `nobody`
    cannot read (/root/.pyenv). runuser is the fallback where Python is readable by everyone.
    """
    if os.geteuid() != 0:
        return []  # already a user that file modes stop
    prefixes = []
    if shutil.which("setpriv"):
        prefixes.append(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                         "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"])
    if shutil.which("runuser"):
        prefixes.append(["runuser", "-u", "nobody", "--"])
    for prefix in prefixes:
        probe = subprocess.run([*prefix, sys.executable, "-c", "import os, typer; print(os.geteuid())"],
                               env=env, capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and probe.stdout.strip() == "65534":
            return prefix
    return None


@pytest.fixture
def unprivileged() -> Iterator[tuple[Path, Callable[..., subprocess.CompletedProcess[str]]]]:
    """A folder owned by the unprivileged user holding a database (a workspace, a tag `vip`), and
    `mkt(*args)` running the real program as that user on it."""
    folder = Path(tempfile.mkdtemp(prefix="mkt-ro-"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(folder), "MKT_OUTBOX": str(folder / "outbox")}
    prefix = _as_unprivileged(env)
    if prefix is None:
        shutil.rmtree(folder)
        pytest.skip("neither setpriv nor runuser can run this Python as nobody")
    path = folder / "mkt.db"
    conn = connect(path)
    ws = workspaces.create_workspace(conn, "Read only")["workspace"]["id"]
    tags.create_tag(conn, ws, {"name": "vip"})
    conn.close()
    if os.geteuid() == 0:
        for entry in (folder, *folder.iterdir()):
            os.chown(entry, 65534, 65534)

    def mkt(*args: str, db: Path = path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, sys.executable, "-m", "marketing_cli", "--db", str(db), *args],
                              env=env, capture_output=True, text=True, timeout=timeout)

    try:
        yield path, mkt
    finally:
        folder.chmod(0o700)
        shutil.rmtree(folder)


def _reads_work_and_writes_are_refused(path: Path, mkt: Callable[..., Any]) -> None:
    listed = mkt("tags", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)] == ["vip"]
    shown = mkt("workspace", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["workspace"]["name"] == "Read only"
    for write in (("tags", "create", "new"), ("keys", "create", "--name", "ci")):
        refused = mkt(*write)
        assert refused.returncode == 1
        assert refused.stderr.strip() == READ_ONLY
        assert "Traceback" not in refused.stderr and refused.stdout == ""


@pytest.mark.sqlite_only(reason="file and folder modes: PostgreSQL's read-only database is in test_storage_faults")
def test_a_database_in_a_read_only_folder_reads_and_refuses_writes(unprivileged: Any) -> None:
    path, mkt = unprivileged
    path.parent.chmod(0o555)
    _reads_work_and_writes_are_refused(path, mkt)
    assert sorted(p.name for p in path.parent.iterdir()) == ["mkt.db"]
    path.parent.chmod(0o755)  # the operator fixes the folder: writes work again
    done = mkt("tags", "create", "new", "--json")
    assert done.returncode == 0, done.stderr


@pytest.mark.sqlite_only(reason="file and folder modes: PostgreSQL's read-only database is in test_storage_faults")
def test_a_read_only_database_file_reads_refuses_writes_and_leaves_no_files(unprivileged: Any) -> None:
    path, mkt = unprivileged
    path.chmod(0o444)
    _reads_work_and_writes_are_refused(path, mkt)
    # No read-only -wal/-shm left beside it: they would go on refusing writes after the fix.
    assert sorted(p.name for p in path.parent.iterdir()) == ["mkt.db"]
    path.chmod(0o600)
    done = mkt("tags", "create", "new", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(t["name"] for t in json.loads(mkt("tags", "list", "--json").stdout)) == ["new", "vip"]


@pytest.mark.sqlite_only(reason="file and folder modes: PostgreSQL's read-only database is in test_storage_faults")
@pytest.mark.parametrize("what", ["file", "folder"])
def test_serve_on_a_read_only_database_says_so_in_one_line_and_exits_1(unprivileged: Any, what: str) -> None:
    """Not a server that answers reads and fills its log with the worker's tracebacks."""
    from tests.conftest import free_port

    path, mkt = unprivileged
    (path if what == "file" else path.parent).chmod(0o444 if what == "file" else 0o555)
    try:
        out = mkt("serve", "--port", str(free_port()), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("mkt serve started on a read-only database")
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines() == [
        f"mkt serve needs to write {path}, which is read-only: check the permissions of the database file and "
        "of its folder, and that its file system is not mounted read-only."]
    assert out.stdout == "" and "Traceback" not in out.stderr
    path.parent.chmod(0o755)
    path.chmod(0o600)
    assert sorted(p.name for p in path.parent.iterdir()) == ["mkt.db"]  # nothing left beside it


@pytest.mark.sqlite_only(reason="file and folder modes: PostgreSQL's read-only database is in test_storage_faults")
def test_a_missing_file_in_a_read_only_folder_is_the_missing_message(unprivileged: Any) -> None:
    path, mkt = unprivileged
    path.parent.chmod(0o555)
    typo = path.parent / "typo.db"
    out = mkt("tags", "list", db=typo)
    assert out.returncode == 1 and out.stderr.strip() == missing(typo)
    assert not typo.exists()


# --- PostgreSQL: a database that is not there, a server that is not there -------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.postgresql_only
@pytest.mark.parametrize("args", [("tags", "list"), ("tags", "create", "vip"), ("init", "--name", "Acme"),
                                  ("jobs", "run", "--json")])
def test_a_mistyped_postgresql_database_is_one_line_and_creates_nothing(runner: Any, db_path: Any,
                                                                        args: tuple[str, ...]) -> None:
    """A database name the server does not have: the server's own words on one line, exit 1, and
    no database made (mkt never creates a PostgreSQL database: the operator does)."""
    from marketing_cli.cli.main import app

    typo = str(db_path).rsplit("/", 1)[0] + "/mkt_tyop"
    result = runner.invoke(app, ["--db", typo, *args], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f'Cannot connect to the database {typo}: connection failed: connection to server at "127.0.0.1", port '
        f'{typo.rsplit(":", 1)[1].split("/")[0]} failed: FATAL:  database "mkt_tyop" does not exist.']
    with closing(connect(db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'mkt_tyop'").fetchone()[0] == 0


@pytest.mark.postgresql_only
@pytest.mark.parametrize("args", [("tags", "list"), ("init", "--name", "Acme"), ("serve", "--port", "0")])
def test_a_postgresql_server_that_is_not_there_is_one_line(args: tuple[str, ...]) -> None:
    """Nothing listens at the URL's port (a stopped server, a wrong port): the real program says
    so on one line and exits 1, `mkt serve` included, with no traceback."""
    url = f"postgresql://postgres@127.0.0.1:{_free_port()}/mkt"
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", url, *args],
                         env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (1, "")
    port = url.rsplit(":", 1)[1].split("/")[0]
    assert out.stderr.strip().splitlines() == [
        f'Cannot connect to the database {url}: connection failed: connection to server at "127.0.0.1", port {port} '
        "failed: Connection refused."]

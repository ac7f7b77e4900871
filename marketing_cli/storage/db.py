"""The SQLite database: opening it, upgrading it, and transactions.

Every connection runs in WAL mode with foreign keys on and a busy timeout, so `mkt serve`
and a CLI command can write the same file at once: readers never block, and a writer waits
for the other writer instead of failing with "database is locked". Every write runs in
one `BEGIN IMMEDIATE` transaction (`transaction(conn)`), taken before the first read of
the operation so that no write ever has to upgrade a stale read snapshot.

The schema lives in `schema.sql` (shipped inside the package as `marketing_cli/schema.sql`,
read from the repository root in a source checkout) as numbered steps; `connect` applies
the steps above the file's `PRAGMA user_version`.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from marketing_cli.errors import MktError
from marketing_cli.storage import deferred_indexes, dialect, field_sql, postgres

BUSY_TIMEOUT_MS = 30_000
_STEP = re.compile(r"^-- version: (\d+)\s*$", re.MULTILINE)


def default_db_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("mkt")) / "workspace.db"


def resolve_db_path(path: str | os.PathLike[str] | None) -> Any:
    """The database to open: a SQLite file's Path, or a `postgresql://` URL (postgres.DatabaseUrl)."""
    chosen = path or os.environ.get("MKT_DB")
    if isinstance(chosen, postgres.DatabaseUrl):
        return chosen
    if chosen and postgres.is_url(chosen):
        return postgres.DatabaseUrl(str(chosen))
    return Path(chosen) if chosen else default_db_path()


def is_postgresql(conn: Any) -> bool:
    return dialect.postgresql(conn)


def marks(values: Any) -> str:
    """`?, ?, ...`, one per value: an `IN (...)` list of parameters. A list of ids read this way
    goes through the key on both engines; PostgreSQL's planner cannot see into
    `IN (SELECT ... FROM json_each(?))` and may scan the whole table instead (the send paths'
    fencing read: every message of the instance per round, 10-17 ms at 20,000 messages)."""
    return ", ".join("?" * len(values))


@cache
def schema_text() -> str:
    # An installed wheel carries schema.sql inside the package (pyproject's force-include);
    # a source checkout has it at the repository root. (A plain path beats
    # importlib.resources here: that import alone costs 15 ms of every command's start-up.)
    here = Path(__file__).resolve().parent.parent  # marketing_cli/
    for candidate in (here / "schema.sql", here.parent / "schema.sql"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise RuntimeError(f"schema.sql is missing from {here}")


@cache
def postgresql_schema_steps() -> tuple[tuple[int, str], ...]:
    """schema.postgresql.sql as (version, sql) steps: the baseline, then one step per later version."""
    here = Path(__file__).resolve().parent.parent  # marketing_cli/
    for candidate in (here / "schema.postgresql.sql", here.parent / "schema.postgresql.sql"):
        if candidate.is_file():
            return _steps(candidate.read_text(encoding="utf-8"))
    raise RuntimeError(f"schema.postgresql.sql is missing from {here}")


def _steps(text: str) -> tuple[tuple[int, str], ...]:
    marks = list(_STEP.finditer(text))
    steps = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        steps.append((int(mark.group(1)), text[mark.end() : end]))
    return tuple(steps)


@cache
def schema_steps() -> tuple[tuple[int, str], ...]:
    """The schema as (version, sql) steps, in order."""
    steps = _steps(schema_text())
    versions = [v for v, _ in steps]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"schema.sql steps must be numbered 1..N, found {versions}")
    return tuple(steps)


def latest_version() -> int:
    return schema_steps()[-1][0]


def split_statements(sql: str) -> list[str]:
    """Split a script into statements (triggers keep their inner semicolons)."""
    statements, buffer = [], ""
    for line in sql.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise RuntimeError(f"incomplete SQL statement in schema.sql: {buffer[:80]!r}")
    return statements


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode = WAL")


def migrate(conn: sqlite3.Connection, target: int | None = None) -> int:
    """Apply the schema steps above the file's version (up to `target`); returns the version."""
    target = latest_version() if target is None else target
    if is_postgresql(conn):
        return postgres.migrate(conn, postgresql_schema_steps(), target)
    if conn.execute("PRAGMA user_version").fetchone()[0] >= target:
        return target
    with transaction(conn):
        # Re-read inside the write lock: another process may have just migrated.
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        for version, sql in schema_steps():
            if current < version <= target:
                for statement in split_statements(sql):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version}")
        if current >= 1 and target >= 2:
            # An upgraded file may hold fields made before contacts existed: give them the
            # per-field expression indexes that new fields get when they are created.
            field_sql.create_all_indexes(conn)
    return target


# What SQLite says when the storage, not the request, is at fault; the faces answer these
# with 503 / exit 1 and this message (api/responses.server_error_handler, cli/output.MktGroup).
STORAGE_ERRORS = (
    ("readonly database", "The database is read-only: nothing was written. Check the permissions of the "
                          "database file and of its folder."),
    # PostgreSQL's: a standby or a database whose default_transaction_read_only is on.
    ("in a read-only transaction", "The database is read-only: nothing was written. Check that the PostgreSQL "
                                   "server accepts writes (not a standby, default_transaction_read_only off)."),
    ("database or disk is full", "The disk holding the database is full: nothing was written."),
    ("no space left on device", "The disk holding the database is full: nothing was written."),  # PostgreSQL's
    ("disk i/o error", "The database could not be written (disk I/O error): nothing was written."),
    (postgres.LOST, "The connection to the database was lost: try again."),
)


# A write refused by a database that `mkt db copy --retire-source` retired (storage/copy/retire.py):
# its triggers raise a message holding this phrase, which names the database that took over.
RETIRED = "was retired by `mkt db copy`"


def storage_error(exc: sqlite3.Error) -> MktError | None:
    """The MktError(503) for a read-only or retired database, a full disk or an I/O error; None for
    anything else."""
    text = str(exc).lower()
    if RETIRED.lower() in text:  # the message itself says where the data went
        return MktError(503, str(exc).strip().splitlines()[0])
    for needle, message in STORAGE_ERRORS:
        if needle in text:
            return MktError(503, message)
    return None


def missing_database(db_path: Path) -> MktError:
    """What every command but `mkt init` and `mkt serve` says about a database file that does not exist."""
    return MktError(404, f"No database at {db_path} (create one with mkt init).")


def _create_private(db_path: Path) -> list[Path]:
    """Create the database file readable by its owner only (0600), and its missing folders (0700).

    Returns what it created, the file first, then the folders from the deepest up (empty when the
    file already existed), so that a failed `mkt init` can remove exactly that
    (`remove_created`). SQLite gives the -wal and -shm files the mode of the database file, so
    they are 0600 too.
    """
    folders = [parent for parent in db_path.parents if not parent.exists()]
    db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(db_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return []
    os.chmod(db_path, 0o600)  # whatever the umask
    return [db_path, *folders]


def create_database_file(path: str | os.PathLike[str] | None) -> list[Path]:
    """Create an empty database file (0600) if none exists; returns what was created (see `_create_private`)."""
    db_path = resolve_db_path(path)
    if str(db_path) == ":memory:" or isinstance(db_path, postgres.DatabaseUrl):
        return []
    if db_path.is_dir():
        raise MktError(500, f"Cannot open the database {db_path}: it is a directory.")
    try:
        return _create_private(db_path)
    except OSError as exc:
        raise MktError(500, f"Cannot create the database {db_path}: {exc.strerror or exc}.") from None


def remove_created(created: list[Path]) -> None:
    """Remove what `create_database_file` created: the file with its -wal, -shm and -journal, then
    the folders it made, if they are empty. An existing database is never in the list."""
    if not created:
        return
    db_path, *folders = created
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (someone else put a file there), or already gone
            break


def _uri(db_path: Path, query: str) -> str:
    return "file:" + quote(os.fsencode(os.path.abspath(db_path))) + "?" + query


def _sqlite_connect(target: str, *, uri: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, uri=uri)
    conn.row_factory = sqlite3.Row
    return conn


# SQLite's answers when a database file can be read but not written (a read-only file or folder,
# a read-only mount): the WAL's -shm file cannot be created, or the journal mode cannot be set.
_CANNOT_WRITE = ("readonly database", "unable to open database file")


def _writable(db_path: Path) -> bool:
    """Whether this process may write the file and create files beside it (-wal, -shm).

    access() also answers False on a read-only mount; for root it is True (file modes do not stop root).
    """
    return os.access(db_path, os.W_OK) and os.access(db_path.parent, os.W_OK)


def _open_read_only(db_path: Path) -> tuple[sqlite3.Connection, int]:
    """Open a database this process cannot write, for reading (docs/reliability.md).

    - The -wal and -shm files exist (a server runs, or a crash left them): `mode=ro` reads
      through them (SQLite reads a read-only -shm since 3.22).
    - No -wal file, or an empty one: every committed write is in the file itself, and
      `immutable=1` reads it without creating a -shm (in a folder that is not writable SQLite
      cannot create one; beside a read-only file it would make a read-only -shm that goes on
      refusing writes after the operator has fixed the file's mode).
    - A -wal file that holds writes but no usable -shm: it cannot be read without losing them,
      so this is the read-only error.
    Writes on the connection fail with `attempt to write a readonly database` (storage_error).
    """
    wal, shm = Path(f"{db_path}-wal"), Path(f"{db_path}-shm")
    if wal.exists() and shm.exists():
        conn = _sqlite_connect(_uri(db_path, "mode=ro"), uri=True)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return conn, conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.OperationalError:
            conn.close()
    if wal.exists() and wal.stat().st_size > 0:
        raise sqlite3.OperationalError("attempt to write a readonly database")
    conn = _sqlite_connect(_uri(db_path, "mode=ro&immutable=1"), uri=True)
    return conn, conn.execute("PRAGMA user_version").fetchone()[0]


def connect(path: str | os.PathLike[str] | None = None, *, upgrade: bool = True,
            create: bool = True) -> sqlite3.Connection:
    """Open the database (creating it when `create` and missing) and bring its schema up to date.

    With `create=False` a missing file is `missing_database` and nothing is created (every CLI
    command but `mkt init` and `mkt serve`). A file that cannot be opened, is not a SQLite
    database, or was written by a newer mkt is an MktError with a message that says so (the
    CLI prints it; `mkt serve` stops). A file that can be read but not written (its mode, its
    folder's, a read-only mount) is opened read-only: reads work, writes get the read-only
    storage error. A new file is created 0600 (contacts are personal data), and so are its
    -wal and -shm.
    """
    db_path = resolve_db_path(path)
    if isinstance(db_path, postgres.DatabaseUrl):
        return _connect_postgresql(db_path, upgrade=upgrade)
    memory = str(db_path) == ":memory:"
    try:
        if not memory:
            if db_path.is_dir():
                raise MktError(500, f"Cannot open the database {db_path}: it is a directory.")
            if create:
                _create_private(db_path)
            elif not db_path.exists():
                raise missing_database(db_path)
        if not memory and not _writable(db_path):
            conn, version = _open_read_only(db_path)
        else:
            # mode=rw: SQLite never creates the file (it would if it vanished since the check above).
            conn = _sqlite_connect(":memory:" if memory else _uri(db_path, "mode=rw"), uri=not memory)
            try:
                _configure(conn)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            except sqlite3.OperationalError as exc:
                conn.close()
                if memory or not any(text in str(exc).lower() for text in _CANNOT_WRITE):
                    raise
                conn, version = _open_read_only(db_path)
    except OSError as exc:
        raise MktError(500, f"Cannot open the database {db_path}: {exc.strerror or exc}.") from None
    except sqlite3.DatabaseError as exc:
        mapped = storage_error(exc)
        if mapped is not None:
            raise mapped from None
        raise MktError(500, f"Cannot open the database {db_path}: {exc}.") from None
    return _brought_up_to_date(conn, db_path, version, upgrade=upgrade)


def _connect_postgresql(url: postgres.DatabaseUrl, *, upgrade: bool) -> Any:
    conn = postgres.Connection(url)
    return _brought_up_to_date(conn, url, postgres.current_version(conn), upgrade=upgrade)


def _brought_up_to_date(conn: Any, target: Any, version: int, *, upgrade: bool) -> Any:
    """Both engines' last step of `connect`: refuse a newer schema, apply the missing steps."""
    if version > latest_version():
        conn.close()
        raise MktError(500, f"The database {target} has schema version {version}, newer than this mkt knows "
                            f"({latest_version()}): upgrade mkt to use it.")
    if upgrade and version < latest_version():  # up to date: nothing to apply, nothing to read again
        try:
            migrate(conn)
        except BaseException:
            conn.close()
            raise
    if not is_postgresql(conn):
        deferred_indexes.repair(conn)  # field indexes an import that died had dropped
    return conn


def schema_version(conn: Any) -> int:
    """The version of the database's schema (`mkt db status`)."""
    if is_postgresql(conn):
        return postgres.current_version(conn)
    return conn.execute("PRAGMA user_version").fetchone()[0]


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any error.

    Nested use joins the outer transaction, so services can call each other.
    """
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:  # SQLite has already rolled back after an interrupt or a full disk
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction (a deferred BEGIN), so several queries see the same moment.

    Nested use joins the outer transaction, as `transaction` does.
    """
    with dialect.begun(conn, "BEGIN"):
        yield conn


def instance_secret(conn: sqlite3.Connection, name: str = "tracking") -> bytes:
    """The installation's secret of that name, made (once, race-free) on first use."""
    row = conn.execute("SELECT value FROM instance_secrets WHERE name = ?", (name,)).fetchone()
    if row is not None:
        return bytes(row[0])
    with transaction(conn):
        conn.execute("INSERT OR IGNORE INTO instance_secrets (name, value) VALUES (?, ?)", (name, os.urandom(32)))
        return bytes(conn.execute("SELECT value FROM instance_secrets WHERE name = ?", (name,)).fetchone()[0])


class Database:
    """A database shared by threads (`mkt serve`).

    `conn()` is the calling thread's own connection, opened on first use (the event loop's,
    the job worker's). `borrow()` lends a connection for one call: on SQLite the thread's own
    (a file needs no pool), on PostgreSQL one of a psycopg_pool of at most POOL_SIZE
    connections, given back after the call and checked before it is lent again."""

    POOL_SIZE = 40  # anyio's worker threads (api/calls.call runs each service call in one)

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = resolve_db_path(path)
        self.postgresql = isinstance(self.path, postgres.DatabaseUrl)
        self._local = threading.local()
        self._opened: list[Any] = []  # every connection in use: interrupt_all's reach
        self._own: list[tuple[threading.Thread, Any]] = []  # the threads' own connections, for close()
        connect(self.path).close()  # create and migrate once, up front
        self._pool = postgres.Pool(self.path, self.POOL_SIZE) if self.postgresql else None

    def conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, upgrade=False)
            self._local.conn = conn
            self._own.append((threading.current_thread(), conn))  # list.append is atomic: no lock needed
            self._opened.append(conn)
        return conn

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        if self._pool is None:
            yield self.conn()
            return
        with self._pool.borrow() as conn:
            self._opened.append(conn)
            try:
                yield conn
            finally:
                self._opened.remove(conn)

    def close(self) -> None:
        """Close the threads' own connections and the pool (a stopped server: on PostgreSQL a
        connection left to the garbage collector is a session the server keeps until then).

        On SQLite a connection that another live thread may still be using (a request whose
        SQL `interrupt_all` has just stopped, still unwinding) is left open: closing a
        sqlite3 connection under a running statement crashes the process. A file keeps no
        session, and the connection closes with its thread or the process."""
        self._local = threading.local()  # a later conn() opens a new one
        me, kept = threading.current_thread(), []
        while self._own:
            thread, conn = self._own.pop()
            if not self.postgresql and thread is not me and thread.is_alive():
                kept.append((thread, conn))
                continue
            self._opened.remove(conn)
            conn.close()
        self._own.extend(kept)
        if self._pool is not None:
            self._pool.close()

    def interrupt_all(self) -> None:
        """Abort whatever SQL the threads' connections are running (a stopping server's last resort).

        Interrupted statements raise sqlite3.OperationalError("interrupted"); a write
        transaction they were part of is rolled back (`transaction`).
        """
        for conn in list(self._opened):
            try:
                conn.interrupt()
            except sqlite3.ProgrammingError:  # already closed
                pass


LOG_LIMIT_BYTES = 64 * 1024 * 1024  # the log file a connection leaves after checkpoint_after


@contextmanager
def checkpoint_after(conn: Any) -> Iterator[None]:
    """SQLite: no automatic checkpoint on this connection while the block's batches commit; its
    own limit is back after them, so its next commit checkpoints the log once. For bulk writers
    that commit a batch at a time (the SMS expansion, the contacts import): with the default
    limit every few commits copied the log into the database and synced both, and the pages the
    next batches change again were copied each time (docs/performance.md). A crash meanwhile
    loses nothing: the log is replayed when the file is next opened. SQLite reuses the log file
    without shrinking it unless told, so journal_size_limit cuts it back to LOG_LIMIT_BYTES when
    it next starts over. Other connections' commits checkpoint as usual. PostgreSQL: nothing."""
    if is_postgresql(conn):
        yield
        return
    limit = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    conn.execute(f"PRAGMA journal_size_limit = {LOG_LIMIT_BYTES}")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(limit)}")

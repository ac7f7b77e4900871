"""The PostgreSQL engine: the same services on a `postgresql://` URL (docs/architecture.md, "Two engines").

The services speak one SQL: SQLite's, with `?` placeholders, as the embedded default runs it.
This module is the one place that knows PostgreSQL spells some of it differently. A
`Connection` here answers the calls the services make of a `sqlite3.Connection`
(`execute`, `executemany`, `in_transaction`, `total_changes`, rows read by name or
position), and every statement passes once through `translate` (cached per text):

- `?` and `:name` placeholders become psycopg's `%s` and `%(name)s` (a literal `%` is doubled);
- `temp.name` (a temporary table) becomes `pg_temp.name`, and `WITHOUT ROWID` goes;
- `INSERT OR IGNORE` becomes `INSERT ... ON CONFLICT DO NOTHING`;
- a temporary table's `temp.` schema is `pg_temp.`, and `WITHOUT ROWID` is dropped;
- `BEGIN IMMEDIATE` (SQLite's one writer at a time) becomes a transaction that first takes a
  transaction-scoped advisory lock, so writers queue exactly as they do on the file (and
  the lock goes with the transaction: nothing outlives it, which PgBouncer's transaction
  mode needs); a plain `BEGIN` (a read snapshot) is REPEATABLE READ; `BEGIN READ COMMITTED`
  (dialect.row_claim: a sender's claim of its rows with FOR UPDATE SKIP LOCKED) is READ
  COMMITTED without the advisory lock, so workers claiming rows do not queue behind writers;
- a serialization failure or a deadlock (SQLSTATE 40001, 40P01) is raised as `Conflict`, which
  `retry_conflicts` runs again with bounded, jittered backoff (each retry logged);
- an INSERT into a table whose key is generated answers `lastrowid` (RETURNING id).

Values cross in SQLite's types: booleans are 0/1 both ways, and a whole number that
PostgreSQL computes as `numeric` (SUM) comes back as an int. SQL functions that SQLite has
and PostgreSQL lacks (`json_extract`, `instr`, ...) are created in the schema
(`schema.postgresql.sql`).

A password in the URL never leaves this module: `DatabaseUrl` prints without it.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from marketing_cli.errors import MktError

T = TypeVar("T")
SCHEMES = ("postgresql://", "postgres://")
# The one advisory lock key that serialises writers (pg_advisory_xact_lock), as SQLite's
# single write lock does: "mkt" in ASCII.
WRITE_LOCK = 0x6D6B74
STATEMENT_TIMEOUT_MS = 60_000
# What a statement that lost its connection raises (db.STORAGE_ERRORS answers it 503).
LOST = "the connection to the database was lost"
IDLE_IN_TRANSACTION_MS = 60_000


def is_url(target: object) -> bool:
    return isinstance(target, (str, DatabaseUrl)) and str(_raw(target)).startswith(SCHEMES)


def _raw(target: object) -> str:
    return target.url if isinstance(target, DatabaseUrl) else str(target)


class DatabaseUrl:
    """A `postgresql://` URL that prints without its password (logs, errors, `--help`, messages)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __str__(self) -> str:
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        user = f"{parts.username}:***@" if parts.username else ":***@"
        return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatabaseUrl) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)


# --- Errors: PostgreSQL's, raised as the sqlite3 classes the services already catch ------------


class IntegrityError(sqlite3.IntegrityError):
    pass


class OperationalError(sqlite3.OperationalError):
    pass


class DatabaseError(sqlite3.DatabaseError):
    pass


class Conflict(OperationalError):
    """A serialization failure or a deadlock (SQLSTATE 40001 / 40P01): the transaction was rolled
    back and may simply be run again (`retry_conflicts`)."""


CONFLICT_STATES = ("40001", "40P01")
CONFLICT_RETRIES = 5
CONFLICT_BACKOFF = 0.05  # seconds, doubled at each retry, with full jitter, capped at 2 s


def retry_conflicts(fn: Callable[[], T], what: str) -> T:
    """fn() (one whole transaction), run again after a serialization failure or a deadlock, at
    most CONFLICT_RETRIES times, sleeping a jittered, doubling backoff; each retry is logged.
    On SQLite (one writer at a time) no Conflict is ever raised: fn runs once."""
    import logging
    import random
    import time

    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            return fn()
        except Conflict as exc:
            if attempt == CONFLICT_RETRIES:
                raise
            delay = random.uniform(0, min(2.0, CONFLICT_BACKOFF * 2 ** attempt))
            logging.getLogger("mkt.db").warning("%s: %s; retry %d of %d in %.3f s", what, str(exc).splitlines()[0],
                                                attempt + 1, CONFLICT_RETRIES, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _mapped(exc: Exception) -> sqlite3.Error:
    import psycopg

    text = str(exc).strip()
    if getattr(exc, "sqlstate", None) in CONFLICT_STATES:
        return Conflict(text)
    if isinstance(exc, psycopg.errors.IntegrityError):
        return IntegrityError(text)
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return OperationalError("interrupted")
    if isinstance(exc, (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction)):
        # A read-only database (a standby, default_transaction_read_only) is SQLite's
        # OperationalError "attempt to write a readonly database": db.STORAGE_ERRORS answers both.
        return OperationalError(text)
    return DatabaseError(text)


# --- Translation ----------------------------------------------------------------------------

_QUOTED = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")""")
_PLACEHOLDER = re.compile(r"\?(\d+)?|%|(?<![:\w]):([A-Za-z_]\w*)|--[^\n]*")
# SQLite's `+column` (an ORDER BY that must not use the column's index) is a plain column here.
_UNARY_PLUS = re.compile(r"((?:ORDER|GROUP)\s+BY\s+|,\s*|\(\s*)\+(?=[A-Za-z_])", re.I)
_IS_NOT = re.compile(r"\bIS\s+NOT\s+(?!NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_IS = re.compile(r"\bIS\s+(?!NOT\b|NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
# SQLite's `temp.table` (the connection's temporary database) is PostgreSQL's `pg_temp.table`.
_TEMP = re.compile(r"(?<![\w.])temp\.(?=[A-Za-z_])", re.I)
# A table `WITHOUT ROWID` (SQLite's clustered-by-key storage) is an ordinary table here.
_WITHOUT_ROWID = re.compile(r"\)\s*WITHOUT\s+ROWID\b", re.I)


@lru_cache(maxsize=4096)
def translate(sql: str) -> tuple[str, bool]:
    """SQLite's spelling of a statement as PostgreSQL's (see the module docstring), and whether its
    placeholders are numbered (`?1`: the parameters are then passed by name, p1, p2, ...)."""
    numbered = False

    def placeholder(match: re.Match[str]) -> str:
        nonlocal numbered
        token = match.group(0)
        if token == "%":
            return "%%"
        if token.startswith("--"):
            return ""
        if token.startswith("?"):
            if match.group(1):
                numbered = True
                return f"%(p{match.group(1)})s"
            return "%s"
        return f"%({match.group(2)})s"

    parts = _QUOTED.split(sql)
    for i in range(0, len(parts), 2):  # the even parts are outside quotes
        text = _PLACEHOLDER.sub(placeholder, parts[i])
        text = _UNARY_PLUS.sub(r"\1", text)
        text = _IS_NOT.sub("IS DISTINCT FROM ", text)
        text = _TEMP.sub("pg_temp.", text)
        text = _WITHOUT_ROWID.sub(")", text)
        parts[i] = _IS.sub("IS NOT DISTINCT FROM ", text)
    for i in range(1, len(parts), 2):
        parts[i] = parts[i].replace("%", "%%")
    text = "".join(parts)
    if re.match(r"\s*INSERT\s+OR\s+IGNORE\s+", text, re.I):
        text = re.sub(r"^\s*INSERT\s+OR\s+IGNORE\s+", "INSERT ", text, count=1, flags=re.I)
        returning = re.search(r"\sRETURNING\s", text, re.I)
        if returning:
            text = text[:returning.start()] + " ON CONFLICT DO NOTHING" + text[returning.start():]
        else:
            text = text.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    return text, numbered


_INT64 = (-(2**63), 2**63 - 1)


def _bind(params: Any, numbered: bool) -> Any:
    # A whole number beyond 64 bits is SQLite's OverflowError (the faces answer it "out of
    # range"), not a numeric that PostgreSQL would compare and find nothing for.
    for value in (params.values() if isinstance(params, dict) else params):
        if type(value) is int and not _INT64[0] <= value <= _INT64[1]:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
    if numbered and not isinstance(params, dict):
        return {f"p{i}": value for i, value in enumerate(params, 1)}
    return params


_INSERT_INTO = re.compile(r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\w+)", re.I)


def _returning_id(sql: str, generated: frozenset[str]) -> str | None:
    """The INSERT with `RETURNING id` when it writes one row of a table whose id is generated."""
    match = _INSERT_INTO.match(sql)
    if not match or match.group(1) not in generated or re.search(r"\bRETURNING\b", sql, re.I):
        return None
    if re.search(r"\bSELECT\b", sql, re.I):
        return None
    return sql.rstrip().rstrip(";") + " RETURNING id"


# --- Rows and cursors -------------------------------------------------------------------------


class Row(tuple):
    """A row read by position or by column name, as sqlite3.Row is (dict(row) works)."""

    __slots__ = ()
    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@lru_cache(maxsize=2048)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    index: dict[str, int] = {}
    for position, name in enumerate(names):
        index.setdefault(name, position)
    return type("Row", (Row,), {"__slots__": (), "_index": index})


def _row_factory(cursor: Any) -> Any:
    description = cursor.description
    if description is None:
        return None
    cls = _row_class(tuple(column.name for column in description))
    return lambda values: cls(values)


class Cursor:
    def __init__(self, cursor: Any, lastrowid: int | None = None, rowcount: int | None = None) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self.rowcount = cursor.rowcount if rowcount is None else rowcount
        self.description = cursor.description

    def fetchone(self) -> Any:
        if self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def fetchmany(self, size: int = 1) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchmany(size)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._cursor.close()


class _Empty:
    """The cursor of a statement PostgreSQL has no use for (a SQLite PRAGMA that sets a knob)."""

    rowcount = -1
    lastrowid = None
    description = None

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


# --- Connection ------------------------------------------------------------------------------


def _adapt(conn: Any) -> None:
    """SQLite's value types on the way in and out: 0/1 for booleans, int for whole numerics,
    text for jsonb."""
    from psycopg.adapt import Loader
    from psycopg.types.numeric import IntDumper

    class BoolAsInt(Loader):
        def load(self, data: Any) -> int:
            return 1 if bytes(data) == b"t" else 0

    class NumericAsSQLite(Loader):
        def load(self, data: Any) -> int | float:
            text = bytes(data).decode()
            try:
                return int(text)
            except ValueError:
                return float(text)

    class JsonbAsText(Loader):  # contacts.data_doc in a `SELECT *` row: the JSON text, unparsed
        def load(self, data: Any) -> str:
            return bytes(data).decode()

    class BoolDumper(IntDumper):
        def dump(self, obj: Any) -> bytes:
            return b"1" if obj else b"0"

    conn.adapters.register_loader("bool", BoolAsInt)
    conn.adapters.register_loader("numeric", NumericAsSQLite)
    conn.adapters.register_loader("jsonb", JsonbAsText)
    conn.adapters.register_dumper(bool, BoolDumper)


def _open(url: DatabaseUrl) -> Any:
    import psycopg

    try:
        raw = psycopg.connect(url.url, **CONNECT_ARGS)
    except psycopg.Error as exc:
        raise MktError(503, f"Cannot connect to the database {url}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}.") \
            from None
    configure(raw)
    return raw


# Every connection: autocommit (transactions are begun explicitly), no server-side prepared
# statements (they do not survive PgBouncer's transaction mode), a bounded connect.
CONNECT_ARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": None, "connect_timeout": 10}


def configure(raw: Any) -> None:
    """A new psycopg connection made ready for the services (also the pool's `configure`)."""
    raw.row_factory = _row_factory
    _adapt(raw)
    # jit off: PostgreSQL compiles a statement whose estimated cost is high enough, which is any
    # statement over a big audience; the compile costs more than it saves at mkt's sizes (the
    # cost estimate of an SMS campaign to 100,000 contacts: 726-859 ms with it, 280-300 ms
    # without, 480 ms of it compiling).
    raw.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS};"  # one round trip (no parameters)
                f" SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}; SET jit = off")


class Connection:
    """A psycopg connection that answers the calls the services make of a sqlite3.Connection.

    Made from a URL (a connection of its own, closed by `close`) or around a connection
    borrowed from a `Pool` (which gets it back)."""

    engine = "postgresql"

    def __init__(self, url: DatabaseUrl, raw: Any = None) -> None:
        self.url = url
        self._owned = raw is None
        self._conn = raw if raw is not None else _open(url)
        self.total_changes = 0
        self._generated: frozenset[str] | None = None
        self.row_factory = None  # kept for callers that set sqlite3.Row (rows are always by name here)
        self._trace: Any = None  # set_trace_callback's callback

    def _reopen(self) -> None:
        try:
            self._conn.close()
        finally:
            self._conn = _open(self.url)

    # what sqlite3.Connection answers
    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self._conn.info.transaction_status != TransactionStatus.IDLE

    def _generated_tables(self) -> frozenset[str]:
        if self._generated is None and _GENERATED.get(self.url.url) is not None:
            self._generated = _GENERATED[self.url.url]
        if self._generated is None:
            rows = self._conn.execute(
                "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND column_name = 'id' AND is_identity = 'YES'").fetchall()
            self._generated = frozenset(row[0] for row in rows)
            _GENERATED[self.url.url] = self._generated
        return self._generated

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        import psycopg

        head = sql.lstrip()[:16].upper()
        if head.startswith("BEGIN"):
            if "READ COMMITTED" in sql.upper():
                return self._begin_read_committed()
            return self._begin(immediate="IMMEDIATE" in sql.upper())
        if head.startswith("PRAGMA"):
            return self._pragma(sql)
        if self._trace is not None:
            self._trace(sql)
        text, numbered = translate(sql)
        returning = _returning_id(text, self._generated_tables()) if head.startswith("INSERT") else None
        if self._conn.broken and self._owned:
            self._reopen()
        outside = not self.in_transaction
        try:
            cursor = self._conn.execute(returning or text, _bind(params, numbered))
        except psycopg.Error as exc:
            if not (self._conn.broken and self._owned):
                raise _mapped(exc) from None
            # The server dropped the connection (a restart, a failover, an idle timeout). A read
            # outside a transaction is tried once more on a new one; anything else is reported,
            # and the next statement gets a new connection.
            if not (outside and head.startswith(("SELECT", "WITH"))):
                raise OperationalError(LOST) from None
            self._reopen()
            try:
                cursor = self._conn.execute(returning or text, _bind(params, numbered))
            except psycopg.Error as again:
                raise _mapped(again) from None
        if cursor.rowcount and cursor.rowcount > 0 and not (cursor.statusmessage or "").startswith("SELECT"):
            self.total_changes += cursor.rowcount  # rows written, as SQLite counts them (not rows read)
        if returning is not None:
            row = cursor.fetchone()
            return Cursor(cursor, lastrowid=row[0] if row else None)
        return Cursor(cursor)

    def executemany(self, sql: str, seq: Any) -> Any:
        import psycopg

        text, numbered = translate(sql)
        rows = [_bind(params, numbered) for params in seq]
        if not rows:
            return _Empty()
        try:
            with self._conn.cursor() as cursor:
                cursor.executemany(text, rows)
                count = cursor.rowcount
        except psycopg.Error as exc:
            raise _mapped(exc) from None
        if count and count > 0:
            self.total_changes += count
        return _Counted(count)

    def _begin(self, *, immediate: bool) -> Any:
        import psycopg

        try:
            if immediate:
                self._conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            else:
                self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        except psycopg.Error as exc:
            raise _mapped(exc) from None
        return _Empty()

    def _begin_read_committed(self) -> Any:
        """A writer that locks only the rows it touches (FOR UPDATE SKIP LOCKED), not the advisory lock."""
        import psycopg

        try:
            self._conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        except psycopg.Error as exc:
            raise _mapped(exc) from None
        return _Empty()

    def _pragma(self, sql: str) -> Any:
        """SQLite's knobs: the few that mean something here are answered, the others do nothing."""
        name = sql.split()[1].split("=")[0].strip().lower()
        if name == "busy_timeout" and "=" in sql:
            # How long a write waits for a lock: SQLite's busy timeout is PostgreSQL's lock_timeout
            # (0 there means "do not wait", here "wait for ever": 1 ms is the nearest).
            waits = max(1, int(sql.split("=")[1].strip()))
            self._conn.execute(f"SET lock_timeout = {waits}")
            return _Empty()
        if name == "query_only":
            # SQLite's read-only switch: every later transaction of this connection is READ ONLY
            # (a write is an error), and so is the open one when it is switched on inside it.
            if "=" not in sql:
                shown = self._conn.execute("SHOW default_transaction_read_only").fetchone()[0]
                return _Constant(1 if shown == "on" else 0)
            on = sql.split("=")[1].strip().strip(";").upper() in ("ON", "1", "TRUE", "YES")
            self._conn.execute(f"SET default_transaction_read_only = {'on' if on else 'off'}")
            if on and self.in_transaction:
                self._conn.execute("SET TRANSACTION READ ONLY")
            return _Empty()
        if name == "foreign_keys" and "=" not in sql:
            return _Constant(1)
        if name == "data_version":
            return _Constant(self._conn.execute("SELECT txid_current_snapshot()::text").fetchone()[0])
        return _Empty()

    def set_trace_callback(self, callback: Any) -> None:
        """As sqlite3's: `callback(sql)` for every statement run by execute (the services' own text)."""
        self._trace = callback

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        """SQLite calls Python from SQL; PostgreSQL cannot. The callers that need it have their own path."""

    def set_progress_handler(self, *args: Any) -> None:
        """A step budget is SQLite's; statement_timeout bounds a statement here."""

    def interrupt(self) -> None:
        try:
            self._conn.cancel_safe(timeout=2)
        except Exception:  # noqa: BLE001 - already closed, or the server is gone
            pass

    def commit(self) -> None:
        """sqlite3's commit: ends an open transaction (a statement outside one is already committed)."""
        if self.in_transaction:
            self.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def copy(self, sql: str) -> Iterator[Any]:
        """COPY ... FROM STDIN / TO STDOUT (psycopg's copy object), PostgreSQL's bulk path; its
        errors are raised as the sqlite3 classes, as execute's are."""
        import psycopg

        try:
            with self._conn.cursor() as cursor, cursor.copy(sql) as copy:
                yield copy
        except psycopg.Error as exc:
            raise _mapped(exc) from None


class _Counted(_Empty):
    def __init__(self, count: int) -> None:
        self.rowcount = count


class _Constant(_Empty):
    def __init__(self, value: Any) -> None:
        self._value = value

    def fetchone(self) -> tuple[Any]:
        return (self._value,)


# --- Schema ---------------------------------------------------------------------------------

# The tables whose `id` is generated, per database (read once: the schema changes only by migrate).
_GENERATED: dict[str, frozenset[str]] = {}
VERSION_TABLE = "mkt_schema_version"
_lock = threading.Lock()


def current_version(conn: Connection) -> int:
    import psycopg

    if not conn.in_transaction:  # one round trip; a missing table (a new database) is version 0
        try:
            return conn._conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()[0]
        except psycopg.errors.UndefinedTable:
            return 0
    row = conn._conn.execute("SELECT to_regclass(%s)", (VERSION_TABLE,)).fetchone()  # an error would end the transaction
    if row[0] is None:
        return 0
    return conn._conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()[0]


def migrate(conn: Connection, steps: Sequence[tuple[int, str]], target: int) -> int:
    """Apply the PostgreSQL steps above the database's version, under the write lock."""
    import psycopg

    if current_version(conn) >= target:
        return target
    with _lock:
        try:
            with conn._conn.transaction():
                # No statement timeout for a migration, nor for the wait for another process's:
                # a step may rewrite a big table (step 30 on 1,000,000 contacts with 7 field
                # indexes: 54 s), which must not fail half-way at the sessions' 60 s.
                conn._conn.execute("SET LOCAL statement_timeout = 0")
                conn._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                conn._conn.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version BIGINT NOT NULL)")
                row = conn._conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()
                current = row[0] if row else 0
                if row is None:
                    conn._conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (0)")
                for version, sql in steps:
                    if current < version <= target:
                        conn._conn.execute(sql)
                        conn._conn.execute(f"UPDATE {VERSION_TABLE} SET version = %s", (version,))
        except psycopg.Error as exc:
            raise _mapped(exc) from None
    conn._generated = None
    _GENERATED.pop(conn.url.url, None)
    return target


class Pool:
    """Connections shared by a server's threads (psycopg_pool): `with pool.borrow() as conn:`.

    A connection goes back to the pool after each use, is checked before it is lent again (a
    server restart or a dropped connection costs one reconnect, not a broken thread), and the
    pool never holds more than `size` connections: set it to the number of threads that can
    use the database at once. After `close` a later borrow opens a new pool, as a SQLite
    `Database` opens new connections after its close (an app whose lifespan ran twice)."""

    def __init__(self, url: DatabaseUrl, size: int) -> None:
        self.url = url
        self._size = size
        self._pool = self._new()
        self._opened = False
        self._open_lock = threading.Lock()

    def _new(self) -> Any:
        from psycopg_pool import ConnectionPool

        return ConnectionPool(self.url.url, min_size=1, max_size=self._size, kwargs=CONNECT_ARGS, configure=configure,
                              check=ConnectionPool.check_connection, open=False, name="mkt")

    @contextmanager
    def borrow(self) -> Iterator[Connection]:
        import psycopg

        if not self._opened:
            with self._open_lock:
                if not self._opened:
                    self._pool.open(wait=False)
                    self._opened = True
        try:
            with self._pool.connection(timeout=30) as raw:
                conn = Connection(self.url, raw)
                try:
                    yield conn
                finally:
                    if conn.in_transaction:  # an error left it open: the pool must not lend it so
                        raw.execute("ROLLBACK")
        except psycopg.OperationalError as exc:
            raise MktError(503, f"Cannot connect to the database {self.url}: {str(exc).strip().splitlines()[0]}.") \
                from None

    def close(self) -> None:
        with self._open_lock:
            if self._opened:
                self._pool.close()  # a psycopg pool cannot be opened again: the next borrow makes another
                self._pool, self._opened = self._new(), False

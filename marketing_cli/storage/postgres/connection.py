"""The PostgreSQL engine's connection: a psycopg connection that answers the calls the services make of
a `sqlite3.Connection` (`execute`, `executemany`, `in_transaction`, `total_changes`, rows read by
name or position), every statement translated once (translate.py).

- `BEGIN IMMEDIATE` (SQLite's one writer at a time) becomes a transaction that first takes a
  transaction-scoped advisory lock, so writers queue exactly as they do on the file (and
  the lock goes with the transaction: nothing outlives it, which PgBouncer's transaction
  mode needs); a plain `BEGIN` (a read snapshot) is REPEATABLE READ; `BEGIN READ COMMITTED`
  (dialect.row_claim: a sender's claim of its rows with FOR UPDATE SKIP LOCKED) is READ
  COMMITTED without the advisory lock, so workers claiming rows do not queue behind writers;
- SQLite's PRAGMAs that mean something here are answered (busy_timeout, query_only,
  foreign_keys, data_version), the others do nothing;
- an INSERT into a table whose key is generated answers `lastrowid` (RETURNING id);
- a connection the server dropped is replaced at the next statement (a read outside a
  transaction is tried once more at once).

Every connection, of its own or borrowed from the pool, is `configure`d: SQLite's value types
(rows.py), the statement and idle-in-transaction timeouts, no JIT.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage.postgres.errors import LOST, OperationalError, mapped
from marketing_cli.storage.postgres.rows import Constant, Counted, Cursor, Empty, adapt, row_factory
from marketing_cli.storage.postgres.translate import bind, returning_id, translate
from marketing_cli.storage.postgres.url import DatabaseUrl

# The one advisory lock key that serialises writers (pg_advisory_xact_lock), as SQLite's
# single write lock does: "mkt" in ASCII.
WRITE_LOCK = 0x6D6B74
STATEMENT_TIMEOUT_MS = 60_000
IDLE_IN_TRANSACTION_MS = 60_000
# The tables whose `id` is generated, per database (read once: the schema changes only by migrate).
_GENERATED: dict[str, frozenset[str]] = {}


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
    raw.row_factory = row_factory
    adapt(raw)
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

    def schema_changed(self) -> None:
        """Read the tables whose id is generated again (a migration may have changed them)."""
        self._generated = None
        _GENERATED.pop(self.url.url, None)

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
        returning = returning_id(text, self._generated_tables()) if head.startswith("INSERT") else None
        if self._conn.broken and self._owned:
            self._reopen()
        outside = not self.in_transaction
        try:
            cursor = self._conn.execute(returning or text, bind(params, numbered))
        except psycopg.Error as exc:
            if not (self._conn.broken and self._owned):
                raise mapped(exc) from None
            # The server dropped the connection (a restart, a failover, an idle timeout). A read
            # outside a transaction is tried once more on a new one; anything else is reported,
            # and the next statement gets a new connection.
            if not (outside and head.startswith(("SELECT", "WITH"))):
                raise OperationalError(LOST) from None
            self._reopen()
            try:
                cursor = self._conn.execute(returning or text, bind(params, numbered))
            except psycopg.Error as again:
                raise mapped(again) from None
        if cursor.rowcount and cursor.rowcount > 0 and not (cursor.statusmessage or "").startswith("SELECT"):
            self.total_changes += cursor.rowcount  # rows written, as SQLite counts them (not rows read)
        if returning is not None:
            row = cursor.fetchone()
            return Cursor(cursor, lastrowid=row[0] if row else None)
        return Cursor(cursor)

    def executemany(self, sql: str, seq: Any) -> Any:
        import psycopg

        text, numbered = translate(sql)
        rows = [bind(params, numbered) for params in seq]
        if not rows:
            return Empty()
        try:
            with self._conn.cursor() as cursor:
                cursor.executemany(text, rows)
                count = cursor.rowcount
        except psycopg.Error as exc:
            raise mapped(exc) from None
        if count and count > 0:
            self.total_changes += count
        return Counted(count)

    def _begin(self, *, immediate: bool) -> Any:
        import psycopg

        try:
            if immediate:
                self._conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            else:
                self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        except psycopg.Error as exc:
            raise mapped(exc) from None
        return Empty()

    def _begin_read_committed(self) -> Any:
        """A writer that locks only the rows it touches (FOR UPDATE SKIP LOCKED), not the advisory lock."""
        import psycopg

        try:
            self._conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        except psycopg.Error as exc:
            raise mapped(exc) from None
        return Empty()

    def _pragma(self, sql: str) -> Any:
        """SQLite's knobs: the few that mean something here are answered, the others do nothing."""
        name = sql.split()[1].split("=")[0].strip().lower()
        if name == "busy_timeout" and "=" in sql:
            # How long a write waits for a lock: SQLite's busy timeout is PostgreSQL's lock_timeout
            # (0 there means "do not wait", here "wait for ever": 1 ms is the nearest).
            waits = max(1, int(sql.split("=")[1].strip()))
            self._conn.execute(f"SET lock_timeout = {waits}")
            return Empty()
        if name == "query_only":
            # SQLite's read-only switch: every later transaction of this connection is READ ONLY
            # (a write is an error), and so is the open one when it is switched on inside it.
            if "=" not in sql:
                shown = self._conn.execute("SHOW default_transaction_read_only").fetchone()[0]
                return Constant(1 if shown == "on" else 0)
            on = sql.split("=")[1].strip().strip(";").upper() in ("ON", "1", "TRUE", "YES")
            self._conn.execute(f"SET default_transaction_read_only = {'on' if on else 'off'}")
            if on and self.in_transaction:
                self._conn.execute("SET TRANSACTION READ ONLY")
            return Empty()
        if name == "foreign_keys" and "=" not in sql:
            return Constant(1)
        if name == "data_version":
            return Constant(self._conn.execute("SELECT txid_current_snapshot()::text").fetchone()[0])
        return Empty()

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
            raise mapped(exc) from None

"""The pool of connections a server's threads share (`mkt serve`): psycopg_pool, each connection
configured as a connection of its own is (connection.configure) and checked before it is lent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage.postgres.connection import CONNECT_ARGS, Connection, configure
from marketing_cli.storage.postgres.url import DatabaseUrl


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

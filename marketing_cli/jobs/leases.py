"""Leases held by a live process: a thread that renews one while the work it covers runs.

A job lease (jobs.py) and the contacts import/export lock (services/contacts/io_lock.py)
are rows with an expiry. The process doing the work renews the row from a thread of its
own, on a connection of its own, every `interval` seconds (a third of the expiry), for
as long as the work runs: however long one step of the work takes (a segment count of a
million contacts, a slow client of an export), the lease never expires under a live
holder. When the process dies (SIGKILL, power cut) renewals stop and the lease expires
within one expiry; the next claimant takes it over. docs/reliability.md lists the windows.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

log = logging.getLogger("mkt.leases")

# A renewal waits at most this long for the write lock (an import batch holds it about a
# second on a quiet machine, several on an overloaded one); a renewal that gives up is
# logged and tried again at the next interval, well before the expiry.
RENEW_BUSY_MS = 5_000


def database_file(conn: sqlite3.Connection) -> Any:
    """What a renewal thread reconnects to: the file behind a connection ('' for an in-memory
    database), or the PostgreSQL URL."""
    url = getattr(conn, "url", None)
    if url is not None:
        return url
    row = conn.execute("PRAGMA database_list").fetchone()
    return row[2] if row is not None else ""


class Renewer:
    """`with Renewer(conn, renew, interval):` calls `renew(own_conn)` every `interval` s.

    `renew` returns False when the lease was lost (someone else holds it now); `lost` is
    then set and renewals stop. An error in one renewal is logged and retried.
    """

    def __init__(self, conn: sqlite3.Connection, renew: Callable[[sqlite3.Connection], bool],
                 interval: float) -> None:
        self.path = database_file(conn)
        self.renew = renew
        self.interval = interval
        self.lost = threading.Event()
        self.last_ok: float | None = None  # time.monotonic() of the last renewal that held
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Renewer:
        if self.last_ok is None:
            self.last_ok = time.monotonic()
        if self.path and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mkt-lease", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Renewer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        from marketing_cli.storage.db import connect

        conn = None  # opened at the first renewal: most jobs end long before it
        try:
            while not self._stop.wait(self.interval):
                try:
                    if conn is None:
                        conn = connect(self.path, upgrade=False)
                        conn.execute(f"PRAGMA busy_timeout = {RENEW_BUSY_MS}")
                    if not self.renew(conn):
                        self.lost.set()
                        return
                    self.last_ok = time.monotonic()
                except Exception as exc:  # noqa: BLE001 - one failed renewal is retried at the next interval
                    if conn is not None and conn.in_transaction:
                        conn.execute("ROLLBACK")
                    # a writer holding the lock past RENEW_BUSY_MS (a large import's batch, an index
                    # build) is expected under load: one line; anything else keeps its traceback
                    busy = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                    log.warning("lease renewal failed (%s); retrying in %.1f s",
                                exc if busy else type(exc).__name__, self.interval, exc_info=not busy)
        finally:
            if conn is not None:
                conn.close()

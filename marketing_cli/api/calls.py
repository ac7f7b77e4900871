"""Running a service from a handler: `await call(request, fn, *args)` or `await quick_read(...)`.

`call`: the service runs in a worker thread with that thread's own connection
(`Database.conn`), never on the event loop: a long query, or a write waiting for another
process's lock, then delays only its own request. SQLite releases the GIL while it works,
so the loop keeps answering the others.

`quick_read`: for the few reads whose cost does not grow with the data (index seeks on
small tables: GET /v1/workspace reads its workspace, plan and counters). The hand-off to a
thread costs far more than such a read: the thread has to take the GIL back from a busy
event loop (and give it back around every SQLite call), and anyio's hand-off runs about 290
Python calls on the loop per request. Measured under 32 concurrent connections:
1,871 us of CPU per GET /v1/workspace in a worker thread against 519 us on the loop, 0.17x
the bare endpoint's rate against 0.53x (docs/performance.md). So the read runs on the
event loop's own connection under a budget of work: SQLite's progress handler stops it once
it has run QUICK_STEPS virtual-machine steps (about 4 ms; the workspace read takes about
240), and it is run again in a worker thread, as is every run of that read for the next
QUICK_COOLDOWN seconds. The budget counts the read's own work, not the clock: a loaded
machine that preempts the loop mid-read must not send reads to threads, where they cost
3.6 times as much.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread
from starlette.requests import Request

T = TypeVar("T")
log = logging.getLogger("mkt.api")

QUICK_STEPS = 200_000  # SQLite virtual-machine steps a quick read may take on the event loop
QUICK_COOLDOWN = 10.0  # seconds a read that outlasted its budget then runs in threads only
_PROGRESS_STEPS = 1000  # SQLite steps between two calls of the progress handler


async def call(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(conn, *args, **kwargs) in a worker thread; MktError and the rest propagate as raised."""
    db = request.app.state.db
    return await anyio.to_thread.run_sync(partial(_with_conn, db, fn, args, kwargs))


def _with_conn(db: Any, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    with db.borrow() as conn:
        return fn(conn, *args, **kwargs)


class _Budget:
    """The progress handler of an event loop's connection: stops a quick read past its budget."""

    __slots__ = ("calls_left", "overran")

    def __init__(self) -> None:
        self.overran = False
        self.stop()

    def start(self) -> None:
        self.overran = False
        self.calls_left = QUICK_STEPS // _PROGRESS_STEPS

    def stop(self) -> None:
        """No quick read running (authentication's lookup, say): never stop anything."""
        self.calls_left = 1 << 62

    def __call__(self) -> int:
        self.calls_left -= 1
        if self.calls_left > 0:
            return 0
        self.overran = True
        return 1  # SQLite stops the statement: sqlite3.OperationalError("interrupted")


_loop_budgets = threading.local()  # one per event loop thread: (connection, its _Budget)


def _loop_connection(db: Any) -> tuple[sqlite3.Connection, _Budget]:
    conn = db.conn()  # the loop thread's own connection (the one authentication uses)
    held = getattr(_loop_budgets, "held", None)
    if held is None or held[0] is not conn:
        budget = _Budget()
        conn.set_progress_handler(budget, _PROGRESS_STEPS)
        held = _loop_budgets.held = (conn, budget)
    return held


_in_threads_until: dict[Callable[..., Any], float] = {}  # reads that outlasted their budget lately


async def quick_read(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(conn, *args, **kwargs) on the event loop for a read of bounded cost; in a worker thread
    (as `call`) if it outruns its budget, and for QUICK_COOLDOWN seconds after that (a read
    grown heavy then costs the loop one budget per cooldown, not one per request).
    fn must only read: it may be run twice."""
    if request.app.state.db.postgresql:  # a network round trip: never on the event loop
        return await call(request, fn, *args, **kwargs)
    conn, budget = _loop_connection(request.app.state.db)
    if conn.in_transaction or (fn in _in_threads_until and _in_threads_until[fn] > time.monotonic()):
        return await call(request, fn, *args, **kwargs)
    budget.start()
    try:
        return fn(conn, *args, **kwargs)
    except sqlite3.OperationalError:
        if not budget.overran:
            raise  # a real error, or the shutdown's interrupt (api/responses.ShutdownGuard)
    finally:
        budget.stop()
    _in_threads_until[fn] = time.monotonic() + QUICK_COOLDOWN
    log.warning("%s outran its budget on the event loop (%d SQLite steps): it runs in worker threads for the "
                "next %g s", getattr(fn, "__qualname__", fn), QUICK_STEPS, QUICK_COOLDOWN)
    return await call(request, fn, *args, **kwargs)

"""Running a service from a handler: `await call(request, fn, *args)`.

Every service runs in a worker thread with that thread's own connection
(`Database.conn`), never on the event loop: a long query, or a write waiting for
another process's lock, then delays only its own request. SQLite releases the GIL
while it works, so the loop keeps answering the others.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread
from starlette.requests import Request

T = TypeVar("T")


async def call(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(conn, *args, **kwargs) in a worker thread; MktError and the rest propagate as raised."""
    db = request.app.state.db
    return await anyio.to_thread.run_sync(partial(_with_conn, db, fn, args, kwargs))


def _with_conn(db: Any, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    return fn(db.conn(), *args, **kwargs)

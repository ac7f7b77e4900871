"""Authentication: `Authorization: Bearer <key>` to a workspace id (CONTRACT section 4)."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from starlette.requests import Request

from marketing_cli.api.strict import check_query
from marketing_cli.errors import MktError
from marketing_cli.services.account import keys
from marketing_cli.storage import versioned


def db_conn(request: Request):  # noqa: ANN201 - sqlite3.Connection
    return request.app.state.db.conn()


UNCHANGED = "mkt.unchanged"  # the scope key of the dict `require_workspace` checked (storage/versioned.py)


def require_workspace(request: Request) -> int:
    """The workspace of the request's key, or 401; then no undeclared query parameter (400).

    The connection's `versioned.entries` dict, checked once here, is left in the request's
    scope for the handler's own cached reads (`unchanged`)."""
    conn = db_conn(request)
    cache = request.scope[UNCHANGED] = versioned.entries(conn)
    workspace_id = keys.authenticate(conn, request.headers.get("authorization"), cache)
    check_query(request)
    return workspace_id


def unchanged(request: Request) -> dict[Any, Any] | None:
    """The dict of values read since the database last changed, as `require_workspace` found
    it for this request (None: read as usual). Look values up in it only before the handler's
    first await (after one, the database may have changed unseen); storing a value read after
    the check is safe at any time (a change since then has changed the stamp: dropped)."""
    return request.scope.get(UNCHANGED)


def key_workspace(request: Request, secret: str) -> int:
    """The workspace of a bare key (the dashboard's sign-in form and cookie), checked exactly
    as an `Authorization: Bearer` header is, or the same 401."""
    return keys.authenticate(db_conn(request), f"Bearer {secret}")


def optional_workspace(request: Request) -> int | None:
    """None without an Authorization header; the key's workspace, or 401, with one."""
    header = request.headers.get("authorization")
    workspace_id = None if header is None else keys.authenticate(db_conn(request), header)
    check_query(request)
    return workspace_id


class RateLimiter:
    """At most `limit` requests per `window` seconds per client address (sliding window)."""

    def __init__(self, limit: int, window: float = 60.0, message: str = "") -> None:
        self.limit = limit
        self.window = window
        self.message = message
        self._hits: dict[str, deque[float]] = {}

    def check(self, client: str) -> None:
        now = time.monotonic()
        hits = self._hits.setdefault(client, deque())
        while hits and hits[0] <= now - self.window:
            hits.popleft()
        if len(hits) >= self.limit:
            raise MktError(429, self.message)
        hits.append(now)
        if len(self._hits) > 10_000:  # forget idle clients so memory stays bounded
            for key in [k for k, v in self._hits.items() if not v or v[-1] <= now - self.window]:
                del self._hits[key]

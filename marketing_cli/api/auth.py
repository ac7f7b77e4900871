"""Authentication: `Authorization: Bearer <key>` to a workspace id (CONTRACT section 4)."""

from __future__ import annotations

import time
from collections import deque

from starlette.requests import Request

from marketing_cli.api.strict import check_query
from marketing_cli.errors import MktError
from marketing_cli.services.account import keys


def db_conn(request: Request):  # noqa: ANN201 - sqlite3.Connection
    return request.app.state.db.conn()


def require_workspace(request: Request) -> int:
    """The workspace of the request's key, or 401; then no undeclared query parameter (400)."""
    workspace_id = keys.authenticate(db_conn(request), request.headers.get("authorization"))
    check_query(request)
    return workspace_id


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

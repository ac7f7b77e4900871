"""Envelopes, request bodies and the one error renderer of the HTTP face.

Envelope A is `{"error": null, "data": ...}`, envelope B is `{"data": ...}`; the
specification names which one each endpoint uses. Every error, on every endpoint, is
`{"data": null, "error": {"status": <int>, "message": "<text>"}}` (CONTRACT section 4).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from marketing_cli.api.strict import check_body
from marketing_cli.errors import MktError
from marketing_cli.kernel.inputs import decode_json
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.storage.db import storage_error
from marketing_cli.storage.encoding import dumps_bytes

log = logging.getLogger("mkt.api")

MAX_BODY_BYTES = 1024 * 1024  # 1 MiB; endpoints that take files pass a larger limit
BODY_TIMEOUT = 30.0  # seconds to send a body (api/limits.py lists every limit); `mkt serve --body-timeout`
INVALID_BODY = "Invalid request body."


class JSONBody(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps_bytes(content)


class RenderedJSON(Response):
    """A JSON body already rendered (by JSONBody): its bytes as they are."""

    media_type = "application/json"


def envelope_a(data: Any, status: int = 200) -> JSONBody:
    return JSONBody({"error": None, "data": data}, status_code=status)


def envelope_b(data: Any, status: int = 200) -> JSONBody:
    return JSONBody({"data": data}, status_code=status)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONBody:
    return JSONBody({"data": None, "error": {"status": status, "message": message}}, status_code=status,
                    headers=headers)


TOO_LARGE = "The request body is too large: the limit is {kib} KiB."
TOO_SLOW = "The request body did not arrive within {seconds:g} seconds."


def body_timeout(request: Request, factor: float = 1.0) -> float:
    return getattr(request.app.state, "body_timeout", BODY_TIMEOUT) * factor


async def read_body(request: Request, *, max_bytes: int = MAX_BODY_BYTES, timeout_factor: float = 1.0) -> bytes:
    """The raw body, read as it arrives; 413 as soon as it passes `max_bytes` (or declares more).

    A body that has not fully arrived `body_timeout` seconds after the handler began to read
    it (times `timeout_factor`: file uploads get longer) is a 408, so a client that trickles
    a body holds a connection for a bounded time.
    """
    declared = request.headers.get("content-length")
    size = parse_digits(declared, 40)  # a malformed one is refused by the server before the app
    if size is not None and size > max_bytes:
        raise MktError(413, TOO_LARGE.format(kib=max_bytes // 1024))
    seconds = body_timeout(request, timeout_factor)
    chunks, size = [], 0
    with anyio.move_on_after(seconds) as scope:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise MktError(413, TOO_LARGE.format(kib=max_bytes // 1024))
            chunks.append(chunk)
    if scope.cancelled_caught:
        log.info("%s %s: body not complete after %gs (%d bytes), answered 408", request.method, request.url.path,
                 seconds, size)
        raise MktError(408, TOO_SLOW.format(seconds=seconds))
    return b"".join(chunks)


async def read_json(request: Request, invalid_message: str = INVALID_BODY, *,
                    max_bytes: int = MAX_BODY_BYTES, default: Any = None) -> Any:
    """The decoded body. Over `max_bytes`: 413. Not JSON: 400 with the endpoint's message.

    An empty body gives `default` when the endpoint's members are all optional,
    otherwise it cannot be parsed. A member the operation does not declare: 400 naming it.
    """
    raw = await read_body(request, max_bytes=max_bytes)
    if not raw.strip():
        if default is not None:
            return default
        raise MktError(400, invalid_message)
    body = decode_json(raw, invalid_message)
    check_body(request, body)  # no member the operation does not declare (api/strict.py)
    return body


DETAIL_HEADER = "X-Error-Detail"


def detail_header(detail: str) -> str:
    """A detail as a header value: one line of printable ASCII (anything else escaped, control
    characters included: a test email's recipient "\\b" made its detail an invalid header, which
    the server answered by dropping the connection)."""
    line = " ".join(detail.split())
    return "".join(ch if " " <= ch <= "~" else ch.encode("unicode_escape").decode("ascii") for ch in line)


async def mkt_error_handler(request: Request, exc: Exception) -> Response:
    """The body is CONTRACT's fixed shape with the specification's message; what the message
    cannot say (a plan limit's allowance, usage and the command that raises it) goes in the
    `X-Error-Detail` header."""
    assert isinstance(exc, MktError)
    headers = {"Retry-After": "60"} if exc.status == 429 else {"Connection": "close"} if exc.status == 408 else {}
    if exc.detail:
        headers[DETAIL_HEADER] = detail_header(exc.detail)
    return error_response(exc.status, exc.message, headers or None)


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: "Not found.", 405: "Method not allowed."}.get(exc.status_code, exc.detail)
    headers = exc.headers
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": allowed_methods(request)}
    return error_response(exc.status_code, message, headers)


def allowed_methods(request: Request) -> str:
    """Every method of the path: Starlette's Allow names only the first route that matched it,
    and the routes here are one per method (RFC 9110 section 15.5.6 wants them all)."""
    from starlette.routing import Match, Route

    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods))


TOO_LARGE_NUMBER = "A number in the request is out of range."


# Starlette hands Exception's handler every error but re-raises it afterwards (uvicorn then
# logs a traceback); handlers registered for a narrower class answer and end it there.


async def client_disconnect_handler(request: Request, exc: Exception) -> Response:
    """Nobody is left to read an answer: one info line, no traceback, no 500 in the log."""
    log.info("client left before its request was read: %s %s", request.method, request.url.path)
    return Response(status_code=400)


async def database_error_handler(request: Request, exc: Exception) -> Response:
    """A read-only or retired database, a full disk or an I/O error: 503 with a message that says which."""
    assert isinstance(exc, sqlite3.DatabaseError)
    mapped = storage_error(exc)
    if mapped is None:
        raise exc  # any other database error is a bug: the 500 handler logs it
    log.error("%s %s: %s", request.method, request.url.path, exc)
    return error_response(mapped.status, mapped.message)


async def server_error_handler(request: Request, exc: Exception) -> Response:
    if isinstance(exc, OverflowError):
        # Only a user's number beyond SQLite's 64 bits raises this; the services check the
        # members they know, and this keeps any other from turning into a 500.
        log.warning("number out of range on %s %s: %s", request.method, request.url.path, exc)
        return error_response(400, TOO_LARGE_NUMBER)
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "Internal server error.")


SHUTTING_DOWN = "The server is shutting down: the request was stopped before it finished. Try again when it is back."


class ShutdownGuard:
    """A request still running when the graceful-shutdown time is over is cancelled by the
    server (and its SQL interrupted, `Database.interrupt_all`): it gets a 503 with the error
    body and one log line instead of a 500 and a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except (asyncio.CancelledError, sqlite3.OperationalError) as exc:
            event = scope.get("state", {}).get("shutting_down")
            if event is None or not event.is_set() or (
                    isinstance(exc, sqlite3.OperationalError) and "interrupted" not in str(exc)):
                raise
            log.warning("%s %s stopped by the shutdown", scope["method"], scope["path"])
            if not started:
                await error_response(503, SHUTTING_DOWN)(scope, receive, send)


def int_param(request: Request, name: str) -> int | None:
    """An integer query parameter (absent or empty: None); 400 naming it otherwise."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise MktError(400, f"The query parameter '{name}' must be an integer.") from None

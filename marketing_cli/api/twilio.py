"""Twilio's webhooks below the tracking base URL (CONTRACT section 8), without an API key:
`POST /webhooks/twilio/status` (delivery reports) and `POST /webhooks/twilio/inbound` (replies). Mounted like api/tracking.py: with or
without the base URL's path forwarded by a reverse proxy."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.calls import call
from marketing_cli.api.responses import error_response, read_body
from marketing_cli.errors import MktError
from marketing_cli.services.sms import webhooks as sms_webhooks


async def _params(request: Request) -> dict[str, str]:
    raw = await read_body(request, max_bytes=64 * 1024)
    try:
        return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return {}


class StatusBatcher:
    """Group commit for delivery reports: a report waits while the batch before it is being
    written, then goes with every report that arrived meanwhile (at most MAX_BATCH) in one
    `sms_webhooks.twilio_status_batch` call: one transaction. A lone report is written at
    once, so nothing waits for a timer; under a burst the commits per second stay few while
    reports per second grow. Each request is answered after its batch committed."""

    MAX_BATCH = 500

    def __init__(self) -> None:
        self._pending: list[tuple[dict[str, str], str | None, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(self, request: Request, params: dict[str, str], given: str | None) -> Any:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (a test client's): nothing of the old one carries over
            self._loop, self._pending, self._writer = loop, [], None
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((params, given, future))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._drain(request))
        return await future

    async def _drain(self, request: Request) -> None:
        while self._pending:
            batch, self._pending = self._pending[:self.MAX_BATCH], self._pending[self.MAX_BATCH:]
            try:
                results = await call(request, sms_webhooks.twilio_status_batch, [(p, g) for p, g, _ in batch])
            except Exception as exc:  # the whole batch shares the failure (its transaction rolled back)
                for *_, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            except BaseException:  # cancelled (the server stops): so are the requests that wait
                for *_, future in batch + self._pending:
                    future.cancel()
                raise
            for (*_, future), result in zip(batch, results, strict=True):
                if not future.done():  # its client may have gone
                    future.set_result(result)


def _batcher(request: Request) -> StatusBatcher:
    batcher = getattr(request.app.state, "twilio_status_batcher", None)
    if batcher is None:
        batcher = request.app.state.twilio_status_batcher = StatusBatcher()
    return batcher


async def status_callback(request: Request) -> Response:
    params = await _params(request)
    result = await _batcher(request).submit(request, params, request.headers.get("x-twilio-signature"))
    if isinstance(result, MktError):
        return error_response(result.status, result.message)
    return Response(b"", 200, media_type="text/plain")


EMPTY_TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response/>'


async def inbound(request: Request) -> Response:
    params = await _params(request)
    try:
        await call(request, sms_webhooks.twilio_inbound, params, request.headers.get("x-twilio-signature"))
    except MktError as exc:
        return error_response(exc.status, exc.message)
    return Response(EMPTY_TWIML, 200, media_type="text/xml")


def _routes(prefix: str) -> list[Route]:
    return [Route(prefix + sms_webhooks.STATUS_PATH, status_callback, methods=["POST"]),
            Route(prefix + sms_webhooks.INBOUND_PATH, inbound, methods=["POST"])]


routes = [*_routes(""), *_routes("/{prefix:path}")]

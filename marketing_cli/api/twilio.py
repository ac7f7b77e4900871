"""Twilio's webhooks below the tracking base URL (CONTRACT section 8), without an API key:
`POST /webhooks/twilio/status` (delivery reports) and `POST /webhooks/twilio/inbound` (replies). Mounted like api/tracking.py: with or
without the base URL's path forwarded by a reverse proxy."""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.calls import call
from marketing_cli.api.responses import error_response, read_body
from marketing_cli.errors import MktError
from marketing_cli.services import sms_webhooks


async def _params(request: Request) -> dict[str, str]:
    raw = await read_body(request, max_bytes=64 * 1024)
    try:
        return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return {}


async def status_callback(request: Request) -> Response:
    params = await _params(request)
    try:
        await call(request, sms_webhooks.twilio_status, params, request.headers.get("x-twilio-signature"))
    except MktError as exc:
        return error_response(exc.status, exc.message)
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

"""POST /v1/events (track a custom event) and GET /v1/events (the event log, an extension)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_b, int_param, read_json
from marketing_cli.services.contacts import events


async def track_event(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, events.INVALID_BODY)
    return envelope_b(await call(request, events.track_event, workspace_id, body))


async def list_events(request: Request) -> Response:
    workspace_id = require_workspace(request)
    limit = int_param(request, "limit")
    return envelope_b(await call(
        request, events.list_events, workspace_id,
        after_id=int_param(request, "after_id"),
        limit=events.DEFAULT_LOG_LIMIT if limit is None else limit,
        type=request.query_params.get("type") or None,
        contact_id=request.query_params.get("contact_id") or None,
    ))


routes = [
    Route("/v1/events", track_event, methods=["POST"]),
    Route("/v1/events", list_events, methods=["GET"]),
]

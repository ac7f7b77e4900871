"""Recurring (and feed) email campaigns, an extension (docs/api.md "Recurring campaigns"): make
a DRAFT campaign recur, preview a rule, list / show / pause / resume / stop a series. Envelope A."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.delivery import sender_gate
from marketing_cli.services.email import campaigns, series


async def create_series(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = campaigns.check_campaign_id(request.path_params["campaign_id"])
    body = await read_json(request, series.INVALID_BODY)
    # the compliance gate first (services/delivery/sender_gate.py)
    return envelope_a(await call(request, sender_gate.create_series, workspace_id, campaign_id, body), 201)


async def preview_series(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = campaigns.check_campaign_id(request.path_params["campaign_id"])
    body = await read_json(request, series.INVALID_BODY)
    return envelope_a(await call(request, series.preview_series, workspace_id, campaign_id, body))


async def list_series(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, series.list_series, workspace_id, request.query_params.get("status")))


get_series = on_id(series.get_series, "series_id")


def _action(service: Callable[..., Any]) -> Callable[[Request], Awaitable[Response]]:
    """A handler for a series action (pause, resume, stop): no body, the series in envelope A."""
    async def handler(request: Request) -> Response:
        workspace_id = require_workspace(request)
        return envelope_a(await call(request, service, workspace_id, request.path_params["series_id"]))
    return handler


routes = [
    Route("/v1/campaigns/{campaign_id}/series", create_series, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/series/preview", preview_series, methods=["POST"]),
    Route("/v1/campaign-series", list_series, methods=["GET"]),
    Route("/v1/campaign-series/{series_id}", get_series, methods=["GET"]),
    Route("/v1/campaign-series/{series_id}/pause", _action(series.pause_series), methods=["POST"]),
    Route("/v1/campaign-series/{series_id}/resume", _action(series.resume_series), methods=["POST"]),
    Route("/v1/campaign-series/{series_id}/stop", _action(series.stop_series), methods=["POST"]),
]

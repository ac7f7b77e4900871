"""GET /v1/deliverability (CONTRACT section 11): per sending domain and provider lane, what the
workspace's messages became over the last `days` (services/delivery/deliverability.py). Envelope A."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a
from marketing_cli.services.delivery import deliverability


async def get_deliverability(request: Request) -> Response:
    workspace_id = require_workspace(request)
    query = request.query_params
    return envelope_a(await call(request, deliverability.report, workspace_id, query.get("days"),
                                 query.get("compliance")))


routes = [Route("/v1/deliverability", get_deliverability, methods=["GET"])]

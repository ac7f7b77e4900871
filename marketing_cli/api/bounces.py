"""POST /v1/bounces (CONTRACT section 7): a bounce or complaint for an address. 201, envelope A."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.delivery import bounces


async def record_bounce(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, bounces.INVALID_BODY)
    return envelope_a(await call(request, bounces.record_bounce, workspace_id, body), 201)


routes = [Route("/v1/bounces", record_bounce, methods=["POST"])]

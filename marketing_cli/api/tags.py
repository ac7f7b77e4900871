"""/v1/tags: GET (list) and POST (create); extension endpoints (CONTRACT section 5). Envelope B."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_b, read_json
from marketing_cli.services.contacts import tags


async def list_tags(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_b(await call(request, tags.list_tags, workspace_id))


async def create_tag(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, tags.INVALID_BODY)
    return envelope_b(await call(request, tags.create_tag, workspace_id, body), 201)


routes = [
    Route("/v1/tags", list_tags, methods=["GET"]),
    Route("/v1/tags", create_tag, methods=["POST"]),
]

"""POST /v1/audience/count (extension): how many contacts an audience reaches on a channel."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import db_conn, require_workspace
from marketing_cli.api.responses import INVALID_BODY, envelope_b, read_json
from marketing_cli.services import audience


async def count_audience(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, INVALID_BODY)
    return envelope_b(audience.audience_count(db_conn(request), workspace_id, body))


routes = [
    Route("/v1/audience/count", count_audience, methods=["POST"]),
]

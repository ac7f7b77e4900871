"""POST /v1/audience/count (extension): how many contacts an audience reaches on a channel.

The count can take a few hundred milliseconds at a million contacts, so it runs in a
worker thread (with that thread's own connection), not on the event loop.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.responses import INVALID_BODY, envelope_b, read_json
from marketing_cli.services.contacts import audience


async def count_audience(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, INVALID_BODY)
    db = request.app.state.db
    return envelope_b(await run_in_threadpool(lambda: audience.audience_count(db.conn(), workspace_id, body)))


routes = [
    Route("/v1/audience/count", count_audience, methods=["POST"]),
]

"""GET and PATCH /v1/workspace."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace, unchanged
from marketing_cli.api.calls import call, quick_read
from marketing_cli.api.responses import RenderedJSON, envelope_a, read_json
from marketing_cli.services.account import billing, workspaces


async def get_workspace(request: Request) -> Response:
    """The hot read: its answer is kept, rendered, while the database is unchanged (the same
    bytes a new read would give: storage/versioned.py) and the usage hour is the same."""
    workspace_id = require_workspace(request)
    cache = unchanged(request)
    key = ("GET /v1/workspace", workspace_id, billing.usage_hour())
    body = None if cache is None else cache.get(key)
    if body is None:
        body = envelope_a(await quick_read(request, workspaces.get_workspace_info, workspace_id)).body
        if cache is not None:
            cache[key] = body
    return RenderedJSON(body)


async def patch_workspace(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, workspaces.INVALID_BODY)
    return envelope_a(await call(request, workspaces.update_workspace, workspace_id, body))


routes = [
    Route("/v1/workspace", get_workspace, methods=["GET"]),
    Route("/v1/workspace", patch_workspace, methods=["PATCH"]),
]

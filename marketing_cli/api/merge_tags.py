"""GET /v1/merge-tags."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a
from marketing_cli.services.contacts import merge_tags


async def list_merge_tags(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, merge_tags.list_merge_tags, workspace_id))


routes = [Route("/v1/merge-tags", list_merge_tags, methods=["GET"])]

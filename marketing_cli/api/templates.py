"""/v1/templates: POST (create), GET (list), GET /:id (one, with its content) and
GET /:id/assets/:path (a file kept from a ZIP import, as stored). Envelope A.

The specification shows POST /v1/templates without naming its envelope; like the other
endpoints added with the email half (campaigns, domains), every template endpoint answers
envelope A. The request body may be up to 16 MiB (a 10 MiB ZIP archive in base64), not
the default 1 MiB.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.deletion import sending as deletion
from marketing_cli.services.email import templates


async def create_template(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, templates.INVALID_BODY, max_bytes=templates.MAX_BODY_BYTES)
    return envelope_a(await call(request, templates.create_template, workspace_id, body), 201)


async def list_templates(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, templates.list_templates, workspace_id))


async def get_template_asset(request: Request) -> Response:
    """One file kept from a ZIP import, as stored (extension); never rendered by the API itself."""
    workspace_id = require_workspace(request)
    content_type, data = await call(request, templates.template_asset, workspace_id, request.path_params["id"],
                                    request.path_params["path"])
    return Response(data, media_type=content_type, headers={
        "X-Content-Type-Options": "nosniff", "Content-Disposition": "attachment",
        "Content-Security-Policy": "default-src 'none'; sandbox"})


get_template = on_id(templates.get_template, "id")


delete_template = on_id(deletion.delete_template, "id")


routes = [
    Route("/v1/templates", create_template, methods=["POST"]),
    Route("/v1/templates", list_templates, methods=["GET"]),
    Route("/v1/templates/{id}", get_template, methods=["GET"]),
    Route("/v1/templates/{id}", delete_template, methods=["DELETE"]),
    Route("/v1/templates/{id}/assets/{path:path}", get_template_asset, methods=["GET"]),
]

"""/v1/fields: POST (create), PATCH /:id (update), GET (list, an extension). Envelope B."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_b, read_json
from marketing_cli.services.contacts import fields
from marketing_cli.services.deletion import audience as deletion


async def list_fields(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_b(await call(request, fields.list_fields, workspace_id))


async def create_field(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, fields.VALIDATION)
    return envelope_b(await call(request, fields.create_field, workspace_id, body), 201)


async def update_field(request: Request) -> Response:
    workspace_id = require_workspace(request)
    field_id = request.path_params["field_id"]  # read by ids.parse_int_id in the service (404)
    await call(request, fields.get_field, workspace_id, field_id)  # 404 before reading the body
    body = await read_json(request, fields.VALIDATION)
    return envelope_b(await call(request, fields.update_field, workspace_id, field_id, body))


delete_field = on_id(deletion.delete_field, "field_id", envelope=envelope_b)


routes = [
    Route("/v1/fields", list_fields, methods=["GET"]),
    Route("/v1/fields", create_field, methods=["POST"]),
    Route("/v1/fields/{field_id}", update_field, methods=["PATCH"]),
    Route("/v1/fields/{field_id}", delete_field, methods=["DELETE"]),
]

"""/v1/tags: GET (list) and POST (create), extension endpoints (CONTRACT section 5); DELETE /v1/tags/{tag_id}
(CONTRACT section 10); POST /v1/tags/{tag_id}/contacts and .../contacts/remove, the bulk tag and untag
(extension, docs/api.md). Envelope B."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_b, read_json
from marketing_cli.services.automations import tagging
from marketing_cli.services.contacts import tags
from marketing_cli.services.deletion import audience as deletion


async def list_tags(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_b(await call(request, tags.list_tags, workspace_id))


async def create_tag(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, tags.INVALID_BODY)
    return envelope_b(await call(request, tags.create_tag, workspace_id, body), 201)


delete_tag = on_id(deletion.delete_tag, "tag_id", envelope=envelope_b)


# A list of 100,000 addresses (limits.TAG_LIST) is a few MiB: more than other bodies may be.
SELECTION_BYTES = 16 * 1024 * 1024


async def tag_contacts(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, tags.INVALID_BODY, max_bytes=SELECTION_BYTES)
    return envelope_b(await call(request, tagging.tag_contacts, workspace_id, request.path_params["tag_id"], body))


async def untag_contacts(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, tags.INVALID_BODY, max_bytes=SELECTION_BYTES)
    return envelope_b(await call(request, tagging.untag_contacts, workspace_id, request.path_params["tag_id"], body))


routes = [
    Route("/v1/tags", list_tags, methods=["GET"]),
    Route("/v1/tags", create_tag, methods=["POST"]),
    Route("/v1/tags/{tag_id}", delete_tag, methods=["DELETE"]),
    Route("/v1/tags/{tag_id}/contacts", tag_contacts, methods=["POST"]),
    Route("/v1/tags/{tag_id}/contacts/remove", untag_contacts, methods=["POST"]),
]

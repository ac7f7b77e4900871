"""/v1/sender-identities: GET (list), POST (add), GET /v1/sender-identities/{id}; envelope A.

Extensions in the style of the specification (it names sender identities but shows no
endpoint for them): identities live only on the workspace's own domains.
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
from marketing_cli.services.email import senders


async def list_sender_identities(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, senders.list_sender_identities, workspace_id))


async def add_sender_identity(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, senders.INVALID_BODY)
    return envelope_a(await call(request, senders.add_sender_identity, workspace_id, body), 201)


get_sender_identity = on_id(senders.show_sender_identity, "sender_id")


delete_sender_identity = on_id(deletion.delete_sender_identity, "sender_id")


routes = [
    Route("/v1/sender-identities", list_sender_identities, methods=["GET"]),
    Route("/v1/sender-identities", add_sender_identity, methods=["POST"]),
    Route("/v1/sender-identities/{sender_id}", get_sender_identity, methods=["GET"]),
    Route("/v1/sender-identities/{sender_id}", delete_sender_identity, methods=["DELETE"]),
]

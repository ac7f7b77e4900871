"""A person's data: erase a contact (DELETE /v1/contacts/{id}), its personal-data export, and
the suppression list (/v1/suppressions). Envelope B, the contacts family's.

The contact routes share their paths with api/contacts.py's GET: Starlette takes the first
route whose path and method both match, so these may come after it (ROUTE_MODULES).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api import contacts as _contact_paths  # noqa: F401 - registers the contact_id convertor
from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_b, read_json
from marketing_cli.services.contacts import records, suppressions
from marketing_cli.services.privacy import erase, personal_data


async def delete_contact(request: Request) -> Response:
    workspace_id = require_workspace(request)
    suppress = request.query_params.get("suppress")
    return envelope_b(await call(request, erase.delete_contact, workspace_id, request.path_params["contact_id"],
                                 suppress))


async def export_person(request: Request) -> Response:
    workspace_id = require_workspace(request)
    contact_id = records.check_contact_id(request.path_params["contact_id"])
    return envelope_b(await call(request, personal_data.export_person, workspace_id, contact_id))


async def list_suppressions(request: Request) -> Response:
    workspace_id = require_workspace(request)
    query = request.query_params
    return envelope_b(await call(request, suppressions.list_suppressions, workspace_id,
                                 email_address=query.get("email_address"), phone_number=query.get("phone_number"),
                                 page=query.get("page"), limit=query.get("limit")))


async def add_suppression(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, suppressions.INVALID_BODY)
    return envelope_b(await call(request, suppressions.add_suppression, workspace_id, body), 201)


remove_suppression = on_id(suppressions.remove_suppression, "id", envelope=envelope_b)


routes = [
    Route("/v1/contacts/{contact_id:contact_id}", delete_contact, methods=["DELETE"]),
    Route("/v1/contacts/{contact_id:contact_id}/personal-data", export_person, methods=["GET"]),
    Route("/v1/suppressions", list_suppressions, methods=["GET"]),
    Route("/v1/suppressions", add_suppression, methods=["POST"]),
    Route("/v1/suppressions/{id}", remove_suppression, methods=["DELETE"]),
]

"""/v1/contacts: create, upsert, by-phone, get by id, tags add/remove, the consent ledger. Envelope B.

Starlette tries routes in list order: the fixed paths (/search, /upsert, /by-phone, /import,
/export) come before the `/v1/contacts/{contact_id}` routes, and new fixed paths belong
above them too.
"""

from __future__ import annotations

import re

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.contact_search import search_contacts
from marketing_cli.api.contacts_io import export_contacts, import_contacts
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_b, int_param, read_json
from marketing_cli.services.contacts import consent_export
from marketing_cli.services.contacts import records as contacts


async def create_contact(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, contacts.INVALID_BODY)
    return envelope_b(await call(request, contacts.create_contact, workspace_id, body), 201)


async def upsert_contact(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, contacts.INVALID_BODY)
    return envelope_b(await call(request, contacts.upsert_contact, workspace_id, body))


async def get_contact_by_phone(request: Request) -> Response:
    workspace_id = require_workspace(request)
    phone_number = request.query_params.get("phone_number")
    return envelope_b(await call(request, contacts.get_contact_by_phone, workspace_id, phone_number))


get_contact = on_id(contacts.get_contact, "contact_id", envelope=envelope_b)


async def add_contact_tags(request: Request) -> Response:
    workspace_id = require_workspace(request)
    contact_id = contacts.check_contact_id(request.path_params["contact_id"])
    body = await read_json(request, contacts.INVALID_BODY)
    return envelope_b(await call(request, contacts.add_contact_tags, workspace_id, contact_id, body))


async def remove_contact_tags(request: Request) -> Response:
    workspace_id = require_workspace(request)
    contact_id = contacts.check_contact_id(request.path_params["contact_id"])
    body = await read_json(request, contacts.INVALID_BODY)
    return envelope_b(await call(request, contacts.remove_contact_tags, workspace_id, contact_id, body))


async def list_contact_consents(request: Request) -> Response:
    workspace_id = require_workspace(request)
    limit = int_param(request, "limit")
    return envelope_b(await call(
        request, consent_export.list_contact_consents, workspace_id, request.path_params["contact_id"],
        after_id=int_param(request, "after_id"), limit=consent_export.DEFAULT_LIMIT if limit is None else limit))


# The fixed paths below are never read as a contact id, so a wrong method on one of them
# (GET /v1/contacts/upsert) is the 405 it should be, not a lookup of contact "upsert".
FIXED_PATHS = ("upsert", "search", "by-phone", "import", "export")


class ContactIdConvertor(Convertor[str]):
    regex = f"(?!(?:{'|'.join(re.escape(p) for p in FIXED_PATHS)})(?:/|$))[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("contact_id", ContactIdConvertor())

routes = [
    # Fixed paths first (POST /v1/contacts/search is registered here by contact search).
    Route("/v1/contacts", create_contact, methods=["POST"]),
    Route("/v1/contacts/upsert", upsert_contact, methods=["POST"]),
    Route("/v1/contacts/search", search_contacts, methods=["POST"]),
    Route("/v1/contacts/by-phone", get_contact_by_phone, methods=["GET"]),
    Route("/v1/contacts/import", import_contacts, methods=["POST"]),  # api/contacts_io.py
    Route("/v1/contacts/export", export_contacts, methods=["GET"]),
    # Then the routes with a contact id.
    Route("/v1/contacts/{contact_id:contact_id}", get_contact, methods=["GET"]),
    Route("/v1/contacts/{contact_id:contact_id}/tags/add", add_contact_tags, methods=["POST"]),
    Route("/v1/contacts/{contact_id:contact_id}/tags/remove", remove_contact_tags, methods=["POST"]),
    Route("/v1/contacts/{contact_id:contact_id}/consents", list_contact_consents, methods=["GET"]),
]

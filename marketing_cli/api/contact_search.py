"""POST /v1/contacts/search (envelope B); routed from api/contacts.py, above the /{contact_id} paths."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_b, read_json
from marketing_cli.services.contacts import search as contact_search


async def search_contacts(request: Request) -> Response:
    workspace_id = require_workspace(request)
    # Every member is optional: an empty body searches everything.
    body = await read_json(request, contact_search.INVALID_BODY, default={})
    return envelope_b(await call(request, contact_search.search_contacts, workspace_id, body))

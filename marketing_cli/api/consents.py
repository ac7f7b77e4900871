"""GET /v1/consents (an extension): the workspace's consent ledger over a time range, as JSON
rows, oldest first, paged with after_id and limit; `mkt consents export` writes the same rows
as CSV (services/contacts/consent_export.py). Envelope B, as the contacts'."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_b, int_param
from marketing_cli.services.contacts import consent_export


async def list_consents(request: Request) -> Response:
    workspace_id = require_workspace(request)
    limit = int_param(request, "limit")
    return envelope_b(await call(
        request, consent_export.list_consents, workspace_id, since=request.query_params.get("since"),
        until=request.query_params.get("until"), after_id=int_param(request, "after_id"),
        limit=consent_export.DEFAULT_LIMIT if limit is None else limit))


routes = [Route("/v1/consents", list_consents, methods=["GET"])]

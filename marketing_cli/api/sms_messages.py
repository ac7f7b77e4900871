"""GET /v1/sms-campaigns/{campaign_id}/messages: per-recipient message states (envelope A)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a
from marketing_cli.services.sms import messages as sms_messages


async def list_messages(request: Request) -> Response:
    workspace_id = require_workspace(request)
    q = request.query_params
    return envelope_a(await call(request, sms_messages.list_messages, workspace_id,
                                 request.path_params["campaign_id"], status=q.get("status"), page=q.get("page"),
                                 limit=q.get("limit")))


routes = [Route("/v1/sms-campaigns/{campaign_id}/messages", list_messages, methods=["GET"])]

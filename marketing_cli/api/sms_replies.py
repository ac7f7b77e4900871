"""GET /v1/sms-replies: the SMS replies received and what each did (envelope A, paged like the
SMS campaign list; services/sms/replies.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a
from marketing_cli.services.sms import replies


async def list_replies(request: Request) -> Response:
    workspace_id = require_workspace(request)
    q = request.query_params
    return envelope_a(await call(request, replies.list_replies, workspace_id, action=q.get("action"),
                                 page=q.get("page"), limit=q.get("limit")))


routes = [Route("/v1/sms-replies", list_replies, methods=["GET"])]

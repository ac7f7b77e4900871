"""GET /v1/campaigns/:id/statistics: the email campaign statistics, envelope A."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a
from marketing_cli.services.email import stats


async def get_campaign_statistics(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = request.path_params["campaign_id"]
    return envelope_a(await call(request, stats.get_campaign_statistics, workspace_id, campaign_id))


routes = [
    Route("/v1/campaigns/{campaign_id}/statistics", get_campaign_statistics, methods=["GET"]),
]

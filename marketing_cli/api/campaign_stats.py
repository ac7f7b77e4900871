"""GET /v1/campaigns/:id/statistics and .../timeline (envelope A), and .../report: the
campaign's report as one self-contained HTML page (marketing_cli/reports/html.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a
from marketing_cli.reports import email as email_report
from marketing_cli.reports import html
from marketing_cli.services.email import timeline
from marketing_cli.services.estimates import views as estimates


async def get_campaign_statistics(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = request.path_params["campaign_id"]
    return envelope_a(await call(request, estimates.email_statistics, workspace_id, campaign_id))


async def get_campaign_timeline(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = request.path_params["campaign_id"]
    return envelope_a(await call(request, timeline.get_campaign_timeline, workspace_id, campaign_id))


async def get_campaign_report(request: Request) -> Response:
    workspace_id = require_workspace(request)
    data = await call(request, email_report.campaign_report, workspace_id, request.path_params["campaign_id"])
    return HTMLResponse(html.render(data), headers=html.PAGE_HEADERS)


routes = [
    Route("/v1/campaigns/{campaign_id}/statistics", get_campaign_statistics, methods=["GET"]),
    Route("/v1/campaigns/{campaign_id}/timeline", get_campaign_timeline, methods=["GET"]),
    Route("/v1/campaigns/{campaign_id}/report", get_campaign_report, methods=["GET"]),
]

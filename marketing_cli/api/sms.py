"""/v1 SMS: campaigns (POST, GET list, GET one, PATCH, schedule, unschedule, duplicate, cancel,
archive, statistics, timeline) and POST /v1/sms/quote. Every answer is envelope A, but the
campaign's report: one self-contained HTML page (marketing_cli/reports/html.py).

A path with an empty campaign id (`/v1/sms-campaigns//schedule`) answers the spec's
"Please provide a campaign ID."; a malformed one "We could not find the campaign you are
looking for." (both 400).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.reports import html
from marketing_cli.services.deletion import campaigns as deletion
from marketing_cli.services.estimates import views as estimates
from marketing_cli.services.sms import campaigns, report, schedule, timeline


def _id(request: Request) -> str:
    return request.path_params.get("campaign_id", "")


async def create_campaign(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, campaigns.INVALID_BODY)
    return envelope_a(await call(request, estimates.sms_create, workspace_id, body), 201)


async def list_campaigns(request: Request) -> Response:
    workspace_id = require_workspace(request)
    q = request.query_params
    return envelope_a(await call(request, estimates.sms_campaigns, workspace_id, page=q.get("page"), limit=q.get("limit"),
                                 status=q.get("status")))


get_campaign = on_id(estimates.sms_campaign, "campaign_id")
update_campaign = on_id(estimates.sms_update, "campaign_id", body=campaigns.INVALID_BODY)
schedule_campaign = on_id(schedule.schedule_campaign, "campaign_id", body=campaigns.SCHEDULE_INVALID_BODY)
preview_schedule = on_id(estimates.sms_schedule_preview, "campaign_id", body=campaigns.SCHEDULE_INVALID_BODY)
cancel_campaign = on_id(campaigns.cancel_campaign, "campaign_id")


async def campaign_reach(request: Request) -> Response:
    from marketing_cli.services.sms import reach

    workspace_id = require_workspace(request)
    return envelope_a(await call(request, reach.campaign_reach, workspace_id, _id(request)))


unschedule_campaign = on_id(estimates.sms_unschedule, "campaign_id")
duplicate_campaign = on_id(estimates.sms_duplicate, "campaign_id", status=201)
archive_campaign = on_id(campaigns.archive_campaign, "campaign_id")
delete_sms_campaign = on_id(deletion.delete_sms_campaign, "campaign_id")
campaign_statistics = on_id(estimates.sms_statistics, "campaign_id")
campaign_timeline = on_id(timeline.campaign_timeline, "campaign_id")


async def campaign_report(request: Request) -> Response:
    workspace_id = require_workspace(request)
    data = await call(request, report.campaign_report, workspace_id, _id(request))
    return HTMLResponse(html.render(data), headers=html.PAGE_HEADERS)


async def quote(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, campaigns.INVALID_BODY)
    return envelope_a(await call(request, schedule.quote_message, workspace_id, body))


routes = [
    Route("/v1/sms-campaigns", create_campaign, methods=["POST"]),
    Route("/v1/sms-campaigns", list_campaigns, methods=["GET"]),
    Route("/v1/sms-campaigns/{campaign_id}", get_campaign, methods=["GET"]),
    Route("/v1/sms-campaigns/{campaign_id}", update_campaign, methods=["PATCH"]),
    Route("/v1/sms-campaigns/{campaign_id}", delete_sms_campaign, methods=["DELETE"]),
    Route("/v1/sms-campaigns/{campaign_id}/schedule", schedule_campaign, methods=["POST"]),
    Route("/v1/sms-campaigns//schedule", schedule_campaign, methods=["POST"]),
    Route("/v1/sms-campaigns/{campaign_id}/schedule/preview", preview_schedule, methods=["POST"]),
    Route("/v1/sms-campaigns/{campaign_id}/cancel", cancel_campaign, methods=["POST"]),
    Route("/v1/sms-campaigns/{campaign_id}/reach", campaign_reach, methods=["GET"]),
    Route("/v1/sms-campaigns/{campaign_id}/unschedule", unschedule_campaign, methods=["POST"]),
    Route("/v1/sms-campaigns/{campaign_id}/duplicate", duplicate_campaign, methods=["POST"]),
    Route("/v1/sms-campaigns/{campaign_id}/archive", archive_campaign, methods=["POST"]),
    Route("/v1/sms-campaigns/{campaign_id}/statistics", campaign_statistics, methods=["GET"]),
    Route("/v1/sms-campaigns//statistics", campaign_statistics, methods=["GET"]),
    Route("/v1/sms-campaigns/{campaign_id}/timeline", campaign_timeline, methods=["GET"]),
    Route("/v1/sms-campaigns//timeline", campaign_timeline, methods=["GET"]),
    Route("/v1/sms-campaigns/{campaign_id}/report", campaign_report, methods=["GET"]),
    Route("/v1/sms-campaigns//report", campaign_report, methods=["GET"]),
    Route("/v1/sms/quote", quote, methods=["POST"]),
]

"""Sending email campaigns: schedule (and its preview), unschedule, cancel and resume. Envelope A."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.email import schedule as email_schedule


async def schedule_campaign(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, email_schedule.INVALID_BODY)
    return envelope_a(await call(request, email_schedule.schedule_campaign, workspace_id,
                                 request.path_params["campaign_id"], body))


async def preview_schedule(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, email_schedule.INVALID_BODY)
    return envelope_a(await call(request, email_schedule.preview_schedule, workspace_id,
                                 request.path_params["campaign_id"], body))


async def cancel_campaign(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, email_schedule.cancel_campaign, workspace_id,
                                 request.path_params["campaign_id"]))


async def unschedule_campaign(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, email_schedule.unschedule_campaign, workspace_id,
                                 request.path_params["campaign_id"]))


async def resume_campaign(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, email_schedule.resume_campaign, workspace_id,
                                 request.path_params["campaign_id"]))


routes = [
    Route("/v1/campaigns/{campaign_id}/schedule", schedule_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/unschedule", unschedule_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/schedule/preview", preview_schedule, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/cancel", cancel_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/resume", resume_campaign, methods=["POST"]),
]

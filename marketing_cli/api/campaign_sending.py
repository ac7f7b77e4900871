"""Sending email campaigns: schedule (and its preview), unschedule, cancel, resume and archive. Envelope A."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.delivery import sender_gate
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.services.estimates import views as estimates

# The compliance gate stands before scheduling (services/delivery/sender_gate.py); no API key can override it.
schedule_campaign = on_id(sender_gate.schedule_campaign, "campaign_id", body=email_schedule.INVALID_BODY)
preview_schedule = on_id(estimates.email_schedule_preview, "campaign_id", body=email_schedule.INVALID_BODY)
cancel_campaign = on_id(email_schedule.cancel_campaign, "campaign_id")
archive_campaign = on_id(email_schedule.archive_campaign, "campaign_id")
unschedule_campaign = on_id(email_schedule.unschedule_campaign, "campaign_id")


async def resume_campaign(request: Request) -> Response:
    """POST /v1/campaigns/{campaign_id}/resume, its body optional ({"force": true} after the circuit breaker)."""
    workspace_id = require_workspace(request)
    body = await read_json(request, email_schedule.RESUME_BODY_INVALID, default={})
    return envelope_a(await call(request, email_schedule.resume_campaign, workspace_id,
                                 request.path_params.get("campaign_id", ""), body))


routes = [
    Route("/v1/campaigns/{campaign_id}/schedule", schedule_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/unschedule", unschedule_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/schedule/preview", preview_schedule, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/cancel", cancel_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/archive", archive_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/resume", resume_campaign, methods=["POST"]),
]

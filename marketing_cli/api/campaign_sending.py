"""Sending email campaigns: schedule (and its preview), unschedule, cancel, resume and archive. Envelope A."""

from __future__ import annotations

from starlette.routing import Route

from marketing_cli.api.endpoints import on_id
from marketing_cli.services.delivery import sender_gate
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.services.estimates import views as estimates

# The compliance gate stands before scheduling (services/delivery/sender_gate.py); no API key can override it.
schedule_campaign = on_id(sender_gate.schedule_campaign, "campaign_id", body=email_schedule.INVALID_BODY)
preview_schedule = on_id(estimates.email_schedule_preview, "campaign_id", body=email_schedule.INVALID_BODY)
cancel_campaign = on_id(email_schedule.cancel_campaign, "campaign_id")
archive_campaign = on_id(email_schedule.archive_campaign, "campaign_id")
unschedule_campaign = on_id(email_schedule.unschedule_campaign, "campaign_id")
resume_campaign = on_id(email_schedule.resume_campaign, "campaign_id")


routes = [
    Route("/v1/campaigns/{campaign_id}/schedule", schedule_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/unschedule", unschedule_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/schedule/preview", preview_schedule, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/cancel", cancel_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/archive", archive_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/resume", resume_campaign, methods=["POST"]),
]

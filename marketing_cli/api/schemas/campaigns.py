"""Email campaigns: create, list, read, configure (sender, audience, variants), their variants'
HTML and preview, test emails; statistics, timeline and report; scheduling, cancelling,
resuming, unscheduling and duplicating.

The routes of api/campaigns.py, api/campaign_stats.py and api/campaign_sending.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.audience import AUDIENCE
from marketing_cli.api.schemas.common import (
    ANY,
    EMPTY_OR,
    ESTIMATE,
    HEX_ID,
    INT_ID,
    LATER_NEEDS_TIME,
    NULLABLE_TIMESTAMP,
    REPORT_PAGE,
    SCHEDULE,
    SCHEDULE_PREVIEW,
    TIMESTAMP,
    Schema,
    array,
    deleted,
    enum,
    lenient_page_query,
    name,
    obj,
    timeline_schema,
    trimmed_length,
)
from marketing_cli.services.email import campaigns
from marketing_cli.services.email import timeline as email_timeline

# Messages written to an outbox folder instead of being sent (they count in `delivered`).
OUTBOX_DELIVERIES: Schema = {
    "type": ["object", "null"], "required": ["delivered", "path"],
    "properties": {"delivered": {"type": "integer", "minimum": 1}, "path": {"type": "string"}},
    "description": "Extension: how many of the delivered messages were written to the server's outbox folder "
                   "(at `path`) rather than sent to their recipients; null when none was."}
# While a provider lane holds some of a sending campaign's messages (services/delivery/lane_view.py).
HELD_BACK: Schema = {**array(obj({
    "lane": enum(("gmail", "yahoo", "microsoft", "apple", "other")), "messages": {"type": "integer", "minimum": 1},
    "state": enum(("suspended", "slowed", "warmup")), "opens_at": NULLABLE_TIMESTAMP, "until": TIMESTAMP,
    "rate": {"type": ["number", "null"], "description": "messages per second of a slowed lane; null for a "
                                                        "warm-up's daily cap"},
    "reason": {"type": ["string", "null"]}, "line": {"type": "string"}},
    ("lane", "messages", "state", "until", "line"))),
    "description": "Extension: the campaign's queued messages a provider lane holds back after the relay's "
                   "push-back (421 4.7.28, 454 Throttling failure ...) or its domain's warm-up cap of the day (state "
                   "`warmup`), until when, and why; only while some are."}
CAMPAIGN = obj({"id": HEX_ID, "name": {"type": "string"}, "type": enum(campaigns.TYPES),
                "status": enum(campaigns.STATUSES), "status_detail": {"type": ["string", "null"]},
                "variants": array(obj({"id": HEX_ID, "type": enum(campaigns.VARIANT_TYPES)}, ("id", "type"))),
                "progress": obj({"total": {"type": "integer"}, "sent": {"type": "integer"},
                                 "delivered": {"type": "integer"}, "failed": {"type": "integer"},
                                 "outbox": OUTBOX_DELIVERIES}),
                "scheduled_at": {**NULLABLE_TIMESTAMP, "description": "The scheduled instant; for a live series' "
                                 "definition and a local-time send, the next occurrence (the series' next run, the "
                                 "next zone's instant)."},
                "estimate": ESTIMATE,
                "held_back": HELD_BACK,
                "created_at": TIMESTAMP, "updated_at": TIMESTAMP}, ("id", "name", "type", "status", "variants"))
# PATCH .../configure answers the configuration view: the campaign without its status.
CAMPAIGN_CONFIGURATION = {**CAMPAIGN, "required": ["id", "name", "type", "variants"]}
CAMPAIGN_WITH_ESTIMATE = {**CAMPAIGN, "required": ["id", "name", "type", "status", "variants", "estimate"]}
EMAIL_SCHEDULE = obj({**SCHEDULE["properties"],
                      "ab_test": obj({"test_percentage": {"type": "integer", "minimum": 1, "maximum": 100},
                                      "winner_criterion": enum(("OPENS", "CLICKS")),
                                      "wait_minutes": {"type": "integer", "minimum": 0, "maximum": 43200}})},
                     ("schedule_type",), allOf=[LATER_NEEDS_TIME])

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/campaigns"): {"links": [(m, p, {"campaign_id": "id"}) for m, p in (
                                    ("GET", "/v1/campaigns/{campaign_id}"),
                                    ("PATCH", "/v1/campaigns/{campaign_id}/configure"),
                                    ("GET", "/v1/campaigns/{campaign_id}/statistics"),
                                    ("POST", "/v1/campaigns/{campaign_id}/schedule"))],
                                "summary": "Create an email campaign (DRAFT)", "envelope": "A", "status": 201,
                                "body": obj({"name": name(255), "type": enum(campaigns.TYPES)}, ("name",)),
                                "data": CAMPAIGN_WITH_ESTIMATE},
    ("GET", "/v1/campaigns"): {"summary": "The workspace's email campaigns", "envelope": "A",
                               "query": {**lenient_page_query(campaigns.DEFAULT_LIMIT, campaigns.MAX_LIMIT),
                                         "status": EMPTY_OR(campaigns.STATUSES)},
                               "data": obj({"campaigns": array(CAMPAIGN_WITH_ESTIMATE)}, ("campaigns",))},
    ("GET", "/v1/campaigns/{campaign_id}"): {"summary": "An email campaign", "envelope": "A",
                                             "data": CAMPAIGN_WITH_ESTIMATE},
    ("PATCH", "/v1/campaigns/{campaign_id}/configure"): {
        "summary": "Configure a DRAFT campaign: sender, audience, variants", "envelope": "A",
        "body": obj({"sender": obj({"sender_identity_id": INT_ID, "reply_to": obj({
                         "display_name": {"type": "string"}, "local_part": {"type": "string"},
                         "domain_name": {"type": "string"}})}, required=("sender_identity_id",)), "audience": AUDIENCE,
                     # type and subject required (the specification's table); the subject is
                     # counted trimmed, as the service counts it; a campaign has two variants at most
                     "variants": array(obj({"type": enum(campaigns.VARIANT_TYPES),
                                            "subject": trimmed_length(3, 90),
                                            "preview_text": {"type": "string", "maxLength": 120}},
                                           ("type", "subject")), maxItems=2)}),
        "data": CAMPAIGN_CONFIGURATION},
    ("POST", "/v1/campaigns/{campaign_id}/variants/{variant_type}/html"): {
        "summary": "Set a variant's HTML (or take a template's)", "envelope": "A",
        "body": obj({"html": {"type": "string"}, "template_id": INT_ID}), "data": ANY},
    ("GET", "/v1/campaigns/{campaign_id}/variants/{variant_type}/html"): {
        "summary": "A variant's HTML", "envelope": "A", "data": ANY},
    ("GET", "/v1/campaigns/{campaign_id}/variants/{variant_type}/preview"): {
        "summary": "A variant's rendered preview image", "envelope": None,
        "query": {"v": {"type": "string", "maxLength": 64,
                        "description": "The version in `preview_url`: it changes with the content, so a cached "
                                       "image is not shown for new content. Any value answers the current image."}},
        "media": {"image/svg+xml": {"type": "string"}}},
    ("POST", "/v1/campaigns/{campaign_id}/test"): {"summary": "Send a test email of a variant", "envelope": "A",
                                                   "body": obj({"recipient": {"type": "string"},
                                                                "variant_type": enum(campaigns.VARIANT_TYPES)},
                                                               ("recipient", "variant_type")),
                                                   "data": {"type": "string", "description": (
                                                       "A confirmation sentence: `... was sent to ADDRESS.`, or "
                                                       "`... was written to the outbox at PATH: nothing was sent.` "
                                                       "when the workspace's mail transport is the outbox.")}},
    ("GET", "/v1/campaigns/{campaign_id}/statistics"): {"summary": "An email campaign's statistics",
                                                        "envelope": "A",
                                                        "data": obj({"outbox": OUTBOX_DELIVERIES,
                                                                     "estimate": ESTIMATE}, ("outbox", "estimate"))},
    ("GET", "/v1/campaigns/{campaign_id}/timeline"): {
        "summary": "An email campaign's events per hour for 72 hours after the send started, then per day",
        "envelope": "A", "data": timeline_schema(email_timeline.SERIES)},
    ("GET", "/v1/campaigns/{campaign_id}/report"): {"summary": "An email campaign's report as an HTML page",
                                                    "envelope": None, "media": REPORT_PAGE},
    ("POST", "/v1/campaigns/{campaign_id}/schedule"): {"summary": "Schedule an email campaign (NOW or LATER)",
                                                       "envelope": "A", "body": EMAIL_SCHEDULE, "data": ANY},
    ("POST", "/v1/campaigns/{campaign_id}/schedule/preview"): {
        "summary": "Extension: what scheduling with this body would do, without doing it (count per time zone)",
        "envelope": "A", "body": EMAIL_SCHEDULE, "data": SCHEDULE_PREVIEW},
    ("POST", "/v1/campaigns/{campaign_id}/cancel"): {"summary": "Cancel a queued or sending campaign",
                                                     "envelope": "A", "data": ANY},
    ("POST", "/v1/campaigns/{campaign_id}/archive"): {
        "summary": "Archive a SENT or CANCELLED campaign (its statistics stay; then it may be deleted)",
        "envelope": "A", "data": obj({"id": HEX_ID, "status": enum(("ARCHIVED",))}, ("id", "status"))},
    ("DELETE", "/v1/campaigns/{campaign_id}"): {**deleted(HEX_ID, "an email campaign (one that sent messages once "
                                                                   "archived)"), "envelope": "A"},
    ("POST", "/v1/campaigns/{campaign_id}/resume"): {
        "summary": "Resume a paused campaign ({\"force\": true} for one the circuit breaker paused)", "envelope": "A",
        "body": obj({"force": {"type": "boolean", "description": "Resume a campaign the circuit breaker paused; "
                                                                 "its breaker then counts only later answers"}}),
        "body_optional": True, "data": ANY},
    ("POST", "/v1/campaigns/{campaign_id}/unschedule"): {
        "summary": "Return a QUEUED campaign to DRAFT (its queued jobs removed)", "envelope": "A",
        "data": obj({"id": HEX_ID, "status": enum(("DRAFT",))}, ("id", "status"))},
    ("POST", "/v1/campaigns/{campaign_id}/duplicate"): {
        "summary": "Copy a campaign as a new DRAFT named 'Copy of <name>' (statistics not copied)",
        "envelope": "A", "status": 201, "data": CAMPAIGN_WITH_ESTIMATE},
}

"""SMS: campaigns (create, list, read, update, schedule, cancel, archive, reach, statistics,
timeline, report, messages), quotes, replies; and the public paths of the channel, the short links in
sent messages and Twilio's signed webhooks.

The routes of api/sms.py, api/sms_messages.py, api/sms_replies.py, api/sms_links.py and api/twilio.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.audience import AUDIENCE
from marketing_cli.api.schemas.common import (
    ANY,
    EMPTY_OR,
    ESTIMATE,
    HEX_ID,
    NULLABLE_TIMESTAMP,
    REPORT_PAGE,
    SCHEDULE,
    SCHEDULE_PREVIEW,
    TIMESTAMP,
    TRACKING_404,
    array,
    deleted,
    enum,
    lenient_page_query,
    name,
    obj,
    timeline_schema,
)

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    # SMS (public: the short links in sent messages, and Twilio's signed webhooks)
    ("GET", "/s/{token}"): {"summary": "SMS short link: records the click and redirects to the original URL",
                            "errors": TRACKING_404, "envelope": None, "auth": "none", "status": 302, "media": {}},
    ("POST", "/webhooks/twilio/status"): {
        "summary": "Twilio delivery report (form-encoded MessageSid, MessageStatus, AccountSid; X-Twilio-Signature)",
        "envelope": None, "auth": "none", "media": {"text/plain": {"type": "string"}}},
    ("POST", "/webhooks/twilio/inbound"): {
        "summary": "Twilio inbound reply (kept; a revocation or START acted on; form-encoded From, Body, AccountSid; "
                   "X-Twilio-Signature)",
        "envelope": None, "auth": "none", "media": {"text/xml": {"type": "string"}}},
}


def _sms_operations() -> dict[tuple[str, str], dict[str, Any]]:
    try:
        from marketing_cli.services.sms import campaigns as sms
        from marketing_cli.services.sms import replies as sms_replies
        from marketing_cli.services.sms import revocation
        from marketing_cli.services.sms import timeline as sms_timeline
    except ImportError:  # the SMS branch is not merged
        return {}
    quiet_hours = obj({"held": {"type": "integer", "minimum": 0}, "next_release_at": NULLABLE_TIMESTAMP},
                      ("held", "next_release_at"),
                      description="Extension (docs/sms.md \"Quiet hours\"): messages waiting for their recipients' SMS "
                                  "quiet hours to end, and when the first of them may go (UTC).")
    campaign = obj({"id": HEX_ID, "name": {"type": ["string", "null"]}, "message": {"type": ["string", "null"]},
                    "status": enum(sms.STATUSES), "status_detail": {"type": ["string", "null"]},
                    "scheduled_at": NULLABLE_TIMESTAMP, "quiet_hours": quiet_hours,
                    "created_at": TIMESTAMP}, ("id", "status"))
    with_estimate = {**campaign, "properties": {**campaign["properties"], "estimate": ESTIMATE},
                     "required": ["id", "status", "estimate"]}
    message = obj({"id": {"type": "integer"}, "phone": {"type": "string"}, "status": {"type": "string"},
                   "held_until": {**NULLABLE_TIMESTAMP, "description": "Extension: until when SMS quiet hours hold "
                                  "(or held) the message, UTC; kept after it is sent."},
                   "held_reason": {"type": ["string", "null"], "description": "Extension: the quiet-hours rule that "
                                   "held the message, e.g. 'quiet hours: US-FL 08:00-20:00 America/New_York'."}})
    confirmation = obj({"message_id": {"type": "integer"}, "status": {"type": "string"},
                        "handed_at": NULLABLE_TIMESTAMP}, ("message_id", "status"),
                       description="The confirmation text the revocation caused (null: none, as for a number "
                                   "already unsubscribed); status as the SMS message list shows it.")
    reply = obj({"id": {"type": "integer"}, "contact_id": {"type": ["string", "null"]}, "phone": {"type": "string"},
                 "body": {"type": "string"}, "action": enum(revocation.ACTIONS),
                 "rule": {"type": ["string", "null"], "description": "What the rules matched ('keyword:stop', "
                          "'phrase:en:stop texting'), or for `none` a phrase they set aside ('negated:...', "
                          "'question:...') or null."},
                 "contacts_changed": {"type": "integer", "minimum": 0},
                 "confirmation": {"anyOf": [confirmation, {"type": "null"}]}, "received_at": TIMESTAMP},
                ("id", "phone", "body", "action", "rule", "contacts_changed", "confirmation", "received_at"))
    body = obj({"name": name(sms.MAX_NAME),
                "message": {"type": "string", "maxLength": sms.MAX_MESSAGE}, "audience": AUDIENCE})
    return {
        ("POST", "/v1/sms-campaigns"): {"links": [(m, p, {"campaign_id": "id"}) for m, p in (
                                            ("GET", "/v1/sms-campaigns/{campaign_id}"),
                                            ("PATCH", "/v1/sms-campaigns/{campaign_id}"),
                                            ("POST", "/v1/sms-campaigns/{campaign_id}/schedule"),
                                            ("POST", "/v1/sms-campaigns/{campaign_id}/archive"))],
                                        "summary": "Create an SMS campaign (DRAFT)", "envelope": "A", "status": 201,
                                        "body": obj({"name": name(sms.MAX_NAME)}, ("name",)),  # the rest: PATCH
                                        "data": with_estimate},
        ("GET", "/v1/sms-campaigns"): {"summary": "The workspace's SMS campaigns", "envelope": "A",
                                       "query": {**lenient_page_query(sms.DEFAULT_LIMIT, sms.MAX_LIMIT),
                                                 "status": EMPTY_OR(sms.STATUSES)},
                                       "data": obj({"campaigns": array(with_estimate)}, ("campaigns",))},
        ("GET", "/v1/sms-campaigns/{campaign_id}"): {"summary": "An SMS campaign", "envelope": "A",
                                                     "data": with_estimate},
        ("PATCH", "/v1/sms-campaigns/{campaign_id}"): {"summary": "Update a DRAFT SMS campaign", "envelope": "A",
                                                       "body": body, "data": with_estimate},
        ("POST", "/v1/sms-campaigns/{campaign_id}/schedule"): {"summary": "Schedule an SMS campaign",
                                                               "envelope": "A", "body": SCHEDULE, "data": ANY},
        ("POST", "/v1/sms-campaigns/{campaign_id}/schedule/preview"): {
            "summary": "Extension: what scheduling with this body would do, without doing it (count per time zone)",
            "envelope": "A", "body": SCHEDULE, "data": SCHEDULE_PREVIEW},
        ("POST", "/v1/sms-campaigns/{campaign_id}/cancel"): {"summary": "Cancel a queued SMS campaign",
                                                             "envelope": "A", "data": ANY},
        ("DELETE", "/v1/sms-campaigns/{campaign_id}"): {
            **deleted(HEX_ID, "an SMS campaign (a COMPLETED one once archived; the ledger keeps its charges)"),
            "envelope": "A"},
        ("POST", "/v1/sms-campaigns/{campaign_id}/archive"): {"summary": "Archive an SMS campaign",
                                                              "envelope": "A", "data": ANY},
        ("GET", "/v1/sms-campaigns/{campaign_id}/reach"): {
            "summary": "Who the campaign reaches now, and who it skips and why (no phone number, SMS status, "
                       "no published rate)", "envelope": "A",
            "data": obj({"id": HEX_ID, "audience": {"type": "integer"}, "recipients": {"type": "integer"},
                         "skipped": obj({k: {"type": "integer"} for k in (
                             "no_phone_number", "unsubscribed", "cleaned", "blocked", "no_published_rate")}),
                         "skipped_total": {"type": "integer"},
                         "countries_without_rate": array(obj({"country": {"type": ["string", "null"]},
                                                              "count": {"type": "integer"}}))},
                        ("id", "audience", "recipients", "skipped", "skipped_total"))},
        ("POST", "/v1/sms-campaigns/{campaign_id}/unschedule"): {
            "summary": "Return a QUEUED SMS campaign whose expansion has not begun to DRAFT", "envelope": "A",
            "data": with_estimate},
        ("POST", "/v1/sms-campaigns/{campaign_id}/duplicate"): {
            "summary": "Copy an SMS campaign as a new DRAFT named 'Copy of <name>'", "envelope": "A", "status": 201,
            "data": with_estimate},
        ("GET", "/v1/sms-campaigns/{campaign_id}/statistics"): {"summary": "An SMS campaign's statistics",
                                                                "envelope": "A",
                                                                "data": obj({"quiet_hours": quiet_hours,
                                                                             "estimate": ESTIMATE},
                                                                            ("estimate",))},
        ("GET", "/v1/sms-campaigns/{campaign_id}/timeline"): {
            "summary": "An SMS campaign's messages, clicks, STOP replies and cost per hour for 72 hours, then per day",
            "envelope": "A", "data": timeline_schema(sms_timeline.SERIES, ("cost",))},
        ("GET", "/v1/sms-campaigns/{campaign_id}/report"): {"summary": "An SMS campaign's report as an HTML page",
                                                            "envelope": None, "media": REPORT_PAGE},
        ("GET", "/v1/sms-campaigns/{campaign_id}/messages"): {
            "summary": "An SMS campaign's per-recipient messages and their states", "envelope": "A",
            "query": {**lenient_page_query(sms.DEFAULT_LIMIT, sms.MAX_LIMIT), "status": {"type": "string"}},
            "data": obj({"messages": array(message)})},
        ("GET", "/v1/sms-replies"): {
            "summary": "Extension: the SMS replies received, newest first, with what each did (docs/sms.md "
                       "\"Replies and revocation\")", "envelope": "A",
            "query": {**lenient_page_query(sms_replies.DEFAULT_LIMIT, sms_replies.MAX_LIMIT),
                      "action": EMPTY_OR(revocation.ACTIONS)},
            "data": obj({"replies": array(reply), "pagination": obj()}, ("replies", "pagination"))},
        ("POST", "/v1/sms/quote"): {"summary": "The segments and price of an SMS message", "envelope": "A",
                                    "body": obj({"message": {"type": "string", "minLength": 1}, "to": {"type": "string"}},
                                                ("message",)),
                                    "data": ANY},
    }


OPERATIONS.update(_sms_operations())

"""Recurring campaigns (an extension): make a DRAFT campaign recur, preview a rule, list, read,
pause, resume and stop a series (services/email/series.py; docs/api.md "Recurring campaigns").

The routes of api/campaign_series.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import (
    EMPTY_OR,
    HEX_ID,
    INT_ID,
    TIMESTAMP,
    Schema,
    array,
    enum,
    http_url,
    obj,
)
from marketing_cli.kernel import recurrence
from marketing_cli.services.email import series

WHEN: Schema = obj({"at": TIMESTAMP, "local": {"type": "string", "description": "The same instant on the series' "
                                                                                "zone clock, RFC 3339 with offset."}},
                   ("at", "local"))
RRULE: Schema = {"type": "string", "minLength": 1, "maxLength": recurrence.MAX_RULE_LENGTH,
                 "description": "An RFC 5545 RRULE, read in the workspace's time zone "
                                "(FREQ=WEEKLY;BYDAY=MO;BYHOUR=9). UNTIL must be UTC (…Z); no DTSTART."}
OCCURRENCE: Schema = obj({"occurrence_at": TIMESTAMP, "local": {"type": "string"},
                          "status": enum(series.OCCURRENCE_STATUSES),
                          "campaign_id": {"anyOf": [HEX_ID, {"type": "null"}]},
                          "reason": {"type": ["string", "null"]}, "item_count": {"type": ["integer", "null"]},
                          "recorded_at": TIMESTAMP}, ("occurrence_at", "status"))
SERIES: Schema = obj({
    "id": INT_ID, "campaign_id": HEX_ID, "name": {"type": ["string", "null"]}, "rrule": {"type": "string"},
    "timezone": {"type": "string"}, "feed_url": {"type": ["string", "null"]}, "status": enum(series.STATUSES),
    "status_detail": {"type": ["string", "null"]},
    "next_occurrence": {"anyOf": [WHEN, {"type": "null"}]},
    "counts": obj({s: {"type": "integer"} for s in series.OCCURRENCE_STATUSES}),
    "last_occurrence": {"anyOf": [OCCURRENCE, {"type": "null"}]},
    "occurrences": array(OCCURRENCE), "upcoming": array(WHEN),
    "created_at": TIMESTAMP, "updated_at": TIMESTAMP,
}, ("id", "campaign_id", "rrule", "timezone", "status", "counts"))

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/campaigns/{campaign_id}/series"): {
        "links": [(m, p, {"series_id": "id"}) for m, p in (
            ("GET", "/v1/campaign-series/{series_id}"), ("POST", "/v1/campaign-series/{series_id}/pause"),
            ("POST", "/v1/campaign-series/{series_id}/stop"))],
        "summary": "Make a DRAFT campaign recur: a copy is sent at each occurrence of the rule (optionally "
                   "with the new items of an RSS or Atom feed)",
        "envelope": "A", "status": 201,
        "body": obj({"rrule": RRULE, "feed_url": http_url(series.MAX_URL)},
                    ("rrule",)),
        "data": SERIES},
    ("POST", "/v1/campaigns/{campaign_id}/series/preview"): {
        "summary": "The next occurrences of a rule in UTC and in the workspace's zone (nothing is written)",
        "envelope": "A",
        "body": obj({"rrule": RRULE, "count": {"type": "integer", "minimum": 1, "maximum": recurrence.MAX_PREVIEW}},
                    ("rrule",)),
        "data": obj({"rrule": {"type": "string"}, "timezone": {"type": "string"}, "occurrences": array(WHEN)},
                    ("rrule", "timezone", "occurrences"))},
    ("GET", "/v1/campaign-series"): {"summary": "The workspace's recurring series, newest first", "envelope": "A",
                                     "query": {"status": EMPTY_OR(series.STATUSES)},
                                     "data": obj({"series": array(SERIES)}, ("series",))},
    ("GET", "/v1/campaign-series/{series_id}"): {"summary": "A recurring series, its occurrences and the next ones",
                                                 "envelope": "A", "data": SERIES},
    ("POST", "/v1/campaign-series/{series_id}/pause"): {"summary": "Pause a series: no copy until it is resumed",
                                                        "envelope": "A", "data": SERIES},
    ("POST", "/v1/campaign-series/{series_id}/resume"): {
        "summary": "Resume a paused series (occurrences that passed are recorded SKIPPED, not sent)",
        "envelope": "A", "data": SERIES},
    ("POST", "/v1/campaign-series/{series_id}/stop"): {"summary": "Stop a series for good", "envelope": "A",
                                                       "data": SERIES},
}

"""The building blocks every area's declarations are made of.

Scalars and ids as the services read them (a hex or integer id, a timestamp, a name the
services trim), the helpers that spell JSON Schema shortly (`obj`, `array`, `enum`, the query
filters and pages), the path parameters by name, and what both channels share: the body of
their schedule calls, a campaign timeline, the HTML report page, and the page a tracking link
answers for an unknown token.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.kernel import timeline
from marketing_cli.kernel.ids import HEX24_PATTERN, MAX_INT_ID
from marketing_cli.services.email import campaigns

Schema = dict[str, Any]

# --- building blocks -----------------------------------------------------------------------

ANY: Schema = {}
HEX_ID: Schema = {"type": "string", "pattern": f"^{HEX24_PATTERN}$"}
INT_ID: Schema = {"type": "integer", "minimum": 1, "maximum": MAX_INT_ID}
TIMESTAMP: Schema = {"type": "string", "format": "date-time"}
NULLABLE_TIMESTAMP: Schema = {"type": ["string", "null"], "format": "date-time"}
DECIMAL_STRING: Schema = {"type": "string", "pattern": r"^-?\d+(\.\d+)?$"}
# What Python's str.strip() trims, which the services use on names: a character class for
# patterns (JSON Schema's \s is ECMA-262's white space: not the same set, U+001C-U+001F and
# U+0085 are Python's alone).
# Written out (tests/platform/test_api_openapi.py checks it against str.isspace()): finding it
# among all code points would cost every process that imports this module about 70 ms.
_TRIMMED = r"\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# A required name: the services trim it (str.strip()), and blank is refused with the endpoint's
# own message: at least one character that trimming keeps.
NOT_BLANK = f"[^{_TRIMMED}]"


def trimmed_length(low: int, high: int) -> Schema:
    """A string of `low` (at least 2) to `high` characters once the white space at its ends is
    trimmed, as the service counts them (a padded string may be longer than `high`)."""
    return {"type": "string", "minLength": low,
            "pattern": f"^[{_TRIMMED}]*[^{_TRIMMED}][\\s\\S]{{{low - 2},{high - 2}}}[^{_TRIMMED}][{_TRIMMED}]*$"}


def http_url(max_length: int) -> Schema:
    """An http(s) URL, or "" for none, as services/email/template_url.has_http_scheme reads it
    (its scheme in any case, white space at its ends trimmed)."""
    return {"type": ["string", "null"], "maxLength": max_length,
            "pattern": f"^(|[{_TRIMMED}]*[hH][tT][tT][pP][sS]?://[\\s\\S]*)$"}


def name(max_length: int) -> Schema:
    return {"type": "string", "minLength": 1, "maxLength": max_length, "pattern": NOT_BLANK}


def obj(properties: dict[str, Schema] | None = None, required: tuple[str, ...] = (), **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = list(required)
    return {**schema, **extra}


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def enum(values_: tuple[str, ...] | list[str]) -> Schema:
    return {"type": "string", "enum": list(values_)}


def EMPTY_OR(values_: tuple[str, ...]) -> Schema:  # noqa: N802 - reads like enum()
    """A query filter: one of the values, or empty for no filter."""
    return {"type": "string", "enum": ["", *values_]}


def OR_EMPTY(schema: Schema) -> Schema:  # noqa: N802 - reads like EMPTY_OR()
    """A query parameter that may also be sent empty (`?limit=`), which reads as left out."""
    return {"anyOf": [schema, {"type": "string", "maxLength": 0}]}


def deleted(id_schema: Schema, what: str) -> dict[str, Any]:
    """DELETE /v1/<collection>/{id} (CONTRACT section 10): `{"id", "deleted": true}`; a repeated delete or
    another workspace's id is 404 `Not found.`, a resource still in use 409 naming its user."""
    return {"summary": f"Delete {what} (409 while in use: the message names the user and what to do first)",
            "data": obj({"id": id_schema, "deleted": {"const": True}}, ("id", "deleted"))}


def page_query(max_limit: int, max_page: int = 1_000_000_000) -> dict[str, Schema]:
    return {"page": {"type": "integer", "minimum": 1, "maximum": max_page},
            "limit": {"type": "integer", "minimum": 1, "maximum": max_limit}}


def lenient_page_query(default_limit: int, max_limit: int) -> dict[str, Schema]:
    """Campaign lists read page and limit leniently: not an integer -> the default, out of range -> clamped."""
    return {"page": {"type": "string", "description": "Page number from 1 (default 1; anything else reads as 1)."},
            "limit": {"type": "string", "description": f"Per page, 1-{max_limit} (default {default_limit}; "
                                                       "out of range is clamped, not an integer reads as the default)."}}


# Path parameters by name (Starlette's `{name}` or `{name:convertor}`).
PATH_PARAMETERS: dict[str, Schema] = {
    "contact_id": HEX_ID,
    "campaign_id": HEX_ID,
    "field_id": INT_ID,
    "segment_id": INT_ID,
    "tag_id": INT_ID,
    "domain_id": INT_ID,
    "sender_id": INT_ID,
    "series_id": INT_ID,
    "id": INT_ID,
    "automation_id": INT_ID,
    "version": INT_ID,
    "variant_type": enum(campaigns.VARIANT_TYPES),
    "token": {"type": "string", "minLength": 1},
    "link_id": {"type": "string", "minLength": 1},
}

# --- what both channels share ------------------------------------------------------------


def timeline_schema(series: tuple[str, ...], money: tuple[str, ...] = ()) -> Schema:
    """A campaign timeline: buckets of counts (and decimal-string amounts) per hour, then per day."""
    counts = {**{name: {"type": "integer", "minimum": 0} for name in series},
              **{name: DECIMAL_STRING for name in money}}
    bucket = obj({"start": {**TIMESTAMP, "description": "The bucket's start, UTC, on the hour."}, **counts},
                 ("start", *series, *money))
    return obj({
        "campaign_id": HEX_ID, "status": {"type": "string"},
        "started_at": {**NULLABLE_TIMESTAMP, "description": "When the send started; null before (no buckets)."},
        "hours": array(bucket, maxItems=timeline.HOURS, description=(
            f"One bucket per hour from the start hour, the first {timeline.HOURS} hours, through the current hour; "
            "empty hours included.")),
        "days": array(bucket, maxItems=timeline.DAYS, description=(
            f"Then one bucket per 24 hours (at most {timeline.DAYS}), through the current one.")),
        "totals": obj(counts, (*series, *money), description="The sums of the buckets."),
    }, ("campaign_id", "status", "started_at", "hours", "days", "totals"))


REPORT_PAGE: dict[str, Schema] = {"text/html": {"type": "string", "description": (
    "One self-contained HTML page (inline CSS and SVG, no script, nothing fetched): the funnel, the timeline, "
    "top links, providers, devices, countries and variants.")}}


# Tracking links answer a person's browser: an unknown or expired token gets an HTML page.
TRACKING_404: dict[str, Any] = {"404": {"text/html": {"type": "string"}}}
# extension members of both schedule calls (docs/campaigns.md "Local-time delivery")
LOCAL_TIME_MEMBERS: dict[str, Schema] = {
    "local_time": {"type": "string", "pattern": "^([01]?[0-9]|2[0-3]):[0-5][0-9]$",
                   "description": "Extension: deliver when the clock in each recipient's time zone reads this time "
                                  "(HH:MM) on the scheduled date (scheduled_at, else today, in the workspace's zone). "
                                  "Sending starts in the first zone (UTC+14) and moves west."},
    "local_time_missed": {**enum(("next_day", "send_now", "skip")),
                          "description": "Extension: recipients whose local time had already passed get it the "
                                         "next day at that time (next_day, the default), at once (send_now), or "
                                         "not at all (skip)."},
}
LOCAL_TIME_PLAN = obj({"time": {"type": "string"}, "date": {"type": "string", "format": "date"},
                       "missed": enum(("next_day", "send_now", "skip")), "starts_at": TIMESTAMP})
# CONTRACT section 12 (services/estimates; docs/campaigns.md "What will happen: the estimate")
_MONEY_OR_NULL: Schema = {"type": ["string", "null"], "pattern": r"^-?\d+\.\d{2,5}$",
                          "description": "USD as a decimal string (SMS); null for email, which has no price per message."}
ESTIMATE: Schema = obj({
    "recipients": {"type": "integer", "minimum": 0,
                   "description": "Who will get the message: every group but the skipped ones."},
    "cost": _MONEY_OR_NULL,
    "groups": array(obj({
        "state": enum(("now", "waiting", "held", "skipped", "over_cap")),
        "recipients": {"type": "integer", "minimum": 1},
        "until": {**NULLABLE_TIMESTAMP, "description": "When the group goes (UTC): the scheduled instant, the "
                                                       "zone's local time, the end of quiet hours, the cap's next "
                                                       "period; null: now, or never (skipped)."},
        "reason": {"type": ["string", "null"], "description": "Why it waits, is held, skipped or over a cap."},
        "cost": _MONEY_OR_NULL}, ("state", "recipients", "until", "reason", "cost")),
        description="Ordered by when each group goes; skipped last."),
}, ("recipients", "cost", "groups"), description=(
    "Extension: what will happen to the campaign's recipients still to go, per group: now, waiting for their "
    "local time, held by SMS quiet hours, skipped, or over an allowance or a warm-up cap, with the cost. Every "
    "face (preview, schedule, show, watch, stats, lists, the dashboard) reads this one estimate."))
SCHEDULE_PREVIEW = obj({
    "scheduled_at": NULLABLE_TIMESTAMP, "local_time": {**LOCAL_TIME_PLAN, "type": ["object", "null"]},
    "recipients": {"type": "integer"},
    "zones": {"type": ["array", "null"], "items": obj({
        "zone": {"type": "string", "description": "IANA time zone name"}, "recipients": {"type": "integer"},
        "send_at": {**NULLABLE_TIMESTAMP, "description": "When this zone gets it (UTC); null: skipped."}})},
    "estimate": ESTIMATE,
}, ("scheduled_at", "local_time", "recipients", "zones", "estimate"))
# LATER needs its time (the spec's "Scheduled date and time is required when schedule type is 'LATER'.").
LATER_NEEDS_TIME: Schema = {"if": {"properties": {"schedule_type": {"const": "LATER"}}},
                            "then": {"required": ["scheduled_at"], "properties": {"scheduled_at": TIMESTAMP}}}
SCHEDULE = obj({"schedule_type": enum(("NOW", "LATER")), "scheduled_at": TIMESTAMP, **LOCAL_TIME_MEMBERS},
               ("schedule_type",), allOf=[LATER_NEEDS_TIME])

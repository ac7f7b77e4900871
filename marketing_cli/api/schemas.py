"""What each operation of the HTTP face accepts and returns, keyed by (method, path).

The single declaration that api/openapi.py turns into the OpenAPI document: the routes
themselves come from the app (a new route appears in the document by itself, and
tests/platform/test_api_openapi.py fails until it is declared here), and the limits, enums and
names below are the services' own constants, so a change there changes the document.

An operation is a dict:
  summary     one line
  envelope    "A" ({"error": null, "data"}), "B" ({"data"}) or None (not JSON: see `media`)
  status      the success status (200 unless given)
  data        JSON Schema of the envelope's `data` ({} = any JSON value)
  body        JSON Schema of the JSON request body (absent: no body)
  body_media  the body's media types when it is not JSON (contacts import: CSV)
  query       {name: schema} of the query parameters
  query_required  the names of the query parameters that must be sent
  auth        "key" (default), "optional" (a key changes the answer) or "none"
  media       {media type: schema} of a non-JSON success response
  errors      {status: {media type: schema}} of errors that are not the JSON error body
  body_optional  the JSON body may be left out (all its members are optional)
  links       [(method, path, {path parameter: member of the created data})]: what to call next
"""

from __future__ import annotations

from typing import Any

from marketing_cli.kernel import limits, recurrence, timeline
from marketing_cli.kernel.ids import HEX24_PATTERN, MAX_INT_ID
from marketing_cli.services.contacts import audience, batches, events, segment_filters, segments, tags, values
from marketing_cli.services.contacts import records as contacts
from marketing_cli.services.contacts import search as contact_search
from marketing_cli.services.delivery import bounces
from marketing_cli.services.email import campaigns, domains, senders, series, templates
from marketing_cli.services.email import timeline as email_timeline

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


# What services/email/senders._display_name refuses: C0 and C1 controls, DEL, line and paragraph separators.
_NO_CONTROL = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029]"
DISPLAY_NAME_PATTERN = rf"^{_NO_CONTROL}*(?!\s){_NO_CONTROL}{_NO_CONTROL}*$"


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


def page_query(max_limit: int) -> dict[str, Schema]:
    return {"page": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": max_limit}}


def lenient_page_query(default_limit: int, max_limit: int) -> dict[str, Schema]:
    """Campaign lists read page and limit leniently: not an integer -> the default, out of range -> clamped."""
    return {"page": {"type": "string", "description": "Page number from 1 (default 1; anything else reads as 1)."},
            "limit": {"type": "string", "description": f"Per page, 1-{max_limit} (default {default_limit}; "
                                                       "out of range is clamped, not an integer reads as the default)."}}


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


# Path parameters by name (Starlette's `{name}` or `{name:convertor}`).
PATH_PARAMETERS: dict[str, Schema] = {
    "contact_id": HEX_ID,
    "campaign_id": HEX_ID,
    "field_id": INT_ID,
    "segment_id": INT_ID,
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

# --- resources -----------------------------------------------------------------------------

TAG = obj({"id": INT_ID, "name": {"type": "string", "maxLength": tags.MAX_NAME}}, ("id", "name"))
FIELD = obj({
    "id": INT_ID,
    "label": {"type": "string"},
    "merge_tag": {"type": "string"},
    "type": enum(values.FIELD_TYPES),
}, ("id", "label", "merge_tag", "type"))
CONTACT = obj({
    "id": HEX_ID,
    "status": enum(contacts.STATUSES),
    "sms_status": {"type": ["string", "null"]},
    "tags": array(TAG),
    "data": {"type": "object"},
    "created_at": TIMESTAMP,
    "updated_at": TIMESTAMP,
}, ("id", "status"))
# The resolver reads the include list of its type only (include_tag_ids for TAGS,
# include_segment_ids for SEGMENTS; any other is ignored, whatever it holds) and both
# exclude lists always.
IDS: Schema = {"type": ["array", "null"], "items": {"type": "integer"}}
AUDIENCE_ENTRY = {
    **obj({"type": enum(audience.AUDIENCE_TYPES), "include_tag_ids": {}, "include_segment_ids": {},
           "exclude_tag_ids": IDS, "exclude_segment_ids": IDS}, ("type",)),
    "allOf": [
        {"if": {"properties": {"type": {"const": "TAGS"}}},
         "then": {"required": ["include_tag_ids"],
                  "properties": {"include_tag_ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1}}}},
        {"if": {"properties": {"type": {"const": "SEGMENTS"}}},
         "then": {"required": ["include_segment_ids"],
                  "properties": {"include_segment_ids": {"type": "array", "items": {"type": "integer"},
                                                         "minItems": 1}}}},
    ],
}
# An Audience object, or a non-empty list of them (services/contacts/audience.validate_audience).
AUDIENCE = {"anyOf": [AUDIENCE_ENTRY, array(AUDIENCE_ENTRY, minItems=1, maxItems=limits.AUDIENCE_ENTRIES)]}
# Create and update take the same members (spec: "same members as Create Field").
FIELD_BODY = obj({
    "label": {"type": "string"},
    "merge_tag": {"type": "string"},
    "type": enum(values.FIELD_TYPES),
    "definition": {"type": "string", "description": "Comma-separated options (dropdown types)."},
    "default_value": {"type": "string"},
    "required": {"type": "boolean"},
    "default_region": {"type": "string", "description": "ISO 3166-1 alpha-2: the region of phone numbers "
                                                         "written without a leading + (phone_number field)."},
    "immutable": {"type": "boolean", "description": "true is refused: immutable fields are built in."},
}, ("label", "merge_tag", "type"))
TAG_IDS = obj({"tag_ids": array(INT_ID, minItems=1)}, ("tag_ids",))
SEGMENT_FILTER = obj({
    "type": enum(segment_filters.FILTER_TYPES),
    "field_id": INT_ID,
    "operator": enum(sorted({op for ops in segment_filters.FIELD_OPERATORS.values() for op in ops}
                            | set(segment_filters.TAG_OPERATORS) | set(segment_filters.RATE_OPERATORS)
                            | set(segment_filters.ACTIVITY_OPERATORS))),
    "value": ANY,
}, ("type", "operator"), allOf=[{"if": {"properties": {"type": {"const": "field"}}},  # spec: a field filter names its field
                                 "then": {"required": ["field_id"], "properties": {"field_id": INT_ID}}}])
SEGMENT = obj({"id": INT_ID, "name": {"type": "string", "maxLength": 64}, "contact_count": {"type": "integer"},
               "counted_at": {**NULLABLE_TIMESTAMP, "description": "Extension: when contact_count was counted "
                                                                   "(null before the first count)."},
               "counting": {"type": "boolean", "description": "Extension: a recount is queued or running."}},
              ("id", "name"))
SEGMENT_FILTERS = obj({"condition": enum(("AND", "OR")),
                       "filters": array(SEGMENT_FILTER, minItems=1, maxItems=segment_filters.MAX_FILTERS)},
                      ("condition", "filters"))
# Messages written to an outbox folder instead of being sent (they count in `delivered`).
OUTBOX_DELIVERIES: Schema = {
    "type": ["object", "null"], "required": ["delivered", "path"],
    "properties": {"delivered": {"type": "integer", "minimum": 1}, "path": {"type": "string"}},
    "description": "Extension: how many of the delivered messages were written to the server's outbox folder "
                   "(at `path`) rather than sent to their recipients; null when none was."}
CAMPAIGN = obj({"id": HEX_ID, "name": {"type": "string"}, "type": enum(campaigns.TYPES),
                "status": enum(campaigns.STATUSES), "status_detail": {"type": ["string", "null"]},
                "variants": array(obj({"id": HEX_ID, "type": enum(campaigns.VARIANT_TYPES)}, ("id", "type"))),
                "progress": obj({"total": {"type": "integer"}, "sent": {"type": "integer"},
                                 "delivered": {"type": "integer"}, "failed": {"type": "integer"},
                                 "outbox": OUTBOX_DELIVERIES}),
                "created_at": TIMESTAMP, "updated_at": TIMESTAMP}, ("id", "name", "type", "status", "variants"))
# PATCH .../configure answers the configuration view: the campaign without its status.
CAMPAIGN_CONFIGURATION = {**CAMPAIGN, "required": ["id", "name", "type", "variants"]}
DOMAIN = obj({
    "id": INT_ID,
    "domain_name": {"type": "string"},
    "verified": {"type": "boolean"},
    "dns_records": array(obj({"type": {"type": "string"}, "host": {"type": "string"},
                              "value": {"type": "string"}, "mandatory": {"type": "boolean"},
                              "verified": {"type": "boolean"}})),
    # extensions (docs/api.md)
    "verified_by": {"type": ["string", "null"], "enum": ["dns", "operator", None],
                    "description": "What makes the domain verified: its mandatory records found in DNS, or the "
                                   "operator's mark (`mkt domains mark-verified`, CLI only); null when not verified."},
    "reserved_name": {"type": "boolean",
                      "description": "The name is reserved (.test, .example, .invalid, .localhost, example.com ...): "
                                     "no one can publish its DNS records, so mail from it can never be delivered "
                                     "publicly. For staging against a local SMTP catcher."},
}, ("id", "domain_name", "verified", "dns_records", "verified_by", "reserved_name"))
SENDER = obj({"id": INT_ID, "display_name": {"type": "string"}, "local_part": {"type": "string"},
              "domain_name": {"type": "string"}}, ("id", "display_name", "local_part", "domain_name"))
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
SCHEDULE_PREVIEW = obj({
    "scheduled_at": NULLABLE_TIMESTAMP, "local_time": {**LOCAL_TIME_PLAN, "type": ["object", "null"]},
    "recipients": {"type": "integer"},
    "zones": {"type": ["array", "null"], "items": obj({
        "zone": {"type": "string", "description": "IANA time zone name"}, "recipients": {"type": "integer"},
        "send_at": {**NULLABLE_TIMESTAMP, "description": "When this zone gets it (UTC); null: skipped."}})},
}, ("scheduled_at", "local_time", "recipients", "zones"))
# LATER needs its time (the spec's "Scheduled date and time is required when schedule type is 'LATER'.").
LATER_NEEDS_TIME: Schema = {"if": {"properties": {"schedule_type": {"const": "LATER"}}},
                            "then": {"required": ["scheduled_at"], "properties": {"scheduled_at": TIMESTAMP}}}
SCHEDULE = obj({"schedule_type": enum(("NOW", "LATER")), "scheduled_at": TIMESTAMP, **LOCAL_TIME_MEMBERS},
               ("schedule_type",), allOf=[LATER_NEEDS_TIME])
EMAIL_SCHEDULE = obj({**SCHEDULE["properties"],
                      "ab_test": obj({"test_percentage": {"type": "integer", "minimum": 1, "maximum": 100},
                                      "winner_criterion": enum(("OPENS", "CLICKS")),
                                      "wait_minutes": {"type": "integer", "minimum": 0, "maximum": 43200}})},
                     ("schedule_type",), allOf=[LATER_NEEDS_TIME])

# Recurring campaigns (services/email/series.py; docs/api.md "Recurring campaigns").
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

# --- the operations ------------------------------------------------------------------------

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    # workspace, billing, rates, merge tags
    ("GET", "/v1/workspace"): {"summary": "The workspace, its settings and billing", "envelope": "A",
                               "data": obj({"workspace": obj({"id": INT_ID, "name": {"type": "string"},
                                                                "created_at": TIMESTAMP,
                                                                "timezone": {"type": "string", "description": (
                                                                    "Extension: the workspace's time zone (IANA)")}},
                                                               ("id", "name")),
                                            "billing": obj({"resources": array(obj({
                                                "name": {"type": "string"}, "used": {"type": "integer"},
                                                "allowed": {"type": ["integer", "null"]}}))})},
                                           ("workspace", "billing"))},
    ("PATCH", "/v1/workspace"): {"summary": "Update the workspace's name and tracking settings", "envelope": "A",
                                 "body": obj({"name": trimmed_length(2, 50),
                                              "conversion_tracking": {"type": "boolean"},
                                              "interaction_tracking": {"type": ["boolean", "null"]},
                                              "timezone": {"type": ["string", "null"], "description": (
                                                  "Extension: the workspace's time zone, an IANA name (default "
                                                  "UTC): the zone of contacts whose own is unknown, and of the "
                                                  "day a local-time send is read on.")}},
                                             ("name", "conversion_tracking")),
                                 "data": {"type": "object"}},
    ("GET", "/v1/sms-rates"): {"summary": "SMS prices per segment and country (public without a key)",
                               "envelope": "A", "auth": "optional",
                               "data": obj({"currency": {"type": "string"},
                                            "rates": array(obj({"country_code": {"type": "string"},
                                                                "price_per_segment": {"type": ["string", "null"]}}))},
                                           ("rates",))},
    ("GET", "/v1/merge-tags"): {"summary": "Merge tags usable in templates", "envelope": "A",
                               "data": array(obj({"tag": {"type": "string"}, "label": {"type": "string"},
                                                  "category": {"type": "string"}}, ("tag", "label")))},
    # contacts
    ("POST", "/v1/contacts"): {"links": [("GET", "/v1/contacts/{contact_id}", {"contact_id": "id"}),
                                         ("POST", "/v1/contacts/{contact_id}/tags/add", {"contact_id": "id"})],
                               "summary": "Create a contact", "envelope": "B", "status": 201,
                               "body": obj({"status": enum(contacts.STATUSES), "sms_status": enum(contacts.SMS_STATUSES),
                                            "fields": {"type": "object", "required": ["email_address"],
                                                       "properties": {"email_address": {"type": "string",
                                                                                        "pattern": NOT_BLANK}},
                                                       "additionalProperties": True,
                                                       "description": "Values keyed by the workspace's merge tags."},
                                            "tags": array(INT_ID)}, ("fields", "status")),
                               "data": CONTACT},
    ("POST", "/v1/contacts/upsert"): {"links": [("GET", "/v1/contacts/{contact_id}", {"contact_id": "id"})],
                                      "summary": "Create or update a contact by email address or phone number",
                                      "envelope": "B",
                                      "body": obj({"email_address": {"type": "string"}, "phone_number": {"type": "string"},
                                                   "status": enum(contacts.STATUSES),
                                                   "sms_status": enum(contacts.SMS_STATUSES),
                                                   "fields": {"type": "object"}, "tags": array(INT_ID),
                                                   "partial_update": {"type": "boolean"}}),
                                      "data": CONTACT},
    ("POST", "/v1/contacts/search"): {"summary": "Search contacts by field conditions", "envelope": "B",
                                      "body_optional": True,  # absent or null: no conditions
                                      "body": obj(type=["object", "null"], properties={
                                          "status": enum(contact_search.STATUSES),
                                          "limit": {"type": "integer", "minimum": contact_search.MIN_LIMIT,
                                                    "maximum": contact_search.MAX_LIMIT},
                                          "page": {"type": "integer", "minimum": 1,
                                                   "maximum": contact_search.MAX_PAGE},
                                          "sort_by": enum(contact_search.SORT_COLUMNS),
                                          "sort_order": enum(contact_search.SORT_ORDERS),
                                          "fields": {"type": ["array", "null"], "items": obj({
                                              "merge_tag": {"type": "string", "minLength": 1},
                                              "operator": enum(contact_search.OPERATORS),
                                              "value": ANY}, ("merge_tag", "operator"))},
                                          "tags": {"type": ["array", "null"], "items": INT_ID},
                                      }),
                                      "data": ANY},
    ("GET", "/v1/contacts/by-phone"): {"summary": "Find a contact by phone number", "envelope": "B",
                                       "query": {"phone_number": {"type": "string", "pattern": NOT_BLANK}},
                                       "query_required": ("phone_number",),
                                       "data": CONTACT},
    ("POST", "/v1/contacts/import"): {"summary": "Import contacts from a CSV file (the body)", "envelope": "B",
                                      "body_media": ("text/csv",),
                                      "query": {"dry_run": {"type": "boolean"}, "ignore_unknown": {"type": "boolean"},
                                                "tag": array(INT_ID), "status": enum(contacts.STATUSES),
                                                "map": array({"type": "string", "pattern": "^[^=]*\\S[^=]*=.*\\S"}),
                                                "delimiter": enum((",", ";", "\t", "|", "comma", "semicolon", "tab",
                                                                   "pipe")),
                                                "encoding": {"type": "string"}, "date_format": {"type": "string"},
                                                "day_first": {"type": "boolean"},
                                                "batch_size": {"type": "integer", "minimum": 1,
                                                               "maximum": batches.MAX_BATCH_SIZE}},
                                      "data": ANY},
    ("GET", "/v1/contacts/export"): {"summary": "Export contacts as CSV or JSON lines (streamed)", "envelope": None,
                                     "query": {"format": enum(("csv", "jsonl")), "fields": {"type": "string"}},
                                     "media": {"text/csv": {"type": "string"}, "application/x-ndjson": {"type": "string"}}},
    ("GET", "/v1/contacts/{contact_id}"): {"summary": "A contact", "envelope": "B", "data": CONTACT},
    ("POST", "/v1/contacts/{contact_id}/tags/add"): {"summary": "Add tags to a contact", "envelope": "B",
                                                     "body": TAG_IDS, "data": ANY},
    ("POST", "/v1/contacts/{contact_id}/tags/remove"): {"summary": "Remove tags from a contact", "envelope": "B",
                                                        "body": TAG_IDS, "data": ANY},
    # fields, tags
    ("GET", "/v1/fields"): {"summary": "The workspace's contact fields", "envelope": "B", "data": array(FIELD)},
    ("POST", "/v1/fields"): {"links": [("PATCH", "/v1/fields/{field_id}", {"field_id": "id"})],
                             "summary": "Create a custom field", "envelope": "B", "status": 201,
                             "body": FIELD_BODY, "data": FIELD},
    ("PATCH", "/v1/fields/{field_id}"): {"summary": "Update a custom field (its type cannot change)", "envelope": "B",
                                         "body": FIELD_BODY, "data": FIELD},
    ("GET", "/v1/tags"): {"summary": "The workspace's tags", "envelope": "B", "data": array(TAG)},
    ("POST", "/v1/tags"): {"summary": "Create a tag", "envelope": "B", "status": 201,
                           "body": obj({"name": name(tags.MAX_NAME)}, ("name",)),
                           "data": TAG},
    # events
    ("POST", "/v1/events"): {"summary": "Track a custom event for a contact", "envelope": "B",
                             "body": obj({"event_name": {"type": "string"}, "email_address": {"type": "string"},
                                          "phone_number": {"type": "string"},
                                          "properties": {"type": "object", "maxProperties": events.MAX_KEYS}}),
                             "data": ANY},
    ("GET", "/v1/events"): {"summary": "The automation event log", "envelope": "B",
                            "query": {"limit": OR_EMPTY({"type": "integer", "minimum": 1, "maximum": events.MAX_LOG_LIMIT}),
                                      "after_id": OR_EMPTY({"type": "integer", "minimum": 0}),
                                      "type": {"type": "string", "enum": ["", *events.EVENT_TYPES]},
                                      "contact_id": {"type": "string", "pattern": f"^({HEX24_PATTERN})?$"}},
                            "data": ANY},
    # segments, audience
    ("POST", "/v1/segments"): {"links": [("GET", "/v1/segments/{segment_id}", {"segment_id": "id"}),
                                         ("GET", "/v1/segments/{segment_id}/members", {"segment_id": "id"})],
                               "summary": "Create a segment", "envelope": "B", "status": 201,
                               "body": obj({"name": name(64), "filters": SEGMENT_FILTERS}, ("name", "filters")),
                               "data": SEGMENT},
    ("GET", "/v1/segments"): {"summary": "The workspace's segments", "envelope": "B", "data": array(SEGMENT)},
    ("GET", "/v1/segments/{segment_id}"): {"summary": "A segment", "envelope": "B", "data": SEGMENT},
    ("GET", "/v1/segments/{segment_id}/members"): {"summary": "A segment's members", "envelope": "B",
                                                   "query": page_query(segments.MAX_PAGE_SIZE), "data": ANY},
    ("POST", "/v1/segments/{segment_id}/refresh"): {"summary": "Recount a segment's members", "envelope": "B",
                                                    "status": 202, "data": ANY},
    ("POST", "/v1/audience/count"): {"summary": "How many contacts an audience reaches on a channel",
                                     "envelope": "B",
                                     "body": obj({"audience": AUDIENCE, "channel": enum(audience.CHANNELS)},
                                                 ("audience",)),
                                     "data": ANY},
    # email campaigns
    ("POST", "/v1/campaigns"): {"links": [(m, p, {"campaign_id": "id"}) for m, p in (
                                    ("GET", "/v1/campaigns/{campaign_id}"),
                                    ("PATCH", "/v1/campaigns/{campaign_id}/configure"),
                                    ("GET", "/v1/campaigns/{campaign_id}/statistics"),
                                    ("POST", "/v1/campaigns/{campaign_id}/schedule"))],
                                "summary": "Create an email campaign (DRAFT)", "envelope": "A", "status": 201,
                                "body": obj({"name": name(255), "type": enum(campaigns.TYPES)}, ("name",)),
                                "data": CAMPAIGN},
    ("GET", "/v1/campaigns"): {"summary": "The workspace's email campaigns", "envelope": "A",
                               "query": {**lenient_page_query(campaigns.DEFAULT_LIMIT, campaigns.MAX_LIMIT),
                                         "status": EMPTY_OR(campaigns.STATUSES)},
                               "data": ANY},
    ("GET", "/v1/campaigns/{campaign_id}"): {"summary": "An email campaign", "envelope": "A", "data": CAMPAIGN},
    ("PATCH", "/v1/campaigns/{campaign_id}/configure"): {
        "summary": "Configure a DRAFT campaign: sender, audience, variants", "envelope": "A",
        "body": obj({"sender": obj({"sender_identity_id": INT_ID, "reply_to": obj({
                         "display_name": {"type": "string"}, "local_part": {"type": "string"},
                         "domain_name": {"type": "string"}})}, required=("sender_identity_id",)), "audience": AUDIENCE,
                     "variants": array(obj({"type": enum(campaigns.VARIANT_TYPES),
                                            "subject": {"type": "string", "minLength": 3, "maxLength": 90},
                                            "preview_text": {"type": "string", "maxLength": 120}}))}),
        "data": CAMPAIGN_CONFIGURATION},
    ("POST", "/v1/campaigns/{campaign_id}/variants/{variant_type}/html"): {
        "summary": "Set a variant's HTML (or take a template's)", "envelope": "A",
        "body": obj({"html": {"type": "string"}, "template_id": INT_ID}), "data": ANY},
    ("GET", "/v1/campaigns/{campaign_id}/variants/{variant_type}/html"): {
        "summary": "A variant's HTML", "envelope": "A", "data": ANY},
    ("GET", "/v1/campaigns/{campaign_id}/variants/{variant_type}/preview"): {
        "summary": "A variant's rendered preview image", "envelope": None,
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
                                                        "data": obj({"outbox": OUTBOX_DELIVERIES}, ("outbox",))},
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
    ("POST", "/v1/campaigns/{campaign_id}/resume"): {"summary": "Resume a paused campaign", "envelope": "A",
                                                     "data": ANY},
    ("POST", "/v1/campaigns/{campaign_id}/unschedule"): {
        "summary": "Return a QUEUED campaign to DRAFT (its queued jobs removed)", "envelope": "A",
        "data": obj({"id": HEX_ID, "status": enum(("DRAFT",))}, ("id", "status"))},
    ("POST", "/v1/campaigns/{campaign_id}/duplicate"): {
        "summary": "Copy a campaign as a new DRAFT named 'Copy of <name>' (statistics not copied)",
        "envelope": "A", "status": 201, "data": CAMPAIGN},
    # recurring campaigns (extension)
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
    # bounces, templates
    ("POST", "/v1/bounces"): {"summary": "Record a bounce or a complaint", "envelope": "A", "status": 201,
                              "body": obj({"email_address": {"type": "string", "pattern": NOT_BLANK},
                                           "type": enum(bounces.TYPES), "campaign_id": HEX_ID},
                                          ("email_address", "type")),
                              "data": ANY},
    ("POST", "/v1/templates"): {"links": [("GET", "/v1/templates/{id}", {"id": "id"})],
                                "summary": "Import a template (HTML, ZIP, URL or editor JSON)", "envelope": "A",
                                "status": 201,
                                "body": obj({"name": name(templates.MAX_NAME),
                                             "type": enum(("editor", "code")),
                                             "import_format": enum(templates.FORMATS),
                                             "content_base64": {"type": "string"}, "url": {"type": "string"},
                                             "body_json": {"type": "object"}}, ("name", "type")),
                                "data": ANY},
    ("GET", "/v1/templates"): {"summary": "The workspace's templates", "envelope": "A", "data": {"type": "array"}},
    ("GET", "/v1/templates/{id}"): {"summary": "A template", "envelope": "A", "data": {"type": "object"}},
    ("GET", "/v1/templates/{id}/assets/{path}"): {
        "summary": "A file stored with a ZIP template (its bytes, with the type its name implies)", "envelope": None,
        "media": {"application/octet-stream": {"type": "string", "format": "binary"}}},
    # sending domains and sender identities
    ("GET", "/v1/domains"): {"summary": "The workspace's sending domains", "envelope": "A", "data": array(DOMAIN)},
    ("POST", "/v1/domains"): {"links": [("GET", "/v1/domains/{domain_id}", {"domain_id": "id"})],
                              "summary": "Add a sending domain", "envelope": "A", "status": 201,
                              "body": obj({name: {"type": "string", "minLength": 1, "maxLength": domains.MAX_NAME,
                                                  **({} if name == "domain_name" else {"description": "Same as domain_name."})}
                                           for name in domains.NAME_MEMBERS}),
                              "data": DOMAIN},
    ("GET", "/v1/domains/{domain_id}"): {"summary": "A sending domain", "envelope": "A", "data": DOMAIN},
    ("POST", "/v1/domains/{domain_id}/verify"): {"summary": "Check a domain's DNS records", "envelope": "A",
                                                 "data": DOMAIN},
    ("GET", "/v1/sender-identities"): {"summary": "The workspace's sender identities", "envelope": "A",
                                       "data": array(SENDER)},
    ("POST", "/v1/sender-identities"): {"links": [("GET", "/v1/sender-identities/{sender_id}", {"sender_id": "id"})],
                                        "summary": "Add a sender identity", "envelope": "A", "status": 201,
                                        "body": obj({"domain_id": INT_ID,
                                                     "local_part": {"type": "string", "maxLength": senders.MAX_LOCAL_PART},
                                                     "display_name": {**name(senders.MAX_DISPLAY_NAME),
                                                                      "pattern": DISPLAY_NAME_PATTERN}},
                                                    ("domain_id", "local_part", "display_name")),
                                        "data": SENDER},
    ("GET", "/v1/sender-identities/{sender_id}"): {"summary": "A sender identity", "envelope": "A", "data": SENDER},
    # the API's own description
    ("GET", "/v1/openapi.json"): {"summary": "This document", "envelope": None, "auth": "none",
                                  "media": {"application/json": {"type": "object"}}},
    ("GET", "/docs"): {"summary": "This document, rendered for people (Redoc)", "envelope": None, "auth": "none",
                       "media": {"text/html": {"type": "string"}}},
    ("GET", "/docs/redoc.standalone.js"): {"summary": "The renderer of /docs (Redoc, MIT licence)", "envelope": None,
                                           "auth": "none", "media": {"text/javascript": {"type": "string"}}},
    # tracking (public: the links in sent email)
    ("GET", "/t/o/{token}"): {"summary": "Open pixel (a 1x1 GIF)",
                              "errors": TRACKING_404, "envelope": None, "auth": "none",
                              "media": {"image/gif": {"type": "string", "format": "binary"}}},
    ("GET", "/t/c/{token}/{link_id}"): {"summary": "Click: records it and redirects to the link",
                                        "errors": TRACKING_404, "envelope": None,
                                        "auth": "none", "status": 302, "media": {}},
    ("GET", "/t/u/{token}"): {"summary": "Unsubscribe page",
                              "errors": TRACKING_404, "envelope": None, "auth": "none",
                              "media": {"text/html": {"type": "string"}}},
    ("POST", "/t/u/{token}"): {"summary": "Unsubscribe (RFC 8058 one-click, or the page's form)",
                               "errors": TRACKING_404, "envelope": None,
                               "auth": "none", "media": {"text/html": {"type": "string"}}},
    ("GET", "/t/v/{token}"): {"summary": "View online: the message (or test email) as its recipient got it, "
                                         "tracked links and open pixel included; 410 when its contact was deleted",
                              "errors": {**TRACKING_404, "410": {"text/html": {"type": "string"}}}, "envelope": None, "auth": "none",
                              "media": {"text/html": {"type": "string"}}},
    ("GET", "/t/confirm/{token}"): {"summary": "Double opt-in confirmation page (a button that POSTs back)",
                                    "errors": TRACKING_404, "envelope": None, "auth": "none",
                                    "media": {"text/html": {"type": "string"}}},
    ("POST", "/t/confirm/{token}"): {"summary": "Confirm a subscription: UNCONFIRMED -> SUBSCRIBED",
                                     "errors": TRACKING_404, "envelope": None, "auth": "none",
                                     "media": {"text/html": {"type": "string"}}},
    # SMS (public: the short links in sent messages, and Twilio's signed webhooks)
    ("GET", "/s/{token}"): {"summary": "SMS short link: records the click and redirects to the original URL",
                            "errors": TRACKING_404, "envelope": None, "auth": "none", "status": 302, "media": {}},
    ("POST", "/webhooks/twilio/status"): {
        "summary": "Twilio delivery report (form-encoded MessageSid, MessageStatus, AccountSid; X-Twilio-Signature)",
        "envelope": None, "auth": "none", "media": {"text/plain": {"type": "string"}}},
    ("POST", "/webhooks/twilio/inbound"): {
        "summary": "Twilio inbound reply (STOP / START words; form-encoded From, Body, AccountSid; X-Twilio-Signature)",
        "envelope": None, "auth": "none", "media": {"text/xml": {"type": "string"}}},
}


def _sms_operations() -> dict[tuple[str, str], dict[str, Any]]:
    try:
        from marketing_cli.services.sms import campaigns as sms
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
    message = obj({"id": {"type": "integer"}, "phone": {"type": "string"}, "status": {"type": "string"},
                   "held_until": {**NULLABLE_TIMESTAMP, "description": "Extension: until when SMS quiet hours hold "
                                  "(or held) the message, UTC; kept after it is sent."},
                   "held_reason": {"type": ["string", "null"], "description": "Extension: the quiet-hours rule that "
                                   "held the message, e.g. 'quiet hours: US-FL 08:00-20:00 America/New_York'."}})
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
                                        "data": campaign},
        ("GET", "/v1/sms-campaigns"): {"summary": "The workspace's SMS campaigns", "envelope": "A",
                                       "query": {**lenient_page_query(sms.DEFAULT_LIMIT, sms.MAX_LIMIT),
                                                 "status": EMPTY_OR(sms.STATUSES)},
                                       "data": ANY},
        ("GET", "/v1/sms-campaigns/{campaign_id}"): {"summary": "An SMS campaign", "envelope": "A", "data": campaign},
        ("PATCH", "/v1/sms-campaigns/{campaign_id}"): {"summary": "Update a DRAFT SMS campaign", "envelope": "A",
                                                       "body": body, "data": campaign},
        ("POST", "/v1/sms-campaigns/{campaign_id}/schedule"): {"summary": "Schedule an SMS campaign",
                                                               "envelope": "A", "body": SCHEDULE, "data": ANY},
        ("POST", "/v1/sms-campaigns/{campaign_id}/schedule/preview"): {
            "summary": "Extension: what scheduling with this body would do, without doing it (count per time zone)",
            "envelope": "A", "body": SCHEDULE, "data": SCHEDULE_PREVIEW},
        ("POST", "/v1/sms-campaigns/{campaign_id}/cancel"): {"summary": "Cancel a queued SMS campaign",
                                                             "envelope": "A", "data": ANY},
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
            "data": campaign},
        ("POST", "/v1/sms-campaigns/{campaign_id}/duplicate"): {
            "summary": "Copy an SMS campaign as a new DRAFT named 'Copy of <name>'", "envelope": "A", "status": 201,
            "data": campaign},
        ("GET", "/v1/sms-campaigns/{campaign_id}/statistics"): {"summary": "An SMS campaign's statistics",
                                                                "envelope": "A",
                                                                "data": obj({"quiet_hours": quiet_hours})},
        ("GET", "/v1/sms-campaigns/{campaign_id}/timeline"): {
            "summary": "An SMS campaign's messages, clicks, STOP replies and cost per hour for 72 hours, then per day",
            "envelope": "A", "data": timeline_schema(sms_timeline.SERIES, ("cost",))},
        ("GET", "/v1/sms-campaigns/{campaign_id}/report"): {"summary": "An SMS campaign's report as an HTML page",
                                                            "envelope": None, "media": REPORT_PAGE},
        ("GET", "/v1/sms-campaigns/{campaign_id}/messages"): {
            "summary": "An SMS campaign's per-recipient messages and their states", "envelope": "A",
            "query": {**lenient_page_query(sms.DEFAULT_LIMIT, sms.MAX_LIMIT), "status": {"type": "string"}},
            "data": obj({"messages": array(message)})},
        ("POST", "/v1/sms/quote"): {"summary": "The segments and price of an SMS message", "envelope": "A",
                                    "body": obj({"message": {"type": "string", "minLength": 1}, "to": {"type": "string"}},
                                                ("message",)),
                                    "data": ANY},
    }


OPERATIONS.update(_sms_operations())


def _automation_operations() -> dict[tuple[str, str], dict[str, Any]]:
    from marketing_cli.services.automations import flows, simulate
    from marketing_cli.services.automations.format import flow_schema

    flow = {k: v for k, v in flow_schema().items() if not k.startswith("$")}
    summary = obj({"id": INT_ID, "name": {"type": "string"}, "status": enum(flows.STATUSES),
                   "current_version": {"type": ["integer", "null"]}, "reentry": {"type": "string"},
                   "triggers": array({"type": "string"}), "created_at": TIMESTAMP, "updated_at": TIMESTAMP},
                  ("id", "name", "status", "current_version"))
    automation = {**summary, "properties": {**summary["properties"], "flow": {"type": "object"},
                                            "versions": array(ANY), "enrollments": {"type": "object"},
                                            "webhook_secret": {"type": "string"}}}
    enrollment = obj({"id": INT_ID, "automation_id": INT_ID, "version": INT_ID, "contact_id": HEX_ID,
                      "status": enum(("active", "paused", "completed", "exited")),
                      "step_id": {"type": ["string", "null"]}, "next_run_at": NULLABLE_TIMESTAMP,
                      "waiting_for_event": {"type": "boolean"}, "exit_reason": {"type": ["string", "null"]},
                      "goal_reached_at": NULLABLE_TIMESTAMP, "entered_at": TIMESTAMP},
                     ("id", "automation_id", "version", "contact_id", "status"))
    one = "/v1/automations/{automation_id}"

    def action(summary_: str) -> dict[str, Any]:
        return {"summary": summary_, "envelope": "A", "data": automation}

    return {
        ("POST", "/v1/automations"): {"links": [("GET", one, {"automation_id": "id"}),
                                                ("POST", one + "/publish", {"automation_id": "id"})],
                                      "summary": "Create an automation (a DRAFT flow; docs/automations.md)",
                                      "envelope": "A", "status": 201, "body": flow, "data": automation},
        ("GET", "/v1/automations"): {"summary": "The workspace's automations", "envelope": "A",
                                     "query": {"status": EMPTY_OR(flows.STATUSES)}, "data": array(summary)},
        ("GET", "/v1/automations/schema"): {"summary": "The JSON Schema of the flow document", "envelope": "A",
                                            "data": {"type": "object"}},
        ("GET", one): {"summary": "An automation: its draft, versions and enrollment counts", "envelope": "A",
                       "data": automation},
        ("PUT", one): {"summary": "Replace an automation's draft (publish to make it live)", "envelope": "A",
                       "body": flow, "data": automation},
        ("POST", one + "/publish"): action("Validate the draft and publish it as the next version"),
        ("POST", one + "/pause"): action("Pause: no new entries, every contact held where it is"),
        ("POST", one + "/resume"): action("Resume a paused automation"),
        ("POST", one + "/archive"): action("Archive: final; contacts still in it exit"),
        ("GET", one + "/versions/{version}"): {"summary": "A published version (references resolved)",
                                               "envelope": "A", "data": ANY},
        ("POST", one + "/enrollments"): {"summary": "Add a contact by hand (the flow needs a manual trigger)",
                                         "envelope": "A", "status": 201,
                                         "body": obj({"contact_id": HEX_ID,
                                                      "entry_key": {"type": "string", "minLength": 1,
                                                                    "maxLength": 200}}, ("contact_id",)),
                                         "data": enrollment},
        ("GET", one + "/enrollments"): {"summary": "The automation's enrollments, newest first", "envelope": "A",
                                        "query": {"status": EMPTY_OR(("active", "paused", "completed", "exited"))},
                                        "data": array(enrollment)},
        ("POST", one + "/backfill"): {"summary": "Enroll existing contacts (all, or a segment's); dry_run counts",
                                      "envelope": "A", "body_optional": True,
                                      "body": obj({"segment_id": INT_ID, "dry_run": {"type": "boolean"}}),
                                      "data": ANY},
        ("GET", one + "/statistics"): {"summary": "Statistics per version and step", "envelope": "A", "data": ANY},
        ("POST", one + "/migrate"): {"summary": "Move in-flight contacts to a version (dry_run: only the report)",
                                     "envelope": "A",
                                     "body": obj({"to_version": {"type": "integer", "minimum": 1},
                                                  "map": {"type": "object", "additionalProperties": {"type": "string"}},
                                                  "dry_run": {"type": "boolean"}, "unmapped": enum(("stay", "exit"))},
                                                 ("to_version",)),
                                     "data": ANY},
        ("POST", one + "/simulate"): {
            "summary": "Walk the flow for one contact on a simulated clock (sends and writes nothing)",
            "envelope": "A",
            "body": obj({"contact_id": HEX_ID, "until": {"type": "string"}, "events": array(obj({
                "name": {"type": "string"}, "type": enum(simulate.EVENT_TYPES), "properties": {"type": "object"},
                "at": {"type": "string"}, "tag": {"type": "string"}, "field": {"type": "string"},
                "from": ANY, "to": ANY, "step": {"type": "string"}}, ("at",)), maxItems=1000)},
                ("contact_id",)),
            "data": ANY},
        ("POST", one + "/test"): {"summary": "Send each message of the flow once to a test address",
                                  "envelope": "A",
                                  "body": obj({"to": {"type": "string", "minLength": 1}, "sms_to": {"type": "string"},
                                               "contact_id": HEX_ID}, ("to",)),
                                  "data": ANY},
    }


OPERATIONS.update(_automation_operations())


def _automation_caps_operations() -> dict[tuple[str, str], dict[str, Any]]:
    """GET/PUT /v1/automations/caps: the workspace's frequency caps (services/automations/caps.py)."""
    duration = {"type": "object", "minProperties": 1, "additionalProperties": False,
                "properties": {unit: {"type": "integer", "minimum": 0}
                               for unit in ("days", "hours", "minutes", "seconds")}}
    cap_in = {"type": ["object", "null"], "additionalProperties": False, "required": ["max_messages", "window"],
              "properties": {"max_messages": {"type": "integer", "minimum": 1, "maximum": 1000}, "window": duration}}
    cap_out = {"type": ["object", "null"], "required": ["max_messages", "window", "window_seconds"],
               "properties": {"max_messages": {"type": "integer"}, "window": duration,
                              "window_seconds": {"type": "integer"}}}
    data = obj({"email": cap_out, "sms": cap_out}, ("email", "sms"))
    return {
        ("GET", "/v1/automations/caps"): {"summary": "Frequency caps of automated messages, per channel",
                                          "envelope": "A", "data": data},
        ("PUT", "/v1/automations/caps"): {"summary": "Set or remove (null) a channel's frequency cap",
                                          "envelope": "A", "body": {**obj({"email": cap_in, "sms": cap_in}),
                                                                    "minProperties": 1},
                                          "data": data},
    }


OPERATIONS.update(_automation_caps_operations())


def is_alias(path: str) -> bool:
    """Routes that repeat a documented operation and are left out of the document.

    `/v1/sms-campaigns//schedule` (an empty id, answered "Please provide a campaign ID.") and
    the tracking paths under any prefix (`/{prefix:path}/t/...`, for a tracking domain that
    proxies a folder) are the same operations as their plain forms.
    """
    return "//" in path or path.startswith("/{prefix:path}/")

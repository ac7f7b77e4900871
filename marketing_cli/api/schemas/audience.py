"""Who is reached: segments (their filters, members and counts) and the Audience object that
both channels' campaigns send to (services/contacts/audience.py).

The routes of api/segments.py and api/audience.py; AUDIENCE is also the member of a campaign's
configuration (campaigns.py, sms.py).
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import (
    ANY,
    INT_ID,
    NULLABLE_TIMESTAMP,
    Schema,
    array,
    deleted,
    enum,
    name,
    obj,
    page_query,
)
from marketing_cli.kernel import limits
from marketing_cli.services.contacts import audience, segment_filters, segments

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

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/segments"): {"links": [("GET", "/v1/segments/{segment_id}", {"segment_id": "id"}),
                                         ("GET", "/v1/segments/{segment_id}/members", {"segment_id": "id"})],
                               "summary": "Create a segment", "envelope": "B", "status": 201,
                               "body": obj({"name": name(64), "filters": SEGMENT_FILTERS}, ("name", "filters")),
                               "data": SEGMENT},
    ("GET", "/v1/segments"): {"summary": "The workspace's segments", "envelope": "B", "data": array(SEGMENT)},
    ("GET", "/v1/segments/{segment_id}"): {"summary": "A segment", "envelope": "B", "data": SEGMENT},
    ("PATCH", "/v1/segments/{segment_id}"): {"summary": "Rename a segment or change its filters (checked as on "
                                                        "create; new filters queue a recount)", "envelope": "B",
                                             "body": obj({"name": name(64), "filters": SEGMENT_FILTERS}),
                                             "data": SEGMENT},
    ("DELETE", "/v1/segments/{segment_id}"): {**deleted(INT_ID, "a segment"), "envelope": "B"},
    ("GET", "/v1/segments/{segment_id}/members"): {"summary": "A segment's members", "envelope": "B",
                                                   "query": page_query(segments.MAX_PAGE_SIZE, segments.MAX_PAGE), "data": ANY},
    ("POST", "/v1/segments/{segment_id}/refresh"): {"summary": "Recount a segment's members", "envelope": "B",
                                                    "status": 202, "data": ANY},
    ("POST", "/v1/audience/count"): {"summary": "How many contacts an audience reaches on a channel",
                                     "envelope": "B",
                                     "body": obj({"audience": AUDIENCE, "channel": enum(audience.CHANNELS)},
                                                 ("audience",)),
                                     "data": ANY},
}

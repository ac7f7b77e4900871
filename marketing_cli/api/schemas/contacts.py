"""Contacts and what they hold: create, upsert, search, read, import and export contacts, their
tags; the workspace's fields and tags; the custom events tracked for contacts.

The routes of api/contacts.py (the search, import and export handlers are in
api/contact_search.py and api/contacts_io.py), api/fields.py, api/tags.py, api/events.py
and api/consents.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import (
    ANY,
    HEX_ID,
    INT_ID,
    NOT_BLANK,
    OR_EMPTY,
    TIMESTAMP,
    array,
    deleted,
    enum,
    name,
    obj,
)
from marketing_cli.kernel import limits
from marketing_cli.kernel.ids import HEX24_PATTERN
from marketing_cli.services.contacts import batches, consent_export, consents, events, rows, tags, values
from marketing_cli.services.contacts import records as contacts
from marketing_cli.services.contacts import search as contact_search

# A row id to page after: 0 or more, and below 2**63 as the services check (every id fits 64 bits).
AFTER_ID = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}


def _event_properties(level: int = 1) -> dict[str, Any]:
    """Part 8 of the specification (services/contacts/events.check_properties) as a schema: at
    most 50 keys an object, a key of at most 128 characters that neither starts with $ nor holds
    a dot, objects and arrays nested at most 5 levels (the top object is level 1). The 16 KB of
    serialized JSON is the one rule no schema can count."""
    def item(at: int) -> dict[str, Any]:
        scalar = {"type": ["string", "number", "boolean", "null"]}
        if at == events.MAX_DEPTH:
            return scalar
        return {"anyOf": [scalar, _event_properties(at + 1), {"type": "array", "items": item(at + 1)}]}

    return {"type": "object", "maxProperties": events.MAX_KEYS, "additionalProperties": item(level),
            "propertyNames": {"maxLength": events.MAX_KEY_LENGTH, "pattern": r"^([^$.][^.]*)?$"}}


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
CONSENT_TEXT = {"type": "string", "maxLength": limits.CONSENT_TEXT,
                "description": "Extension: the wording the person agreed to, kept in the consent ledger as written "
                               "for each consent this call changes (GET /v1/contacts/{contact_id}/consents)."}
_NULLABLE_TEXT = {"type": ["string", "null"]}
CONSENT_ROW = {
    "id": {"type": "integer", "minimum": 1}, "contact_id": HEX_ID, "channel": enum(consents.CHANNELS),
    "consent": enum(consents.CONSENTS), "status": {"type": "string", "description": "The status the change left."},
    "source": enum(consents.SOURCES), "consent_text": _NULLABLE_TEXT,
    "file_name": _NULLABLE_TEXT, "line": {"type": ["integer", "null"]}, "message_text": _NULLABLE_TEXT,
    "campaign_id": _NULLABLE_TEXT, "ip": _NULLABLE_TEXT, "user_agent": _NULLABLE_TEXT, "created_at": TIMESTAMP}
CONSENT = obj(CONSENT_ROW, consent_export.ROW_COLUMNS)
CONSENT_EXPORT = obj({**CONSENT_ROW, "email_address": _NULLABLE_TEXT, "phone_number": _NULLABLE_TEXT},
                     consent_export.EXPORT_COLUMNS)
CONSENT_PAGE = {"limit": OR_EMPTY({"type": "integer", "minimum": 1, "maximum": consent_export.MAX_LIMIT}),
                "after_id": OR_EMPTY(AFTER_ID)}
_SEARCH_FIELDS = {"type": ["array", "null"], "items": obj({
    "merge_tag": {"type": "string", "minLength": 1},
    "operator": enum(contact_search.OPERATORS),
    "value": ANY}, ("merge_tag", "operator"))}
_COUNT = {"type": "integer", "minimum": 0}
# POST /v1/tags/{tag_id}/contacts and .../remove: exactly one selector (the service says so when not).
TAG_SELECTION = obj({
    "search": obj(type=["object", "null"], properties={
        "fields": _SEARCH_FIELDS, "tags": {"type": ["array", "null"], "items": INT_ID},
        "status": enum(contact_search.STATUSES)},
        description="The contacts a search with these filters finds (all of them, not a page); {} selects every"
                    " contact."),
    "segment_id": {**INT_ID, "description": "The members of this segment now."},
    "emails": array({"type": "string"}, minItems=1, maxItems=limits.TAG_LIST,
                    description="Email addresses; those of no contact are counted in not_found."),
    "contact_ids": array(HEX_ID, minItems=1, maxItems=limits.TAG_LIST,
                         description="Contact ids; those of no contact are counted in not_found."),
})


def _tagging_result(done: str, kept: str) -> dict[str, Any]:
    return obj({"tag_id": INT_ID, "selected": _COUNT, done: _COUNT, kept: _COUNT, "not_found": _COUNT,
                "enrolled": _COUNT}, ("tag_id", "selected", done, kept, "not_found", "enrolled"))


_MOMENT = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}],
           "description": "A date (YYYY-MM-DD, midnight UTC) or an RFC 3339 timestamp."}

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
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
                                            "tags": array(INT_ID), "consent_text": CONSENT_TEXT}, ("fields", "status")),
                               "data": CONTACT},
    ("POST", "/v1/contacts/upsert"): {"links": [("GET", "/v1/contacts/{contact_id}", {"contact_id": "id"})],
                                      "summary": "Create or update a contact by email address or phone number",
                                      "envelope": "B",
                                      "body": obj({"email_address": {"type": "string"}, "phone_number": {"type": "string"},
                                                   "status": enum(contacts.STATUSES),
                                                   "sms_status": enum(contacts.SMS_STATUSES),
                                                   "fields": {"type": "object"}, "tags": array(INT_ID),
                                                   "partial_update": {"type": "boolean"},
                                                   "consent_text": CONSENT_TEXT}),
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
                                          "fields": _SEARCH_FIELDS,
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
                                                "bad_cells": {**enum(rows.BAD_CELLS), "description": (
                                                    "leave-out (default): a cell that does not fit its column "
                                                    "is left out and reported (left_out), the contact imported; "
                                                    "reject-row: the row is rejected.")},
                                                "batch_size": {"type": "integer", "minimum": 1,
                                                               "maximum": batches.MAX_BATCH_SIZE},
                                                "consent_text": CONSENT_TEXT,
                                                "file_name": {"type": "string", "maxLength": consents.MAX_FILE_NAME,
                                                              "description": "Extension: the file's name, kept in the "
                                                                             "consent ledger with each row's line."}},
                                      "data": ANY},
    ("GET", "/v1/contacts/export"): {"summary": "Export contacts as CSV or JSON lines (streamed)", "envelope": None,
                                     "query": {"format": enum(("csv", "jsonl")), "fields": {"type": "string"}},
                                     "media": {"text/csv": {"type": "string"}, "application/x-ndjson": {"type": "string"}}},
    ("GET", "/v1/contacts/{contact_id}"): {"summary": "A contact", "envelope": "B", "data": CONTACT},
    ("POST", "/v1/contacts/{contact_id}/tags/add"): {"summary": "Add tags to a contact", "envelope": "B",
                                                     "body": TAG_IDS, "data": ANY},
    ("POST", "/v1/contacts/{contact_id}/tags/remove"): {"summary": "Remove tags from a contact", "envelope": "B",
                                                        "body": TAG_IDS, "data": ANY},
    ("GET", "/v1/contacts/{contact_id}/consents"): {
        "summary": "A contact's consent ledger, oldest first (extension)", "envelope": "B", "query": CONSENT_PAGE,
        "data": array(CONSENT, maxItems=consent_export.MAX_LIMIT)},
    ("GET", "/v1/consents"): {
        "summary": "The workspace's consent ledger from `since` to `until`, oldest first (extension)",
        "envelope": "B", "query": {"since": OR_EMPTY(_MOMENT), "until": OR_EMPTY(_MOMENT), **CONSENT_PAGE},
        "data": array(CONSENT_EXPORT, maxItems=consent_export.MAX_LIMIT)},
    # fields, tags
    ("GET", "/v1/fields"): {"summary": "The workspace's contact fields", "envelope": "B", "data": array(FIELD)},
    ("POST", "/v1/fields"): {"links": [("PATCH", "/v1/fields/{field_id}", {"field_id": "id"})],
                             "summary": "Create a custom field", "envelope": "B", "status": 201,
                             "body": FIELD_BODY, "data": FIELD},
    ("PATCH", "/v1/fields/{field_id}"): {"summary": "Update a custom field (its type cannot change)", "envelope": "B",
                                         "body": FIELD_BODY, "data": FIELD},
    ("DELETE", "/v1/fields/{field_id}"): {**deleted(INT_ID, "a custom field, its values on every contact and its "
                                                            "index"), "envelope": "B"},
    ("GET", "/v1/tags"): {"summary": "The workspace's tags", "envelope": "B", "data": array(TAG)},
    ("POST", "/v1/tags"): {"summary": "Create a tag", "envelope": "B", "status": 201,
                           "body": obj({"name": name(tags.MAX_NAME)}, ("name",)),
                           "data": TAG},
    ("DELETE", "/v1/tags/{tag_id}"): {**deleted(INT_ID, "a tag (removed from its contacts, no TAG_REMOVED events)"),
                                      "envelope": "B"},
    ("POST", "/v1/tags/{tag_id}/contacts"): {
        "summary": "Tag the contacts of a search, a segment or a list (extension): one TAG_ADDED each, flows enroll",
        "envelope": "B", "body": TAG_SELECTION, "data": _tagging_result("tagged", "already_tagged")},
    ("POST", "/v1/tags/{tag_id}/contacts/remove"): {
        "summary": "Untag the contacts of a search, a segment or a list (extension): one TAG_REMOVED each",
        "envelope": "B", "body": TAG_SELECTION, "data": _tagging_result("untagged", "not_tagged")},
    # events
    ("POST", "/v1/events"): {"summary": "Track a custom event for a contact", "envelope": "B",
                             # event_name: required, not blank once trimmed (services/contacts/events.NAME_REQUIRED)
                             "body": obj({"event_name": {"type": "string", "pattern": NOT_BLANK},
                                          "email_address": {"type": "string"}, "phone_number": {"type": "string"},
                                          "properties": _event_properties()},
                                         ("event_name",)),
                             "data": ANY},
    ("GET", "/v1/events"): {"summary": "The automation event log", "envelope": "B",
                            "query": {"limit": OR_EMPTY({"type": "integer", "minimum": 1, "maximum": events.MAX_LOG_LIMIT}),
                                      "after_id": OR_EMPTY(AFTER_ID),
                                      "type": {"type": "string", "enum": ["", *events.EVENT_TYPES]},
                                      "contact_id": {"type": "string", "pattern": f"^({HEX24_PATTERN})?$"}},
                            "data": ANY},
}

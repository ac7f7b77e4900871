"""A person's data: erasing a contact, its personal-data export, the suppression list
(services/privacy/, services/contacts/suppressions.py; docs/privacy.md).

The routes of api/privacy.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import HEX_ID, INT_ID, TIMESTAMP, array, enum, obj
from marketing_cli.services.contacts import suppressions
from marketing_cli.services.privacy import personal_data

DELETED = obj({"id": HEX_ID, "deleted": {"type": "boolean", "const": True}}, ("id", "deleted"))
SUPPRESSION = obj({"id": INT_ID, "kind": enum(suppressions.KINDS),
                   "reason": enum((suppressions.ERASED, suppressions.ADDED)), "created_at": TIMESTAMP},
                  ("id", "kind", "reason", "created_at"),
                  description="An entry of the suppression list: a keyed hash of the address is stored, never the "
                              "address, which no answer shows.")
SECTIONS = {section.name: array({"type": "object"}) for section in personal_data.SECTIONS}
DOCUMENT = obj({"format": {"type": "string", "const": personal_data.FORMAT},
                "version": {"type": "integer", "const": personal_data.VERSION},
                "exported_at": TIMESTAMP, "workspace_id": INT_ID, "contact": {"type": "object"}, **SECTIONS,
                "suppressions": array(SUPPRESSION)},
               ("format", "version", "exported_at", "workspace_id", "contact"),
               description="Everything held about the person, one member per kind of row (docs/privacy.md).")
BOOLEAN_QUERY = {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no", ""]}

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("DELETE", "/v1/contacts/{contact_id}"): {
        "summary": "Delete a contact: erase everything held about the person (suppress=true: and keep the hashes of "
                   "its email address and phone number on the suppression list)",
        "envelope": "B", "query": {"suppress": BOOLEAN_QUERY}, "data": DELETED},
    ("GET", "/v1/contacts/{contact_id}/personal-data"): {
        "summary": "Everything held about a contact, as one JSON document (personal-data export)",
        "envelope": "B", "data": DOCUMENT},
    ("GET", "/v1/suppressions"): {
        "summary": "The suppression list (never the addresses); with an address, its entry",
        "envelope": "B",
        "query": {"email_address": {"type": "string"}, "phone_number": {"type": "string"},
                  "page": {"type": "integer", "minimum": 1, "maximum": suppressions.MAX_PAGE},
                  "limit": {"type": "integer", "minimum": 1, "maximum": suppressions.MAX_LIMIT}},
        "data": array(SUPPRESSION)},
    ("POST", "/v1/suppressions"): {
        "summary": "Put an email address or a phone number on the suppression list (stored only as a keyed hash)",
        "envelope": "B", "status": 201,
        "body": obj({"email_address": {"type": "string"}, "phone_number": {"type": "string"}}),
        "data": SUPPRESSION},
    ("DELETE", "/v1/suppressions/{id}"): {
        "summary": "Take an entry off the suppression list", "envelope": "B",
        "data": obj({"id": INT_ID, "deleted": {"type": "boolean", "const": True}}, ("id", "deleted"))},
}

"""The workspace: its settings and billing, the SMS price list, the merge tags its templates can use.

The routes of api/workspace.py, api/rates.py and api/merge_tags.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import INT_ID, TIMESTAMP, array, obj, trimmed_length

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
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
}

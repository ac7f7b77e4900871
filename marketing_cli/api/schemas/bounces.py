"""Bounces and complaints recorded through the API (services/delivery/bounces.py).

The route of api/bounces.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import ANY, HEX_ID, NOT_BLANK, enum, obj
from marketing_cli.services.delivery import bounces

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/bounces"): {"summary": "Record a bounce or a complaint", "envelope": "A", "status": 201,
                              "body": obj({"email_address": {"type": "string", "pattern": NOT_BLANK},
                                           "type": enum(bounces.TYPES), "campaign_id": HEX_ID},
                                          ("email_address", "type")),
                              "data": ANY},
}

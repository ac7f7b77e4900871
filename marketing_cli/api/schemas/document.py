"""The API's own description: the OpenAPI document, and the page that renders it for people.

The routes of api/openapi.py.
"""

from __future__ import annotations

from typing import Any

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/v1/openapi.json"): {"summary": "This document", "envelope": None, "auth": "none",
                                  "media": {"application/json": {"type": "object"}}},
    ("GET", "/docs"): {"summary": "This document, rendered for people (Redoc)", "envelope": None, "auth": "none",
                       "media": {"text/html": {"type": "string"}}},
    ("GET", "/docs/redoc.standalone.js"): {"summary": "The renderer of /docs (Redoc, MIT licence)", "envelope": None,
                                           "auth": "none", "media": {"text/javascript": {"type": "string"}}},
}

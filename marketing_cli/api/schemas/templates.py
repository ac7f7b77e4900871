"""Email templates: import (HTML, ZIP, URL or editor JSON), list, read, and the files stored
with a ZIP template.

The routes of api/templates.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import ANY, INT_ID, deleted, enum, name, obj
from marketing_cli.services.email import templates

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
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
    ("DELETE", "/v1/templates/{id}"): {**deleted(INT_ID, "a template and its ZIP files"), "envelope": "A"},
    ("GET", "/v1/templates/{id}/assets/{path}"): {
        "summary": "A file stored with a ZIP template (its bytes, with the type its name implies)", "envelope": None,
        "media": {"application/octet-stream": {"type": "string", "format": "binary"}}},
}

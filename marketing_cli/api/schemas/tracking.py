"""Tracking links, public: the links in sent email (open pixel, click, unsubscribe, view
online, double opt-in confirmation), which answer a person's browser.

The routes of api/tracking.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import TRACKING_404

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
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
}

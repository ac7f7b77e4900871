"""A variant's HTML: set (cleaned), read, and its preview thumbnail.

Set Campaign Variant HTML cleans the HTML (services/email/html_clean.py: `clean_html`, then
`inject_preview_span` adds the hidden `{{preview_text}}` span), stores it as a CODE
variant with body_json cleared, reports the merge tags the workspace does not define in
`warnings`, and queues the `campaign.preview` job, which regenerates the thumbnail.

The thumbnail: no HTML renderer (browser engine) ships with mkt, so the job draws an SVG
card (600 x 400) with the subject and the first lines of the email's text, stores it in
`campaign_previews`, and points the variant's `preview_url` at
GET /v1/campaigns/:id/variants/:type/preview (with a version suffix that changes when the
content does). docs/campaigns.md describes it.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import textwrap
from html import escape
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.inputs import type_error
from marketing_cli.kernel.merge_fallbacks import check_fallbacks
from marketing_cli.services.contacts.merge_tags import find_unknown_tags
from marketing_cli.services.email.campaigns import (
    INVALID_BODY,
    LOCKED_FOR_EDIT,
    PREVIEW_JOB,
    campaign_row,
    check_campaign_id,
    check_variant_type,
    variant_row,
)
from marketing_cli.storage.db import transaction

HTML_REQUIRED = "Please provide the HTML content for this variant."
HTML_OR_TEMPLATE = "Please provide either html or template_id, not both."
LOCKED = "The campaign cannot be edited while it is being reviewed."
UNKNOWN_TAG_WARNING = ("Unknown merge tag {tag}: define it as a field or remove it; until then the campaign "
                       "cannot be scheduled and test emails are refused.")
NO_PREVIEW = "This variant has no preview yet."
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"


def content_view(row: sqlite3.Row) -> dict[str, Any]:
    """The specification's variant content: {id, type, template_type, body_json, body_html}."""
    import json

    return {"id": row["id"], "type": row["type"], "template_type": row["template_type"],
            "body_json": json.loads(row["body_json"]) if row["body_json"] else None,
            "body_html": row["body_html"]}


def _html_of(conn: sqlite3.Connection, workspace_id: int, body: Any) -> str:
    if not isinstance(body, dict):
        raise MktError(400, INVALID_BODY)
    if body.get("template_id") is not None:
        if body.get("html") is not None:
            raise MktError(400, HTML_OR_TEMPLATE)
        from marketing_cli.services.email.templates import template_html

        return template_html(conn, workspace_id, body["template_id"])
    html = body.get("html")
    if html is not None and not isinstance(html, str):
        raise type_error("html", str)
    if html is None or not html.strip():
        raise MktError(400, HTML_REQUIRED)
    return html


def set_variant_html(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, variant_type: Any,
                     body: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/variants/:type/html: {html} (or {template_id}) -> the variant content + warnings.

    With `template_id` the HTML is that CODE template's, as uploaded, cleaned like any other.
    """
    from marketing_cli.services.email.html_clean import clean_html, inject_preview_span

    campaign_id = check_campaign_id(campaign_id)
    variant_type = check_variant_type(variant_type)
    html = _html_of(conn, workspace_id, body)
    campaign_row(conn, workspace_id, campaign_id)  # not found before the (costlier) cleaning
    check_fallbacks(html)
    cleaned = inject_preview_span(clean_html(html))
    with transaction(conn):
        campaign = campaign_row(conn, workspace_id, campaign_id)
        variant = variant_row(conn, campaign_id, variant_type)
        if campaign["status"] in LOCKED_FOR_EDIT:
            raise MktError(400, LOCKED)
        now = clock.now()
        conn.execute("UPDATE campaign_variants SET template_type = 'CODE', body_json = NULL, body_html = ?,"
                     " updated_at = ? WHERE id = ?", (cleaned, now, variant["id"]))
        conn.execute("UPDATE campaigns SET updated_at = ? WHERE id = ?", (now, campaign_id))
        queue_preview(conn, workspace_id, campaign_id, variant["id"])
        result = content_view(variant_row(conn, campaign_id, variant_type))
    result["warnings"] = [UNKNOWN_TAG_WARNING.format(tag=tag) for tag in find_unknown_tags(conn, workspace_id, cleaned)]
    return result


def get_variant_html(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, variant_type: Any
                     ) -> dict[str, Any]:
    """GET /v1/campaigns/:id/variants/:type/html: the variant content."""
    campaign_id = check_campaign_id(campaign_id)
    variant_type = check_variant_type(variant_type)
    campaign_row(conn, workspace_id, campaign_id)
    return content_view(variant_row(conn, campaign_id, variant_type))


# --- the preview thumbnail ---------------------------------------------------------------------

def queue_preview(conn: sqlite3.Connection, workspace_id: int, campaign_id: str, variant_id: str) -> int:
    """Queue the thumbnail's regeneration (one queued job per variant at most)."""
    return jobs.enqueue(conn, PREVIEW_JOB, {"campaign_id": campaign_id, "variant_id": variant_id},
                        workspace_id=workspace_id, dedupe_key=f"{PREVIEW_JOB}:{variant_id}")


def public_url() -> str:
    return (os.environ.get("MKT_PUBLIC_URL") or DEFAULT_PUBLIC_URL).rstrip("/")


def preview_svg(subject: str, text: str) -> str:
    """The fallback thumbnail: a 600 x 400 SVG card with the subject and the first lines of text."""
    lines = []
    for paragraph in text.splitlines():
        if paragraph.strip():
            lines.extend(textwrap.wrap(paragraph.strip(), 70) or [""])
        if len(lines) >= 14:
            break
    body = "".join(f'<text x="24" y="{104 + 20 * i}" font-size="13" fill="#333">{escape(line)}</text>'
                   for i, line in enumerate(lines[:14]))
    title = escape(textwrap.shorten(subject or "(no subject)", 60, placeholder="..."))
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="600" height="400" viewBox="0 0 600 400">'
            '<rect width="600" height="400" fill="#ffffff" stroke="#d0d7de"/>'
            '<rect width="600" height="64" fill="#f6f8fa"/>'
            f'<text x="24" y="40" font-family="sans-serif" font-size="18" font-weight="bold" fill="#111">{title}</text>'
            f'<g font-family="sans-serif">{body}</g></svg>')


@jobs.handler(PREVIEW_JOB)
def regenerate_preview(conn: sqlite3.Connection, payload: dict[str, Any]) -> dict[str, Any]:
    """Idempotent: draws the thumbnail of the variant's current content (nothing when it is unchanged)."""
    from marketing_cli.kernel.html_text import html_to_text

    with transaction(conn):
        variant = conn.execute("SELECT * FROM campaign_variants WHERE id = ?", (payload.get("variant_id"),)).fetchone()
        if variant is None:
            return {"preview": None}  # the campaign was deleted meanwhile
        html, subject = variant["body_html"] or "", variant["subject"] or ""
        digest = hashlib.sha256(f"{subject}\0{html}".encode()).hexdigest()
        old = conn.execute("SELECT digest FROM campaign_previews WHERE variant_id = ?", (variant["id"],)).fetchone()
        if old is not None and old["digest"] == digest and variant["preview_url"]:
            return {"preview": variant["preview_url"]}
        svg = preview_svg(subject, html_to_text(html))
        conn.execute("INSERT INTO campaign_previews (variant_id, content_type, body, digest, created_at)"
                     " VALUES (?, 'image/svg+xml', ?, ?, ?) ON CONFLICT (variant_id) DO UPDATE SET"
                     " content_type = excluded.content_type, body = excluded.body, digest = excluded.digest,"
                     " created_at = excluded.created_at", (variant["id"], svg.encode(), digest, clock.now()))
        url = (f"{public_url()}/v1/campaigns/{variant['campaign_id']}/variants/{variant['type']}/preview"
               f"?v={digest[:12]}")
        conn.execute("UPDATE campaign_variants SET preview_url = ? WHERE id = ?", (url, variant["id"]))
    return {"preview": url}


def get_variant_preview(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, variant_type: Any
                        ) -> tuple[str, bytes]:
    """GET /v1/campaigns/:id/variants/:type/preview: (content type, image bytes); 404 before the first one."""
    campaign_id = check_campaign_id(campaign_id)
    variant_type = check_variant_type(variant_type)
    campaign_row(conn, workspace_id, campaign_id)
    variant = variant_row(conn, campaign_id, variant_type)
    row = conn.execute("SELECT content_type, body FROM campaign_previews WHERE variant_id = ?",
                       (variant["id"],)).fetchone()
    if row is None:
        raise MktError(404, NO_PREVIEW)
    return row["content_type"], bytes(row["body"])

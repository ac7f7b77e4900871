"""Who an SMS campaign reaches, and who it skips and why, before anything is queued.

GET /v1/sms-campaigns/:id/reach and `mkt sms reach` (`mkt sms schedule` prints it first):
the audience's contacts, counted once each, fall into the first of these that applies:

    no_phone_number     no number stored
    unsubscribed, cleaned, blocked
                        the contact's sms_status (spec part 3: not eligible for SMS)
    no_published_rate   a number whose country has no published price (or that names no
                        country): expansion suppresses it (statistics' `suppressed`)
    recipients          the rest: each gets a message

The counts are the expansion's own rules at this moment; contacts that change before the
campaign is expanded change them.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from marketing_cli.services.contacts.audience import resolve_whole_audience
from marketing_cli.services.sms.campaigns import campaign_row
from marketing_cli.services.sms.pricing import Pricing, price_units

REASONS = ("no_phone_number", "unsubscribed", "cleaned", "blocked", "no_published_rate")
WHY = {
    "no_phone_number": "no phone number",
    "unsubscribed": "unsubscribed from SMS",
    "cleaned": "cleaned",
    "blocked": "blocked",
    "no_published_rate": "no published rate for their country",
}


def _empty(campaign_id: str) -> dict[str, Any]:
    return {"id": campaign_id, "audience": 0, "recipients": 0, "skipped": dict.fromkeys(REASONS, 0),
            "skipped_total": 0, "countries_without_rate": []}


def campaign_reach(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """{"id", "audience", "recipients", "skipped": {reason: count}, "skipped_total",
    "countries_without_rate": [{"country", "count"}]} (country null: a number that names none)."""
    row = campaign_row(conn, workspace_id, campaign_id)
    audience = json.loads(row["audience"])
    if not audience:
        return _empty(row["id"])
    everyone = resolve_whole_audience(conn, workspace_id, audience, "c.phone, c.sms_status")
    with Pricing(conn, workspace_id, price_units(conn, workspace_id)) as pricing:
        pricing.resolve(f"SELECT e.phone FROM ({everyone.sql}) e", everyone.params)
        units, country = pricing.units("a.phone"), pricing.country("a.phone")
        reason = ("CASE WHEN a.phone IS NULL OR a.phone = '' THEN 'no_phone_number'"
                  " WHEN a.sms_status IN ('UNSUBSCRIBED', 'CLEANED', 'BLOCKED') THEN lower(a.sms_status)"
                  f" WHEN ({units}) IS NULL THEN 'no_published_rate' ELSE NULL END")
        rows = conn.execute(
            f"SELECT r.reason, CASE WHEN r.reason = 'no_published_rate' THEN r.country END AS country, COUNT(*)"
            f" FROM (SELECT {reason} AS reason, {country} AS country FROM ({everyone.sql}) a{pricing.join('a.phone')}) r"
            " GROUP BY 1, 2", everyone.params).fetchall()
    result = _empty(row["id"])
    unpriced: dict[str | None, int] = {}
    for why, where, count in rows:
        result["audience"] += count
        if why is None:
            result["recipients"] += count
            continue
        result["skipped"][why] += count
        if why == "no_published_rate":
            unpriced[where] = unpriced.get(where, 0) + count
    result["skipped_total"] = result["audience"] - result["recipients"]
    result["countries_without_rate"] = [{"country": c, "count": n} for c, n in
                                        sorted(unpriced.items(), key=lambda item: (-item[1], item[0] or ""))]
    return result


def reach_line(reach: dict[str, Any]) -> str:
    """`1,450 contacts in the audience: 1,200 will get the message, 250 will be skipped (no
    phone number: 100, no published rate for their country: 150 (IN 150)).`"""
    noun = "contact" if reach["audience"] == 1 else "contacts"
    head = f"{reach['audience']:,} {noun} in the audience: {reach['recipients']:,} will get the message"
    if not reach["skipped_total"]:
        return head + "."
    parts = []
    for why in REASONS:
        count = reach["skipped"][why]
        if count:
            text = f"{WHY[why]}: {count:,}"
            if why == "no_published_rate":
                text += " (" + ", ".join(f"{c['country'] or 'unknown'} {c['count']:,}"
                                         for c in reach["countries_without_rate"]) + ")"
            parts.append(text)
    return head + f", {reach['skipped_total']:,} will be skipped ({'; '.join(parts)})."

"""The data of an SMS campaign's report (`mkt sms report ID --html FILE`, and the dashboard's
campaign page): one dict that marketing_cli/reports/html.py renders.

The campaign (GET /v1/sms-campaigns/:id), its statistics (.../statistics: funnel, top links,
devices, countries of clicks, the real cost) and its timeline (.../timeline), plus where the
messages went: recipients per country with what they were charged (the ledger's charges are
per batch, so the per-country figure is the messages' own charge, before refunds) and
messages per provider.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns, ledger, stats, timeline
from marketing_cli.storage import dialect


def _by_country(conn: sqlite3.Connection, campaign_id: str) -> list[dict[str, Any]]:
    country = "COALESCE(country, 'unknown')"
    rows = conn.execute(
        f"SELECT {country} AS country, COUNT(*) AS messages, SUM(CASE WHEN handed_at IS NOT NULL THEN 1 ELSE 0 END) AS sent,"
        " SUM(CASE WHEN delivered_at IS NOT NULL THEN 1 ELSE 0 END) AS delivered, SUM(price_units) AS units FROM sms_messages"
        f" WHERE campaign_id = ? GROUP BY 1 ORDER BY messages DESC, {dialect.in_byte_order(conn, country)}",
        (campaign_id,)).fetchall()
    return [{"country": r["country"], "messages": r["messages"], "sent": r["sent"], "delivered": r["delivered"],
             "charged": ledger.money(ledger.from_units(r["units"] or 0))} for r in rows]


def _by_provider(conn: sqlite3.Connection, campaign_id: str) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT provider, COUNT(*) AS n FROM sms_messages WHERE campaign_id = ?"
                        f" AND provider IS NOT NULL GROUP BY provider ORDER BY n DESC, {dialect.in_byte_order(conn, 'provider')}",
                        (campaign_id,))
    return [{"provider": r["provider"], "messages": r["n"]} for r in rows]


def campaign_report(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """{"kind": "sms", "campaign", "statistics", "timeline", "chart", "by_country", "by_provider",
    "generated_at"}; `chart` as in services/email/report.py."""
    campaign = campaigns.get_campaign(conn, workspace_id, campaign_id)
    hours = timeline.campaign_timeline(conn, workspace_id, campaign["id"])
    return {
        "kind": "sms",
        "campaign": campaign,
        "statistics": stats.campaign_statistics(conn, workspace_id, campaign["id"]),
        "timeline": hours,
        "chart": timeline.campaign_chart(conn, campaign["id"], hours["started_at"]),
        "by_country": _by_country(conn, campaign["id"]),
        "by_provider": _by_provider(conn, campaign["id"]),
        "generated_at": clock.now(),
    }


def campaign_summaries(conn: sqlite3.Connection, workspace_id: int, *, page: Any = 1,
                       limit: Any = campaigns.DEFAULT_LIMIT) -> dict[str, Any]:
    """The dashboard's list: GET /v1/sms-campaigns's page, each campaign's `statistics` as the
    list answers them plus `total_cost` as its statistics answer it."""
    listed = campaigns.list_campaigns(conn, workspace_id, page=page, limit=limit)
    rows = [{"id": c["id"], "name": c["name"], "status": c["status"], **c["statistics"],
             "total_cost": ledger.money(ledger.campaign_cost(conn, c["id"]))} for c in listed["campaigns"]]
    return {"campaigns": rows, "pagination": listed["pagination"]}

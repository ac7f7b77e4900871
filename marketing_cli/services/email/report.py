"""The data of an email campaign's report (`mkt campaigns report ID --html FILE`, and the
dashboard's campaign page): one dict that marketing_cli/reports/html.py renders.

Nothing is computed here that the API does not already answer: the campaign
(GET /v1/campaigns/:id), its statistics (.../statistics: funnel, top links, providers,
devices, countries, variants) and its timeline (.../timeline), read together.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.email import campaigns, stats, timeline


def campaign_report(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """{"kind": "email", "campaign", "statistics", "timeline", "chart", "generated_at"}: `chart` is
    the timeline on a bucket fitted to the activity's span (timeline.campaign_chart)."""
    campaign = campaigns.get_campaign(conn, workspace_id, campaign_id)
    hours = timeline.get_campaign_timeline(conn, workspace_id, campaign["id"])
    return {
        "kind": "email",
        "campaign": campaign,
        "statistics": stats.get_campaign_statistics(conn, workspace_id, campaign["id"]),
        "timeline": hours,
        "chart": timeline.campaign_chart(conn, campaign["id"], hours["started_at"]),
        "generated_at": clock.now(),
    }


def campaign_summaries(conn: sqlite3.Connection, workspace_id: int, *, page: Any = 1,
                       limit: Any = campaigns.DEFAULT_LIMIT) -> dict[str, Any]:
    """The dashboard's list: GET /v1/campaigns's page, each campaign with the numbers the API
    answers for it: `sent` of its `progress` (None before the send) and the statistics'
    `aggregate` (delivered, opened, clicked, bounced, unsubscribed, complained)."""
    listed = campaigns.list_campaigns(conn, workspace_id, page=page, limit=limit)
    rows = []
    for campaign in listed["campaigns"]:
        progress = campaigns.get_campaign(conn, workspace_id, campaign["id"]).get("progress")
        aggregate = stats.get_campaign_statistics(conn, workspace_id, campaign["id"])["aggregate"]
        rows.append({"id": campaign["id"], "name": campaign["name"], "type": campaign["type"],
                     "status": campaign["status"], "sent": progress["sent"] if progress else None, **aggregate})
    return {"campaigns": rows, "pagination": listed["pagination"]}

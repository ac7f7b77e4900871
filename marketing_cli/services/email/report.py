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
    """{"kind": "email", "campaign", "statistics", "timeline", "generated_at"}."""
    campaign = campaigns.get_campaign(conn, workspace_id, campaign_id)
    return {
        "kind": "email",
        "campaign": campaign,
        "statistics": stats.get_campaign_statistics(conn, workspace_id, campaign["id"]),
        "timeline": timeline.get_campaign_timeline(conn, workspace_id, campaign["id"]),
        "generated_at": clock.now(),
    }

"""GET /v1/campaigns/:id/timeline (`mkt campaigns timeline ID`): an email campaign's events
per hour for the first 72 hours after the send started, per day after that.

The counts come from `email_campaign_hours` (schema step 16), which triggers on
`email_messages` and `email_clicks` keep as the events happen, so the read is the campaign
row and at most a few thousand small rows however many messages the campaign has
(docs/statistics.md has the figures). The buckets are kernel/timeline.py's.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, timeline
from marketing_cli.services.email import stats
from marketing_cli.storage.db import read_snapshot

SERIES = ("sent", "delivered", "unique_opens", "total_opens", "unique_clicks", "total_clicks",
          "unsubscribed", "bounced", "complained")


def get_campaign_timeline(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """The timeline object: {"campaign_id", "status", "started_at", "hours", "days", "totals"}.

    `started_at` is when the send began (the audience was frozen into messages); a campaign
    not sent yet has null, no buckets and zero totals."""
    campaign_id = stats.check_campaign_id(campaign_id)
    with read_snapshot(conn):
        row = conn.execute("SELECT status, send_started_at FROM campaigns WHERE id = ? AND workspace_id = ?",
                           (campaign_id, workspace_id)).fetchone()
        if row is None:
            raise MktError(400, stats.NOT_FOUND)
        counts = conn.execute(
            "SELECT hour, " + ", ".join(f"sum({name}) AS {name}" for name in SERIES) +
            " FROM email_campaign_hours WHERE campaign_id = ? GROUP BY hour", (campaign_id,)).fetchall()
    started = row["send_started_at"]
    folded = timeline.fold(clock.parse_ts(started) if started else None, clock.utcnow(),
                           ((r["hour"], r) for r in counts), dict.fromkeys(SERIES, 0))
    return {"campaign_id": campaign_id, "status": row["status"], "started_at": started, **folded}

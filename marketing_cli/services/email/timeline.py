"""GET /v1/campaigns/:id/timeline (`mkt campaigns timeline ID`): an email campaign's events
per hour for the first 72 hours after the send started, per day after that.

The counts come from `email_campaign_hours` (schema step 16), which triggers on
`email_messages` and `email_clicks` keep as the events happen, so the read is the campaign
row and at most a few thousand small rows however many messages the campaign has
(docs/statistics.md has the figures). The buckets are kernel/timeline.py's.

`campaign_chart` is what the HTML report and the dashboard draw: the same events on a bucket
chosen from their span (kernel/timeline.py `chart_step`). An hour or longer is counted from
the hour rows; a finer bucket (the activity spans at most a day) from the events themselves,
grouped in SQL, which reads every message of the campaign: above FINE_LIMIT messages the
chart keeps hourly buckets rather than scan them.
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


FINE_LIMIT = 100_000  # bench/bench_timeline.py: ~130 ms per 50,000 messages for the finer buckets
CHART = timeline.ChartSource(
    events="""SELECT opened_at AS at, 1 AS unique_opens, 0 AS total_clicks, 0 AS unsubscribed FROM email_messages
                   WHERE campaign_id = ? AND opened_at IS NOT NULL
                 UNION ALL SELECT k.clicked_at, 0, 1, 0 FROM email_clicks k JOIN email_messages m ON m.id = k.message_id
                   WHERE m.campaign_id = ? AND k.machine = 0
                 UNION ALL SELECT unsubscribed_at, 0, 0, 1 FROM email_messages
                   WHERE campaign_id = ? AND unsubscribed_at IS NOT NULL""",
    parts=3, hours="email_campaign_hours", names=("unique_opens", "total_clicks", "unsubscribed"))


def campaign_chart(conn: sqlite3.Connection, campaign_id: str, started: str | None) -> dict[str, Any] | None:
    """The report's chart of first opens, clicks and unsubscribes (kernel/timeline.py
    `campaign_chart`); None before the send started."""
    return timeline.campaign_chart(conn.execute, CHART, campaign_id, started, FINE_LIMIT)

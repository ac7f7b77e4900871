"""GET /v1/sms-campaigns/:id/timeline (`mkt sms timeline ID`): an SMS campaign's messages
sent, delivered and failed, clicks, STOP replies and cost per hour for the first 72 hours
after the send started, per day after that.

The counts come from `sms_campaign_hours` (schema step 16, kept by triggers on
`sms_messages` and `sms_clicks`); the cost from the campaign's ledger entries (charges minus
refunds, by the hour they were written: one charge per expansion batch), summed as Decimal
and shown as decimal strings like every SMS amount, so the buckets' costs add up to the
statistics' `total_cost`. The buckets are kernel/timeline.py's.

`campaign_chart` is what the HTML report and the dashboard draw: delivered messages, clicks
and STOP replies on a bucket chosen from their span, as services/email/timeline.py explains
(hour rows for an hour or longer, the events themselves, grouped in SQL, for finer buckets
up to FINE_LIMIT messages).
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

from marketing_cli.kernel import clock, timeline
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms.campaigns import campaign_row
from marketing_cli.storage.db import read_snapshot

SERIES = ("sent", "delivered", "failed", "unique_clicks", "total_clicks", "unsubscribed")


def _start(conn: sqlite3.Connection, row: sqlite3.Row) -> str | None:
    """When the send started: the moment the campaign was due (scheduled_at, or queued_at for
    NOW), once its expansion wrote a message; None before."""
    if row["status"] == "DRAFT" or row["queued_at"] is None:
        return None
    if conn.execute("SELECT 1 FROM sms_messages WHERE campaign_id = ? LIMIT 1", (row["id"],)).fetchone() is None:
        return None
    return clock.format_ts(clock.parse_ts(row["scheduled_at"] or row["queued_at"]))


def campaign_timeline(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """The timeline object: {"campaign_id", "status", "started_at", "hours", "days", "totals"};
    `cost` in each bucket and in totals is a decimal string (USD)."""
    with read_snapshot(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        started = _start(conn, row)
        hours: dict[str, dict[str, Any]] = {}
        for r in conn.execute("SELECT hour, " + ", ".join(SERIES) + " FROM sms_campaign_hours"
                              " WHERE campaign_id = ?", (row["id"],)):
            hours[r["hour"]] = {**{name: r[name] for name in SERIES}, "cost": Decimal(0)}
        for created_at, amount in conn.execute(
                "SELECT created_at, amount FROM sms_ledger WHERE campaign_id = ? AND kind IN ('charge', 'refund')",
                (row["id"],)):
            bucket = hours.setdefault(created_at[:13], {**dict.fromkeys(SERIES, 0), "cost": Decimal(0)})
            bucket["cost"] -= Decimal(amount)
    folded = timeline.fold(clock.parse_ts(started) if started else None, clock.utcnow(), hours.items(),
                           {**dict.fromkeys(SERIES, 0), "cost": Decimal(0)})
    for bucket in (*folded["hours"], *folded["days"], folded["totals"]):
        bucket["cost"] = ledger.money(bucket["cost"])
    return {"campaign_id": row["id"], "status": row["status"], "started_at": started, **folded}


FINE_LIMIT = 100_000  # bench/bench_timeline.py: ~130 ms per 50,000 messages for the finer buckets
CHART = timeline.ChartSource(
    events="""SELECT delivered_at AS at, 1 AS delivered, 0 AS total_clicks, 0 AS unsubscribed FROM sms_messages
                   WHERE campaign_id = ? AND delivered_at IS NOT NULL
                 UNION ALL SELECT k.clicked_at, 0, 1, 0 FROM sms_clicks k JOIN sms_messages m ON m.id = k.message_id
                   WHERE m.campaign_id = ?
                 UNION ALL SELECT unsubscribed_at, 0, 0, 1 FROM sms_messages
                   WHERE campaign_id = ? AND unsubscribed_at IS NOT NULL""",
    parts=3, hours="sms_campaign_hours", names=("delivered", "total_clicks", "unsubscribed"))


def campaign_chart(conn: sqlite3.Connection, campaign_id: str, started: str | None) -> dict[str, Any] | None:
    """The report's chart of deliveries, clicks and STOP replies (kernel/timeline.py
    `campaign_chart`); None before the send started."""
    return timeline.campaign_chart(conn.execute, CHART, campaign_id, started, FINE_LIMIT)

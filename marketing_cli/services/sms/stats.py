"""SMS campaign statistics (GET /v1/sms-campaigns/:id/statistics, `mkt sms stats`): the
message counts, the first-click breakdowns, link activity and the real cost from the ledger."""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.services.sms import ledger
from marketing_cli.services.sms.campaigns import campaign_row, message_counts, waiting_for_zone
from marketing_cli.services.sms.gate import held_counts
from marketing_cli.storage import dialect


def _breakdown(conn: sqlite3.Connection, cid: str, column: str, key: str) -> list[dict[str, Any]]:
    value = f"COALESCE(k.{column}, 'unknown')"
    sql = (f"SELECT {value} AS v, COUNT(*) AS n FROM sms_clicks k"
           " WHERE k.id IN (SELECT MIN(k2.id) FROM sms_clicks k2 JOIN sms_messages m ON m.id = k2.message_id"
           "                WHERE m.campaign_id = ? GROUP BY k2.message_id)"
           f" GROUP BY v ORDER BY n DESC, {dialect.in_byte_order(conn, value)}"
           " LIMIT 10")
    return [{key: r["v"], "click_count": r["n"]} for r in conn.execute(sql, (cid,))]


def campaign_statistics(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/sms-campaigns/:id/statistics."""
    row = campaign_row(conn, workspace_id, campaign_id)
    cid = row["id"]
    links = conn.execute(
        "SELECT k.url, COUNT(*) AS total, COUNT(DISTINCT k.message_id) AS uniq FROM sms_clicks k"
        " JOIN sms_messages m ON m.id = k.message_id WHERE m.campaign_id = ? GROUP BY k.url"
        f" ORDER BY total DESC, {dialect.in_byte_order(conn, 'k.url')}",
        (cid,)).fetchall()
    answer = {
        "aggregate": message_counts(conn, [cid])[cid],
        "clicks_by_country": _breakdown(conn, cid, "country", "country"),
        "clicks_by_device_type": _breakdown(conn, cid, "device_type", "device_type"),
        "clicks_by_os": _breakdown(conn, cid, "operating_system", "operating_system"),
        "link_activity": [{"url": r["url"], "total_clicks": r["total"], "unique_clicks": r["uniq"]} for r in links],
        "total_cost": ledger.money(ledger.campaign_cost(conn, cid)),
        "quiet_hours": held_counts(conn, [cid])[cid],  # extension: messages waiting for quiet hours to end
    }
    if row["local_time"]:  # extension: messages of a local-time campaign still waiting for their zone's time
        answer["waiting_for_local_time"] = waiting_for_zone(conn, row)
    return answer

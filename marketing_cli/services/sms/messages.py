"""Per-recipient SMS message states: `mkt sms messages CAMPAIGN_ID` and
GET /v1/sms-campaigns/{id}/messages (CONTRACT section 8)."""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.sms import campaigns

MESSAGE_STATUSES = ("pending", "held", "sending", "sent", "delivered", "undelivered", "failed", "suppressed")
INVALID_MESSAGE_STATUS = ("Invalid message status '{value}'. Valid statuses are: "
                          "pending, held, sending, sent, delivered, undelivered, failed, suppressed.")


def _money(units: int) -> str:
    from decimal import Decimal

    return str(Decimal(units).scaleb(-5).quantize(Decimal("0.00001")))


def message_view(r: sqlite3.Row) -> dict[str, Any]:
    return {"id": r["id"], "contact_id": r["contact_id"], "phone": r["phone"], "country": r["country"],
            "status": r["status"], "carrier_accepted": r["carrier_at"] is not None, "encoding": r["encoding"],
            "segments": r["segments"], "price": _money(r["price_units"]), "provider": r["provider"],
            "provider_ref": r["provider_ref"], "error_code": r["error_code"], "error_message": r["error_message"],
            "handed_at": r["handed_at"], "delivered_at": r["delivered_at"], "failed_at": r["failed_at"],
            "unsubscribed_at": r["unsubscribed_at"],
            # quiet hours (gate.py): until when the message is (or was) held, and by which rule
            "held_until": r["held_until"], "held_reason": r["held_reason"]}


def list_messages(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, *, status: Any = None,
                  page: Any = None, limit: Any = None) -> dict[str, Any]:
    """A campaign's messages in id order, optionally of one status; page and limit as list_campaigns."""
    campaign = campaigns.get_campaign(conn, workspace_id, campaign_id)  # 404s for another workspace's
    where, params = "campaign_id = ?", [campaign["id"]]
    if status is not None and str(status) != "":
        if not isinstance(status, str) or status.strip().lower() not in MESSAGE_STATUSES:
            raise MktError(400, INVALID_MESSAGE_STATUS.format(value=status))
        where += " AND status = ?"
        params.append(status.strip().lower())
    page_number = min(campaigns._page_arg(page, 1, None), 10**12)
    per_page = campaigns._page_arg(limit, campaigns.DEFAULT_LIMIT, campaigns.MAX_LIMIT)
    total = conn.execute(f"SELECT COUNT(*) FROM sms_messages WHERE {where}", params).fetchone()[0]
    # (batch, id) is id order within a campaign (batches are written one after another, ids only
    # grow), and it is the order of the (campaign_id, batch) index: a page reads its rows, where
    # ORDER BY id sorted all the campaign's rows first (1.7 s at 1,000,000 messages).
    rows = conn.execute(f"SELECT * FROM sms_messages WHERE {where} ORDER BY batch, id LIMIT ? OFFSET ?",
                        (*params, per_page, (page_number - 1) * per_page)).fetchall()
    return {"messages": [message_view(r) for r in rows],
            "pagination": {"current_page": page_number, "per_page": per_page,
                           "total_pages": math.ceil(total / per_page), "total_count": total}}

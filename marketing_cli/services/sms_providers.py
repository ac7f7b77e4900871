"""SMS providers: where a campaign's messages go once they are charged.

A provider takes a batch of `Outgoing` messages and answers one `Receipt` per message:
its own reference and whether it took the message. Expansion hands messages over in
batches (docs/sms.md):

    pending --claim (transaction)--> sending --provider.send--> sent (handed_at, provider_ref)

A provider whose `in_database` is True (the outbox) writes inside the claim's own
transaction, so a crash can never leave a message handed over but not marked; a network
provider (Twilio, a later step) is called between two transactions, so a crash between
them can send at most one batch twice (CONTRACT section 7's bound).

The default provider is the outbox: an `sms_outbox` table that `mkt sms outbox` lists.
`get_provider(conn, workspace_id)` is the one place that picks a workspace's provider.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Protocol

from marketing_cli import clock


@dataclass(frozen=True)
class Outgoing:
    message_id: int
    campaign_id: str
    sender: str
    to: str
    body: str
    segments: int


@dataclass(frozen=True)
class Receipt:
    message_id: int
    accepted: bool
    reference: str | None = None
    error: str | None = None


class SmsProvider(Protocol):
    name: str
    in_database: bool

    def send(self, conn: sqlite3.Connection, workspace_id: int, messages: list[Outgoing]) -> list[Receipt]: ...


class OutboxProvider:
    """Messages land in `sms_outbox` (one row per message, written at most once)."""

    name = "outbox"
    in_database = True

    def send(self, conn: sqlite3.Connection, workspace_id: int, messages: list[Outgoing]) -> list[Receipt]:
        now = clock.now()
        conn.executemany(
            "INSERT OR IGNORE INTO sms_outbox (workspace_id, message_id, campaign_id, sender, recipient, body,"
            " segments, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(workspace_id, m.message_id, m.campaign_id, m.sender, m.to, m.body, m.segments, now) for m in messages],
        )
        return [Receipt(m.message_id, True, f"outbox:{m.message_id}") for m in messages]

    def send_claimed(self, conn: sqlite3.Connection, workspace_id: int, campaign_id: str, sender: str,
                     message: str) -> str:
        """The same as `send` for every message of the campaign in state 'sending', in one SQL
        statement (expansion's fast path); returns the reference prefix ('outbox:<message id>')."""
        conn.execute(
            "INSERT OR IGNORE INTO sms_outbox (workspace_id, message_id, campaign_id, sender, recipient, body, segments,"
            " created_at) SELECT ?, id, campaign_id, ?, phone, COALESCE(body, ?), segments, ? FROM sms_messages"
            " WHERE campaign_id = ? AND status = 'sending'",
            (workspace_id, sender, message, clock.now(), campaign_id),
        )
        return "outbox:"


def get_provider(conn: sqlite3.Connection, workspace_id: int) -> SmsProvider:
    """The workspace's provider (the outbox until the Twilio provider exists)."""
    return OutboxProvider()


def list_outbox(conn: sqlite3.Connection, workspace_id: int, *, campaign_id: str | None = None,
                limit: int = 50) -> list[dict[str, Any]]:
    """`mkt sms outbox`: the newest messages the outbox provider took."""
    from marketing_cli.errors import MktError

    if not 1 <= limit <= 1000:
        raise MktError(400, "The limit must be between 1 and 1000.")
    sql = "SELECT * FROM sms_outbox WHERE workspace_id = ?"
    params: list[Any] = [workspace_id]
    if campaign_id is not None:
        sql += " AND campaign_id = ?"
        params.append(campaign_id)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, limit)).fetchall()
    return [{"id": r["id"], "message_id": r["message_id"], "campaign_id": r["campaign_id"], "from": r["sender"],
             "to": r["recipient"], "body": r["body"], "segments": r["segments"], "created_at": r["created_at"]}
            for r in rows]

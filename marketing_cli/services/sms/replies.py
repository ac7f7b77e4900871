"""SMS replies: every inbound text kept with what it did, and what it did
(docs/sms.md "Replies and revocation"; `mkt sms replies`, GET /v1/sms-replies).

`receive` is the inbound webhook's work once its signature is checked (webhooks.py): the reply
is read by the revocation rules (revocation.py) and, in ONE transaction,
- a revocation sets `sms_status` UNSUBSCRIBED on the workspace's contacts with that number,
  logs CONTACT_UNSUBSCRIBED for each, counts once in `unsubscribed` of the last campaign handed
  to the number, and queues one confirmation text (confirmation.py) when it changed a
  contact: a number already unsubscribed gets none;
- START or UNSTOP sets them back to SUBSCRIBED (CONTACT_SUBSCRIBED);
- the reply is written to `sms_replies` whatever it did, with the rule that matched (or the
  phrase the rules set aside), so an operator reads the replies the rules did not act on.

The hand-off re-reads a contact's status before each message (handoff.py), so a revocation
committed here stops every message not yet handed to the provider.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.sms import confirmation, revocation
from marketing_cli.storage.db import transaction

UNSUBSCRIBED_EVENT = "CONTACT_UNSUBSCRIBED"  # as an email unsubscribe logs it, with channel "sms"
SUBSCRIBED_EVENT = "CONTACT_SUBSCRIBED"
DEFAULT_LIMIT, MAX_LIMIT = 50, 100
INVALID_ACTION = "Invalid action '{value}'. Valid actions are: revoked, resubscribed, none."
# A reply is kept under its sender's number (indexed: an index entry of PostgreSQL's holds at
# most 2704 bytes). Twilio's From is an E.164 number, a short code or a sender ID, or a channel
# address (whatsapp:+1...): far below this.
MAX_FROM = 64
FROM_TOO_LONG = "The From parameter is longer than 64 characters: it is no phone number or sender ID."
_STATUS = {revocation.REVOKED: ("UNSUBSCRIBED", UNSUBSCRIBED_EVENT),
           revocation.RESUBSCRIBED: ("SUBSCRIBED", SUBSCRIBED_EVENT)}


def _apply(conn: sqlite3.Connection, workspace_id: int, number: str, body: str,
           reading: revocation.Reading, now: str) -> list[str]:
    """The status change a revocation or a resubscription asks for, in the caller's transaction:
    the ids of the contacts it changed (none already in that state)."""
    from marketing_cli.services.contacts import consents, events

    new_status, kind = _STATUS[reading.action]
    last = conn.execute(  # the last campaign handed to the number (not a confirmation): its `unsubscribed`
        "SELECT m.id, m.campaign_id FROM sms_messages m JOIN sms_campaigns c ON c.id = m.campaign_id"
        " WHERE c.workspace_id = ? AND m.phone = ? AND m.handed_at IS NOT NULL AND c.purpose IS NULL"
        " ORDER BY m.handed_at DESC, m.id DESC LIMIT 1", (workspace_id, number)).fetchone()
    changed = [r[0] for r in conn.execute(
        "UPDATE contacts SET sms_status = ?, updated_at = ? WHERE workspace_id = ? AND phone = ?"
        " AND COALESCE(sms_status, 'SUBSCRIBED') != ? RETURNING id",
        (new_status, now, workspace_id, number, new_status)).fetchall()]
    source = consents.Source("sms_keyword", message_text=body, campaign_id=last["campaign_id"] if last else None)
    for contact_id in sorted(changed):
        events.append_event(conn, workspace_id, contact_id, kind,
                            {"channel": "sms", "reply": body.strip()[:160], "rule": reading.rule,
                             "campaign_id": last["campaign_id"] if last else None})
        consents.append(conn, workspace_id, contact_id, [("sms", new_status)], source, at=now)  # the ledger's row
    if new_status == "UNSUBSCRIBED" and changed and last is not None:
        conn.execute("UPDATE sms_messages SET unsubscribed_at = ? WHERE id = ? AND unsubscribed_at IS NULL",
                     (now, last["id"]))
    return sorted(changed)


def receive(conn: sqlite3.Connection, workspace_id: int, params: dict[str, str]) -> dict[str, Any]:
    """A verified inbound reply (Twilio's `From` and `Body`): read, acted on and kept; the kept
    reply as `GET /v1/sms-replies` lists it."""
    body = params.get("Body") or ""
    number = (params.get("From") or "").strip()
    if len(number) > MAX_FROM:
        raise MktError(400, FROM_TOO_LONG)
    reading = revocation.read_reply(body)
    with transaction(conn):
        now = clock.now()
        changed = _apply(conn, workspace_id, number, body, reading, now) if reading.action in _STATUS else []
        first = None if changed else conn.execute(
            "SELECT id FROM contacts WHERE workspace_id = ? AND phone = ? ORDER BY id LIMIT 1",
            (workspace_id, number)).fetchone()
        contact_id = changed[0] if changed else first[0] if first else None
        confirmation_id = None
        if reading.action == revocation.REVOKED and changed:
            confirmation_id = confirmation.queue_confirmation(conn, workspace_id, changed[0], number, reading.language)
        reply_id = conn.execute(
            "INSERT INTO sms_replies (workspace_id, contact_id, phone, body, action, rule, changed, confirmation_id,"
            " received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (workspace_id, contact_id, number, body, reading.action, reading.rule, len(changed), confirmation_id,
             now)).lastrowid
        return _view(_rows(conn, "r.id = ?", [reply_id])[0])


_SELECT = ("SELECT r.*, m.status AS confirmation_status, m.handed_at AS confirmation_handed_at FROM sms_replies r"
           " LEFT JOIN sms_messages m ON m.id = r.confirmation_id")


def _rows(conn: sqlite3.Connection, where: str, params: list[Any], tail: str = "") -> list[sqlite3.Row]:
    return conn.execute(f"{_SELECT} WHERE {where}{tail}", params).fetchall()


def _view(r: sqlite3.Row) -> dict[str, Any]:
    confirmation = None if r["confirmation_id"] is None else {
        "message_id": r["confirmation_id"], "status": r["confirmation_status"],
        "handed_at": r["confirmation_handed_at"]}
    return {"id": r["id"], "contact_id": r["contact_id"], "phone": r["phone"], "body": r["body"],
            "action": r["action"], "rule": r["rule"], "contacts_changed": r["changed"],
            "confirmation": confirmation, "received_at": r["received_at"]}


def list_replies(conn: sqlite3.Connection, workspace_id: int, *, action: Any = None, page: Any = None,
                 limit: Any = None) -> dict[str, Any]:
    """GET /v1/sms-replies: newest first, optionally of one action; page and limit read as the
    SMS campaign list reads them (limit 1-100, default 50)."""
    from marketing_cli.services.sms.campaigns import _page_arg

    where, params = "r.workspace_id = ?", [workspace_id]
    if action is not None and str(action) != "":
        if not isinstance(action, str) or action.strip().lower() not in revocation.ACTIONS:
            raise MktError(400, INVALID_ACTION.format(value=action))
        where += " AND r.action = ?"
        params.append(action.strip().lower())
    page_number = min(_page_arg(page, 1, None), 10**12)
    per_page = _page_arg(limit, DEFAULT_LIMIT, MAX_LIMIT)
    total = conn.execute(f"SELECT COUNT(*) FROM sms_replies r WHERE {where}", params).fetchone()[0]
    rows = _rows(conn, where, [*params, per_page, (page_number - 1) * per_page], " ORDER BY r.id DESC LIMIT ? OFFSET ?")
    return {"replies": [_view(r) for r in rows],
            "pagination": {"current_page": page_number, "per_page": per_page,
                           "total_pages": math.ceil(total / per_page), "total_count": total}}

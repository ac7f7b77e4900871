"""Twilio's webhooks (CONTRACT section 8): signed delivery reports (StatusCallback) and
inbound replies (STOP and START).

Both are answered without an API key, below the workspace's tracking base URL. The
workspace is found by `AccountSid`; the `X-Twilio-Signature` header must be Twilio's
base64 HMAC-SHA1, keyed with that workspace's auth token, of the URL built from the
tracking base URL followed by every POST parameter sorted by name (name then value).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.sms import ledger
from marketing_cli.storage.db import transaction

INVALID_SIGNATURE = "Invalid Twilio signature."
STATUS_PATH = "/webhooks/twilio/status"
INBOUND_PATH = "/webhooks/twilio/inbound"
STOP_WORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"})
START_WORDS = frozenset({"START", "UNSTOP"})
UNSUBSCRIBED_EVENT = "CONTACT_UNSUBSCRIBED"   # as an email unsubscribe logs it, with channel "sms"
SUBSCRIBED_EVENT = "CONTACT_SUBSCRIBED"

# How far along each Twilio status is: a callback only ever moves a message forward.
_RANK = {"queued": 1, "accepted": 1, "scheduled": 1, "sending": 1, "sent": 2,
         "delivered": 3, "undelivered": 3, "failed": 3}


def signature(token: str, url: str, params: dict[str, str]) -> str:
    """Twilio's request signature: base64(HMAC-SHA1(token, url + name1 + value1 + ...))."""
    data = url + "".join(name + params[name] for name in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()


def verify(conn: sqlite3.Connection, path: str, params: dict[str, str], given: str | None,
           accounts: dict[str, list[tuple[int, str, str]]] | None = None) -> int:
    """The workspace whose Twilio account (AccountSid) signed the request, else 403.

    `accounts` (AccountSid -> its workspaces' ids, tokens and base URLs) may be shared by the
    requests of one batch, so that the settings are read once per batch."""
    from marketing_cli.services.account.workspaces import tracking_base_url

    account = params.get("AccountSid")
    # Twilio never sends U+0000 (and PostgreSQL's text cannot hold it): such a request is
    # refused as one Twilio did not sign, before any of its values reaches a query.
    if given and account and not any("\x00" in name or "\x00" in value for name, value in params.items()):
        candidates = accounts.get(account) if accounts is not None else None
        if candidates is None:
            rows = conn.execute("SELECT workspace_id, auth_token FROM sms_provider_settings"
                                " WHERE provider = 'twilio' AND account_sid = ? ORDER BY workspace_id",
                                (account,)).fetchall()
            candidates = [(int(ws), token, tracking_base_url(conn, ws)) for ws, token in rows]
            if accounts is not None:
                accounts[account] = candidates
        for workspace_id, token, base in candidates:
            expected = signature(token, base + path, params)
            if hmac.compare_digest(expected.encode(), given.strip().encode()):
                return workspace_id
    raise MktError(403, INVALID_SIGNATURE)


def _rank(row: sqlite3.Row) -> int:
    if row["status"] in ("delivered", "undelivered", "failed"):
        return 3
    return 2 if row["carrier_at"] else 1


def twilio_status(conn: sqlite3.Connection, params: dict[str, str], given_signature: str | None) -> dict[str, Any]:
    """A delivery report: move the message forward (never back), refund a failure the carrier
    never accepted. Answers what happened ({"changed": bool}); unknown messages change nothing."""
    [result] = twilio_status_batch(conn, [(params, given_signature)])
    if isinstance(result, MktError):
        raise result
    return result


def twilio_status_batch(conn: sqlite3.Connection,
                        reports: list[tuple[dict[str, str], str | None]]) -> list[dict[str, Any] | MktError]:
    """Several delivery reports (params, signature), in order, in ONE transaction: what
    `twilio_status` answers for each, or the MktError it would raise (a bad signature).

    The HTTP face gathers the reports that arrive while a batch is being written into the
    next batch (api/twilio.py), so that a burst of reports costs one commit per batch, not
    one per report. Each report is checked and applied exactly as `twilio_status` does."""
    accounts: dict[str, list[tuple[int, str, str]]] = {}
    verified: list[int | MktError] = []
    for params, given in reports:
        try:
            verified.append(verify(conn, STATUS_PATH, params, given, accounts))
        except MktError as exc:
            verified.append(exc)
    with transaction(conn):
        now = clock.now()
        return [ws if isinstance(ws, MktError) else _apply_status(conn, ws, params, now)
                for ws, (params, _) in zip(verified, reports, strict=True)]


def _apply_status(conn: sqlite3.Connection, workspace_id: int, params: dict[str, str], now: str) -> dict[str, Any]:
    """One verified report, inside the caller's transaction (`now`: the transaction's time)."""
    status = (params.get("MessageStatus") or "").strip().lower()
    new_rank = _RANK.get(status)
    sid = params.get("MessageSid") or ""
    if new_rank is None or not sid:
        return {"changed": False}
    row = conn.execute(
        "SELECT m.*, c.workspace_id, c.name AS campaign_name FROM sms_messages m"
        " JOIN sms_campaigns c ON c.id = m.campaign_id"
        " WHERE m.provider_ref = ? AND m.provider = 'twilio' AND c.workspace_id = ?", (sid, workspace_id)).fetchone()
    if row is None or row["handed_at"] is None or new_rank <= _rank(row):
        return {"changed": False}
    if new_rank == 2:
        conn.execute("UPDATE sms_messages SET carrier_at = ? WHERE id = ?", (now, row["id"]))
    elif status == "delivered":
        conn.execute("UPDATE sms_messages SET status = 'delivered', delivered_at = ?,"
                     " carrier_at = COALESCE(carrier_at, ?) WHERE id = ?", (now, now, row["id"]))
    else:
        code = params.get("ErrorCode") or None
        conn.execute("UPDATE sms_messages SET status = ?, failed_at = ?, error_code = COALESCE(?, error_code)"
                     " WHERE id = ?", (status, now, code, row["id"]))
        if row["carrier_at"] is None and row["price_units"] > 0:  # the carrier never took it: not charged
            ledger.append(conn, workspace_id, "refund", ledger.from_units(row["price_units"]),
                              f"Campaign '{row['campaign_name']}': message {row['id']} {status} before a carrier"
                              " accepted it", campaign_id=row["campaign_id"])
    return {"changed": True}


def twilio_inbound(conn: sqlite3.Connection, params: dict[str, str], given_signature: str | None) -> dict[str, Any]:
    """A reply: STOP words set the sender's sms_status to UNSUBSCRIBED (and count in `unsubscribed`
    of the last campaign sent to the number), START words set it back to SUBSCRIBED. Other
    replies, and numbers of no contact, change nothing. Answers {"action": ..., "contacts": n}."""
    from marketing_cli.services.contacts import consents, events

    workspace_id = verify(conn, INBOUND_PATH, params, given_signature)
    word = (params.get("Body") or "").strip().upper()
    number = (params.get("From") or "").strip()
    if word in STOP_WORDS:
        action, new_status, kind = "unsubscribed", "UNSUBSCRIBED", UNSUBSCRIBED_EVENT
    elif word in START_WORDS:
        action, new_status, kind = "subscribed", "SUBSCRIBED", SUBSCRIBED_EVENT
    else:
        return {"action": None, "contacts": 0}
    with transaction(conn):
        now = clock.now()
        last = conn.execute(
            "SELECT m.id, m.campaign_id FROM sms_messages m JOIN sms_campaigns c ON c.id = m.campaign_id"
            " WHERE c.workspace_id = ? AND m.phone = ? AND m.handed_at IS NOT NULL"
            " ORDER BY m.handed_at DESC, m.id DESC LIMIT 1", (workspace_id, number)).fetchone()
        changed = conn.execute(
            "UPDATE contacts SET sms_status = ?, updated_at = ? WHERE workspace_id = ? AND phone = ?"
            " AND COALESCE(sms_status, 'SUBSCRIBED') != ? RETURNING id",
            (new_status, now, workspace_id, number, new_status)).fetchall()
        source = consents.Source("sms_keyword", message_text=params.get("Body") or "",
                                 campaign_id=last["campaign_id"] if last else None)
        for (contact_id,) in changed:
            events.append_event(conn, workspace_id, contact_id, kind,
                                {"channel": "sms", "reply": word, "campaign_id": last["campaign_id"] if last else None})
            consents.append(conn, workspace_id, contact_id, [("sms", new_status)], source, at=now)
        if new_status == "UNSUBSCRIBED" and changed and last is not None:
            conn.execute("UPDATE sms_messages SET unsubscribed_at = ? WHERE id = ? AND unsubscribed_at IS NULL",
                         (now, last["id"]))
    return {"action": action, "contacts": len(changed)}

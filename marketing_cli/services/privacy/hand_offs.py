"""An erased person's email and SMS messages: dropped, stripped, and the ones in a worker's hands.

Inside the erase's transaction, each of the person's message rows is locked (FOR UPDATE on
PostgreSQL, where senders claim rows without the writers' lock: a claim in progress is waited
for, and the claims that follow pass the locked rows over) and then, by state:

- not yet claimed (email `queued`, SMS `pending` or `held` by quiet hours): dropped, status
  `cancelled`; an SMS is refunded (one ledger entry per campaign), as a campaign's cancel does;
- claimed by a worker that died (`sending`, its claim expired): cancelled too, so no other
  worker takes it over and sends it again; its hourly and monthly email reservation is given
  back (an SMS may have reached the provider before its worker died: charged, as a cancel
  leaves it);
- claimed by a live worker (`sending`, its claim renewed): the worker holds it in memory and is
  handing it to the relay or the provider right now; nothing in the database can stop that.
  It is stripped like the others but left to its worker, whose answer is recorded as usual
  (statistics and reservations stay right), and the erase returns only once that answer is
  in (`wait_for_hand_offs`, after the commit: a round takes well under a second; at most
  WAIT_SECONDS, normally never reached, as a worker that dies stops renewing its claim);
- anything else (sent, delivered, failed, bounced, cancelled ...): kept for the counts.

Every row is then stripped of the person, never deleted, because statistics read them (an SMS
campaign's counts and clicks, a send's failure summary): the email address, mail domain,
phone number, rendered SMS body, time zone, the relay's or provider's error text (which may
quote the address, also in the campaign's failure summary) and the quiet-hours rule (a state) go; contact_id becomes NULL (SMS:
`erased-<message id>`, the column being part of a unique key). Short links of the person's
texts stop working (sms_links deleted) and a click's URL is replaced unless the campaign's
message shows it as written (a URL rendered with merge tags carries the person's values).
The outbox provider's copies (sms_outbox) are deleted.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter

from marketing_cli.kernel import clock
from marketing_cli.kernel.addresses import wire_address
from marketing_cli.services.account import billing
from marketing_cli.services.sms import ledger
from marketing_cli.storage import dialect
from marketing_cli.storage.db import marks, transaction

log = logging.getLogger("mkt.privacy")

WAIT_SECONDS = 60.0  # at most, for a worker's answer about a message it holds (see the docstring)
POLL_SECONDS = 0.05
ERASED_TEXT = "(erased)"
ERASED_URL = "(a personalised link of an erased recipient)"
REFUND_REASON = "Campaign '{name}': {count:,} message(s) never handed to a provider: the recipient was erased"


def _live(row: sqlite3.Row, now: str) -> bool:
    """Claimed by a worker that is alive (its claim is renewed with its job's lease)."""
    return row["status"] == "sending" and row["claim_expires_at"] is not None and row["claim_expires_at"] >= now


# --- email ---------------------------------------------------------------------------------

def erase_email(conn: sqlite3.Connection, workspace_id: int, contact_id: str, email: str | None) -> list[int]:
    """The person's email messages (in the erase's transaction); the ids a live worker holds."""
    rows = conn.execute("SELECT id, campaign_id, status, claim_expires_at, reserved_hour FROM email_messages"
                        f" WHERE contact_id = ? ORDER BY id{dialect.for_update(conn)}", (contact_id,)).fetchall()
    if not rows:
        return []
    now = clock.now()
    held = [r["id"] for r in rows if _live(r, now)]
    dropped = [r for r in rows if r["status"] == "queued" or (r["status"] == "sending" and r["id"] not in held)]
    _give_back(conn, workspace_id, Counter(r["reserved_hour"] for r in dropped if r["reserved_hour"]))
    if dropped:
        ids = [r["id"] for r in dropped]
        conn.execute(f"UPDATE email_messages SET status = 'cancelled', reserved_hour = NULL WHERE id IN ({marks(ids)})",
                     ids)
    ids = [r["id"] for r in rows]
    quoted = [email or "", _wire(email)]
    conn.execute("UPDATE email_messages SET contact_id = NULL, email = '', domain = '', zone = NULL, zone_source = NULL,"
                 " due_at = NULL, failure_reason = replace(replace(failure_reason, ?, ?), ?, ?)"
                 f" WHERE id IN ({marks(ids)})", (quoted[0], ERASED_TEXT, quoted[1], ERASED_TEXT, *ids))
    # a sent campaign's failure summary (services/delivery/sender.py failure_summary) quotes the reasons
    campaigns = sorted({r["campaign_id"] for r in rows})
    conn.execute("UPDATE campaigns SET status_detail = replace(replace(status_detail, ?, ?), ?, ?)"
                 f" WHERE id IN ({marks(campaigns)}) AND status_detail IS NOT NULL",
                 (quoted[0], ERASED_TEXT, quoted[1], ERASED_TEXT, *campaigns))
    return held


def _wire(email: str | None) -> str:
    """The address as the relay saw it (the domain in IDNA form), as an error text may quote it."""
    try:
        return wire_address(email or "")
    except ValueError:
        return email or ""


def _give_back(conn: sqlite3.Connection, workspace_id: int, per_hour: Counter[str]) -> None:
    """Dropped messages' allowance reservations, given back: each hour's month, then the hour,
    newest first (the sender's lock order, services/delivery/sender.py)."""
    for hour in sorted(per_hour, reverse=True):
        billing.settle(conn, workspace_id, "monthly_emails", hour[:7], released=per_hour[hour])
        billing.settle(conn, workspace_id, "hourly_emails", hour, released=per_hour[hour])


# --- SMS -----------------------------------------------------------------------------------

def erase_sms(conn: sqlite3.Connection, workspace_id: int, contact_id: str) -> list[int]:
    """The person's SMS messages (in the erase's transaction); the ids a live worker holds.
    Found through each campaign's (campaign_id, contact_id) key: one probe per campaign."""
    rows = conn.execute(
        "SELECT m.id, m.campaign_id, m.status, m.claim_expires_at, m.price_units FROM sms_messages m"
        " WHERE m.campaign_id IN (SELECT id FROM sms_campaigns WHERE workspace_id = ?) AND m.contact_id = ?"
        f" ORDER BY m.id{dialect.for_update(conn)}", (workspace_id, contact_id)).fetchall()
    if not rows:
        return []
    now = clock.now()
    held = [r["id"] for r in rows if _live(r, now)]
    unsent = [r for r in rows if r["status"] in ("pending", "held")]
    dropped = unsent + [r for r in rows if r["status"] == "sending" and r["id"] not in held]
    if dropped:
        ids = [r["id"] for r in dropped]
        conn.execute(f"UPDATE sms_messages SET status = 'cancelled' WHERE id IN ({marks(ids)})", ids)
    _refund(conn, workspace_id, unsent)
    ids = [r["id"] for r in rows]
    conn.execute("UPDATE sms_messages SET contact_id = 'erased-' || CAST(id AS TEXT), phone = '', body = NULL,"
                 " zone = NULL, zone_source = NULL, due_at = NULL, held_reason = NULL, error_message = NULL"
                 f" WHERE id IN ({marks(ids)})", ids)
    conn.execute(f"DELETE FROM sms_links WHERE message_id IN ({marks(ids)})", ids)
    conn.execute(f"DELETE FROM sms_outbox WHERE message_id IN ({marks(ids)})", ids)
    conn.execute(f"UPDATE sms_clicks SET url = ? WHERE message_id IN ({marks(ids)}) AND NOT EXISTS"
                 " (SELECT 1 FROM sms_messages m JOIN sms_campaigns c ON c.id = m.campaign_id"
                 "  WHERE m.id = sms_clicks.message_id AND instr(c.message, sms_clicks.url) > 0)", (ERASED_URL, *ids))
    return held


def _refund(conn: sqlite3.Connection, workspace_id: int, unsent: list[sqlite3.Row]) -> None:
    """One refund per campaign for the messages never handed over, as a cancel refunds them."""
    units: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for r in unsent:
        units[r["campaign_id"]] += r["price_units"]
        count[r["campaign_id"]] += 1
    for campaign_id in sorted(units):
        if units[campaign_id] <= 0:
            continue
        name = conn.execute("SELECT name FROM sms_campaigns WHERE id = ?", (campaign_id,)).fetchone()["name"]
        ledger.append(conn, workspace_id, "refund", ledger.from_units(units[campaign_id]),
                      REFUND_REASON.format(name=name, count=count[campaign_id]), campaign_id=campaign_id)


# --- the messages in a worker's hands -------------------------------------------------------

def wait_for_hand_offs(conn: sqlite3.Connection, workspace_id: int, email_ids: list[int], sms_ids: list[int],
                       *, timeout: float = WAIT_SECONDS) -> None:
    """After the erase's commit: wait until the workers holding these messages have recorded
    their answers, then cancel any whose worker died meanwhile (its claim expired)."""
    deadline = time.monotonic() + timeout
    tables = (("email_messages", email_ids), ("sms_messages", sms_ids))
    while any(ids for _, ids in tables):
        now = clock.now()
        tables = tuple((table, [r[0] for r in conn.execute(  # table: one of two names of ours
            f"SELECT id FROM {table} WHERE id IN ({marks(ids)}) AND status = 'sending'"
            " AND claim_expires_at IS NOT NULL AND claim_expires_at >= ?", (*ids, now))] if ids else [])
            for table, ids in tables)
        if not any(ids for _, ids in tables):
            break
        if time.monotonic() >= deadline:
            log.warning("erase: %d message(s) still in a worker's hands after %.0f s",
                        sum(len(ids) for _, ids in tables), timeout)
            return
        time.sleep(POLL_SECONDS)
    _cancel_abandoned(conn, workspace_id, email_ids, sms_ids)


def _cancel_abandoned(conn: sqlite3.Connection, workspace_id: int, email_ids: list[int], sms_ids: list[int]) -> None:
    """Messages still `sending` once their worker's claim expired: it died holding them."""
    if not email_ids and not sms_ids:
        return
    with transaction(conn):
        now = clock.now()
        expired = " AND status = 'sending' AND (claim_expires_at IS NULL OR claim_expires_at < ?)"
        if email_ids:
            rows = conn.execute(f"SELECT id, reserved_hour FROM email_messages WHERE id IN ({marks(email_ids)}){expired}"
                                f"{dialect.for_update(conn)}", (*email_ids, now)).fetchall()
            _give_back(conn, workspace_id, Counter(r["reserved_hour"] for r in rows if r["reserved_hour"]))
            ids = [r["id"] for r in rows]
            if ids:
                conn.execute(f"UPDATE email_messages SET status = 'cancelled', reserved_hour = NULL"
                             f" WHERE id IN ({marks(ids)})", ids)
        if sms_ids:
            conn.execute(f"UPDATE sms_messages SET status = 'cancelled' WHERE id IN ({marks(sms_ids)}){expired}",
                         (*sms_ids, now))

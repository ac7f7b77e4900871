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
- claimed by a live worker (`sending`, its claim renewed): the worker holds it in memory.
  An email is being handed to the relay right now (a round is a few messages): it is stripped
  like the others but left to its worker, whose answer is recorded as usual (statistics and
  reservations stay right), and the erase returns once that answer is in. A text may wait its
  turn in a batch of thousands that a worker posts to the provider one by one: its row is
  stripped (its number gone), the claim's next renewal tells the worker (services/sms/
  handoff.py keep_claimed), which then skips it, and the erase returns after that renewal, and
  cancels it (`wait_for_hand_offs`, after the commit; a renewal comes every third of the job's
  lease, 10 s by default; at most WAIT_SECONDS);
- anything else (sent, delivered, failed, bounced, cancelled ...): kept for the counts.

Every row is then stripped of the person, never deleted, because statistics read them (an SMS
campaign's counts and clicks, a send's failure summary): the email address, mail domain,
phone number, rendered SMS body, time zone, the relay's or provider's error text (which may
quote the address, also in the campaign's failure summary) and the quiet-hours rule (a state)
go; contact_id becomes NULL (SMS: `erased-<message id>`, the column being part of a unique
key). Short links of the person's
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

WAIT_SECONDS = 120.0  # at most, for a worker holding a message (see the docstring): a lease renewal
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
    conn.execute("UPDATE email_messages SET contact_id = NULL, email = '', domain = '', zone = NULL,"
                 " zone_source = NULL, due_at = NULL, failure_reason = replace(replace(failure_reason, ?, ?), ?, ?)"
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

def erase_sms(conn: sqlite3.Connection, workspace_id: int, contact_id: str) -> list[tuple[int, str]]:
    """The person's SMS messages (in the erase's transaction); (id, claim expiry) of those a live
    worker holds. Found through each campaign's (campaign_id, contact_id) key: one probe per campaign."""
    rows = conn.execute(
        "SELECT m.id, m.campaign_id, m.status, m.claim_expires_at, m.price_units FROM sms_messages m"
        " WHERE m.campaign_id IN (SELECT id FROM sms_campaigns WHERE workspace_id = ?) AND m.contact_id = ?"
        f" ORDER BY m.id{dialect.for_update(conn)}", (workspace_id, contact_id)).fetchall()
    if not rows:
        return []
    now = clock.now()
    held = [(r["id"], r["claim_expires_at"]) for r in rows if _live(r, now)]
    unsent = [r for r in rows if r["status"] in ("pending", "held")]
    dropped = unsent + [r for r in rows if r["status"] == "sending" and not _live(r, now)]
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

def wait_for_hand_offs(conn: sqlite3.Connection, workspace_id: int, email_ids: list[int],
                       sms_held: list[tuple[int, str]], *, timeout: float = WAIT_SECONDS) -> None:
    """After the erase's commit, for the messages live workers held then: an email's worker is
    handing it over now (a round is a few messages): wait for its answer. A text may wait its
    turn in a batch of thousands (services/sms/handoff.py): wait for the claim's next renewal
    (its expiry moves past the one the erase read), which tells the worker to skip it, or for
    its answer. Then the texts left unsent, and any message whose worker died, are cancelled."""
    deadline = time.monotonic() + timeout
    email, sms = list(email_ids), list(sms_held)
    while email or sms:
        now = clock.now()
        if email:
            email = [r[0] for r in conn.execute(
                f"SELECT id FROM email_messages WHERE id IN ({marks(email)}) AND status = 'sending'"
                " AND claim_expires_at IS NOT NULL AND claim_expires_at >= ?", (*email, now))]
        if sms:
            seen = dict(sms)
            sms = [(r[0], seen[r[0]]) for r in conn.execute(
                f"SELECT id, claim_expires_at FROM sms_messages WHERE id IN ({marks(list(seen))})"
                " AND status = 'sending' AND claim_expires_at IS NOT NULL AND claim_expires_at >= ?",
                (*seen, now)) if r[1] <= seen[r[0]]]  # (not renewed since the erase)
        if not email and not sms:
            break
        if time.monotonic() >= deadline:
            log.warning("erase: %d message(s) still in a worker's hands after %.0f s", len(email) + len(sms), timeout)
            return
        time.sleep(POLL_SECONDS)
    _cancel_abandoned(conn, workspace_id, email_ids, [message_id for message_id, _ in sms_held])


def _cancel_abandoned(conn: sqlite3.Connection, workspace_id: int, email_ids: list[int], sms_ids: list[int]) -> None:
    """Emails still `sending` once their worker's claim expired (it died holding them), and the
    texts not posted: their worker skipped them, or died."""
    if not email_ids and not sms_ids:
        return
    with transaction(conn):
        now = clock.now()
        expired = " AND status = 'sending' AND (claim_expires_at IS NULL OR claim_expires_at < ?)"
        if email_ids:
            rows = conn.execute(f"SELECT id, reserved_hour FROM email_messages WHERE id IN ({marks(email_ids)})"
                                f"{expired}{dialect.for_update(conn)}", (*email_ids, now)).fetchall()
            _give_back(conn, workspace_id, Counter(r["reserved_hour"] for r in rows if r["reserved_hour"]))
            ids = [r["id"] for r in rows]
            if ids:
                conn.execute(f"UPDATE email_messages SET status = 'cancelled', reserved_hour = NULL"
                             f" WHERE id IN ({marks(ids)})", ids)
        if sms_ids:  # a text the worker skipped, or whose worker died: never posted (or may have been: charged)
            conn.execute(f"UPDATE sms_messages SET status = 'cancelled' WHERE id IN ({marks(sms_ids)})"
                         " AND status IN ('sending', 'pending', 'held')", sms_ids)

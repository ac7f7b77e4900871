"""Expansion's second phase (the `sms.expand` job, expansion.py): pending messages handed
to the workspace's provider (services/sms/providers.py), and its receipts recorded.

Each claimed batch goes through the quiet-hours gate first (gate.py): messages that may not
be texted now wait as 'held', and hand_off answers the instant the first may go (the job is
queued again for it). Several jobs may hand one campaign's messages over at once (the
sms.send_helper jobs): each batch is claimed under the job run's token, with an expiry the
job's lease renewer keeps pushing forward (keep_claimed), and recorded only where the rows
still carry that token. A message the provider refuses is refunded. An automation's SMS
steps hand their messages over through hand_off too (services/automations/sms.py), and so
do revocation confirmations (confirmation.py), which skip the quiet-hours gate.

A revocation (a STOP reply, any change of a contact's sms_status away from SUBSCRIBED, a
deleted contact) takes effect for every message not yet handed over, within RECHECK_SECONDS
(docs/privacy.md "Revoking consent by text"):
- each claim re-reads the contacts of the rows it has just claimed, in its own transaction
  (`_drop_revoked`: one statement over the batch, by the claim's token): rows of contacts no
  longer SMS-subscribed are cancelled, never handed over, and refunded;
- a network provider hands a claimed batch over one request at a time, which may take
  minutes for a large batch: before each request it asks a `RevocationWatch`, which re-reads
  the batch's contacts in one statement at most every RECHECK_SECONDS (never once per
  message); a message whose contact revoked since the claim is put back in line untouched
  (a held receipt), and the next claim cancels and refunds it.
Confirmations are exempt: they go to the contacts who have just revoked.

An erase goes further, so that nothing goes out after it answers: the erase strips the claimed
row of its number, the next renewal of the claim (the lease renewer's one statement for the
batch, keep_claimed) reports it, the provider skips it, and the erase answers only after that
renewal.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms.batches import batch_pause, batch_size, still_queued
from marketing_cli.storage import dialect
from marketing_cli.storage.db import marks, transaction
from marketing_cli.storage.postgres.errors import retry_conflicts

log = logging.getLogger("mkt.sms")

RECORD_BATCH = 500  # receipts written by one statement (3 parameters each)
RECHECK_SECONDS = 0.25  # how stale a network batch's view of its contacts' revocations may be
REVOKED = "Not sent: the contact revoked consent to texts before it was handed over."
CONFIRMATION = "confirmation"  # sms_campaigns.purpose of revocation confirmations (confirmation.py)
# The claimed rows (by token) whose contact is gone or no longer SMS-subscribed.
_REVOKED_ROWS = ("claim_token = ? AND status = 'sending' AND NOT EXISTS (SELECT 1 FROM contacts c"
                 " WHERE c.id = sms_messages.contact_id AND COALESCE(c.sms_status, 'SUBSCRIBED') = 'SUBSCRIBED')")

MINE = "claim_token = ? AND status = 'sending'"  # the rows of one claim (gate.hold_closed's `where`)
NOTHING: list[Any] = []  # (identity: the claim found no message, as against a batch all held)


def keep_claimed(conn: sqlite3.Connection, token: str, until: str, erased: set[int] | None = None) -> None:
    """The lease renewer's: the messages claimed under `token` stay claimed until `until`. The
    same statement tells which of them an erase stripped of their number since (their recipient
    was erased, services/privacy/hand_offs.py): added to `erased` before it commits, so once the
    erase sees this renewal, the provider posts none of them (TwilioProvider._post)."""
    with dialect.row_claim(conn):  # (rows of ours: no need to wait for the write lock)
        renewed = conn.execute("UPDATE sms_messages SET claim_expires_at = ? WHERE claim_token = ?"
                               " AND status = 'sending' RETURNING id, phone", (until, token)).fetchall()
        if erased is not None:
            erased.update(r[0] for r in renewed if r[1] == "")


def _claim_batch(conn: sqlite3.Connection, cid: str, pick: str, size: int, claim: jobs.Run) -> int:
    """Move up to `size` messages to 'sending' under `claim`'s token, in the caller's transaction:
    first those whose claim expired (their worker died or was paused past its lease) or that an
    earlier run of this job claimed (jobs.Run.earlier), marked uncertain (they may have been
    handed over), then pending ones. PostgreSQL passes over rows
    another worker is claiming (FOR UPDATE SKIP LOCKED)."""
    lock = dialect.skip_locked(conn)
    params = {"cid": cid, "size": size, "now": clock.now(), "token": claim.token, "until": claim.expires(),
              "earlier": claim.earlier}
    taken = conn.execute(
        "UPDATE sms_messages SET claim_token = :token, claim_expires_at = :until, uncertain = 1 WHERE id IN"
        " (SELECT id FROM sms_messages WHERE campaign_id = :cid AND status = 'sending'"
        " AND (claim_expires_at IS NULL OR claim_expires_at < :now"
        f" OR (claim_token LIKE :earlier AND claim_token <> :token)) ORDER BY id LIMIT :size{lock})", params).rowcount
    if taken:
        log.warning("SMS campaign %s: %d message(s) of a worker whose claim expired taken over (recorded uncertain)",
                    cid, taken)
    if taken >= size:
        return taken
    return taken + conn.execute(
        "UPDATE sms_messages SET status = 'sending', claim_token = :token, claim_expires_at = :until WHERE id IN"
        f" (SELECT id FROM sms_messages WHERE campaign_id = :cid AND status = 'pending'{pick}{lock})",
        {**params, "size": size - taken}).rowcount


def _owned(conn: sqlite3.Connection, token: str, ids: list[int]) -> set[int]:
    """Which of `ids` still carry our claim (locked till the recording's transaction ends)."""
    if not ids:
        return set()
    return {r[0] for r in conn.execute(
        f"SELECT id FROM sms_messages WHERE id IN ({marks(ids)}) AND claim_token = ?"
        f" AND status = 'sending'{dialect.for_update(conn)}", (*ids, token))}


def _drop_revoked(conn: sqlite3.Connection, campaign: sqlite3.Row, token: str) -> int:
    """In the claim's transaction: cancel the claimed rows whose contact revoked (or is gone),
    and refund them in one ledger entry; how many. Confirmations are never dropped."""
    if campaign["purpose"] == CONFIRMATION:
        return 0
    units = [r[0] for r in conn.execute(f"UPDATE sms_messages SET status = 'cancelled', error_message = ?"
                                        f" WHERE {_REVOKED_ROWS} RETURNING price_units", (REVOKED, token))]
    if sum(units) > 0:
        ledger.append(conn, campaign["workspace_id"], "refund", ledger.from_units(sum(units)),
                      f"Campaign '{campaign['name']}': {len(units):,} messages to contacts who revoked consent"
                      " before they were handed over", campaign_id=campaign["id"])
    return len(units)


class RevocationWatch:
    """Which messages of a claimed batch a network provider must not hand over any more: their
    contact revoked since the claim. The batch's rows are re-read in ONE statement at most every
    RECHECK_SECONDS, by whichever of the provider's threads asks first once the last answer is
    that old (so a message is never handed over later than RECHECK_SECONDS plus one statement
    after a revocation committed). `lock` is the one the provider's threads share the job's
    connection with (the pacer's)."""

    def __init__(self, conn: sqlite3.Connection, token: str, lock: Any, clock: Any = time.monotonic) -> None:
        self.conn, self.token, self.lock, self.clock = conn, token, lock, clock
        self.read_at = clock()  # the claim has just read them
        self.revoked: frozenset[int] = frozenset()

    def stopped(self, message_id: int) -> bool:
        with self.lock:
            now = self.clock()
            if now - self.read_at >= RECHECK_SECONDS:
                self.read_at = now  # (taken before the statement: its answer is at least this fresh)
                self.revoked = frozenset(r[0] for r in self.conn.execute(
                    f"SELECT id FROM sms_messages WHERE {_REVOKED_ROWS}", (self.token,)))
        return message_id in self.revoked


def hand_off(conn: sqlite3.Connection, campaign: sqlite3.Row, claim: jobs.Run | None = None) -> bool | str:
    """Phase 2: pending messages to the provider, a batch at a time, each batch through the
    quiet-hours gate (gate.py) right before the provider call. False when cancelled; True when
    no message is left to claim; else the UTC instant the first held message may go.

    Several jobs may hand one campaign's messages over at once (the sms.send_helper jobs,
    on several machines): each batch is claimed under the job run's token (`claim`), with an
    expiry the job's lease renewer keeps pushing forward, and recorded only where the rows
    still carry that token (fencing: a worker paused past its claim is refused, logged)."""
    from marketing_cli.services.sms import gate
    from marketing_cli.services.sms.providers import Outgoing, get_provider

    claim = claim or jobs.current_run()
    erased: set[int] = set()  # claimed messages whose recipient was erased since (keep_claimed)
    claim.keep(lambda c, token, until: keep_claimed(c, token, until, erased))
    workspace_id, cid = campaign["workspace_id"], campaign["id"]
    gated = campaign["purpose"] != CONFIRMATION  # a confirmation is due at any hour, and at once
    provider = get_provider(conn, workspace_id) if gated else get_provider(conn, workspace_id, paced=False)
    # A local-time campaign hands over only the messages whose zone has reached the time, in
    # the order of the partial index sms_messages_due (its earliest zone first).
    pick = (" AND due_at <= :now ORDER BY due_at, id LIMIT :size" if campaign["local_time"]
            else " ORDER BY id LIMIT :size")
    sender = ledger.get_sender_id(conn, workspace_id)["sms_sender_id"] or ""
    size = batch_size()
    # Held messages whose window has opened go back in line. (A network provider's batch left
    # 'sending' by a crash is claimed again once its claim expires, marked uncertain.)
    with transaction(conn):
        gate.release_due(conn, cid)
    while True:
        if hasattr(provider, "send_claimed"):  # an in-database provider: one SQL statement per batch
            with transaction(conn):
                if not still_queued(conn, cid):
                    return False
                if _claim_batch(conn, cid, pick, size, claim) == 0:
                    return gate.next_release(conn, cid) or True
                _drop_revoked(conn, campaign, claim.token)
                if gated:
                    gate.hold_closed(conn, workspace_id, MINE, (claim.token,))
                prefix = provider.send_claimed(conn, workspace_id, cid, sender, campaign["message"], claim.token)
                conn.execute("UPDATE sms_messages SET status = 'sent', provider = ?, provider_ref = ? || CAST(id AS TEXT),"
                             " handed_at = ? WHERE claim_token = ? AND status = 'sending'",
                             (provider.name, prefix, clock.now(), claim.token))
            jobs.heartbeat(conn)
            batch_pause()
            continue

        def take() -> list[Any] | None:
            with dialect.row_claim(conn) if not provider.in_database else transaction(conn):
                if not still_queued(conn, cid):
                    return None
                if _claim_batch(conn, cid, pick, size, claim) == 0:
                    return NOTHING
                _drop_revoked(conn, campaign, claim.token)
                opened = gate.hold_closed(conn, workspace_id, MINE, (claim.token,)) if gated else gate.Gate()
                rows = conn.execute(f"SELECT id, phone, COALESCE(body, ?) AS body, segments FROM sms_messages"
                                    f" WHERE {MINE} ORDER BY id", (campaign["message"], claim.token)).fetchall()
                outgoing = [Outgoing(r["id"], cid, sender, r["phone"], r["body"], r["segments"],
                                     opened.closes_at(r["phone"])) for r in rows]
                if provider.in_database and outgoing:
                    _record(conn, provider.name, provider.send(conn, workspace_id, outgoing))
                return outgoing

        outgoing = retry_conflicts(take, f"claiming messages of SMS campaign {cid}")
        if outgoing is None:
            return False
        if outgoing is NOTHING:
            return gate.next_release(conn, cid) or True
        if not provider.in_database and outgoing:
            provider.claim = claim  # a worker paused past its claim hands nothing more over
            pacer = getattr(provider, "pacer", None)  # (a contact who revokes meanwhile gets nothing more)
            provider.watch = RevocationWatch(conn, claim.token, pacer.lock if pacer else threading.Lock()) \
                if gated else None
            provider.erased = erased  # nor a message whose recipient was erased meanwhile
            receipts = provider.send(conn, workspace_id, outgoing)
            retry_conflicts(lambda: _record_network(conn, campaign, provider.name, claim.token, receipts),
                            f"recording messages of SMS campaign {cid}")
        jobs.heartbeat(conn)
        batch_pause()


def _record_network(conn: sqlite3.Connection, campaign: sqlite3.Row, provider: str, token: str,
                    receipts: list[Any]) -> None:
    """A network provider's receipts, where the rows still carry our claim: refusals refunded."""
    cid = campaign["id"]
    with transaction(conn):
        owned = _owned(conn, token, [r.message_id for r in receipts])
        if len(owned) < len(receipts):  # paused past our claim: another worker took these; its result stands
            log.warning("SMS campaign %s: %d late acknowledgement(s) refused: their claim was taken over by another "
                        "worker", cid, len(receipts) - len(owned))
            receipts = [r for r in receipts if r.message_id in owned]
        refused = [r.message_id for r in receipts if not r.accepted and not r.held]
        count, units = conn.execute(
            f"SELECT COUNT(*), COALESCE(SUM(price_units), 0) FROM sms_messages WHERE status = 'sending'"
            f" AND id IN ({', '.join('?' * len(refused)) or 'NULL'})", refused).fetchone()
        _record(conn, provider, receipts)
        if units > 0:  # a message the provider refused is not charged
            ledger.append(conn, campaign["workspace_id"], "refund", ledger.from_units(units),
                          f"Campaign '{campaign['name']}': {count:,} messages refused by {provider}",
                          campaign_id=cid)


def _record(conn: sqlite3.Connection, provider: str, receipts: list[Any]) -> None:
    now = clock.now()
    # A message whose window closed while the provider was still trying it goes back in line:
    # the gate holds it on its next claim. Still charged once, never refunded.
    # A receipt marked uncertain (providers.Receipt: a try may have reached the provider before
    # the one recorded) leaves the message uncertain, as a dead worker's in-flight ones.
    held = [(int(getattr(r, "uncertain", False)), r.message_id) for r in receipts if r.held]
    if held:
        # (a number '' is an erased recipient's: that row is the erase's to cancel, never claimed again)
        conn.executemany("UPDATE sms_messages SET status = 'pending', uncertain = CASE WHEN ? = 1 THEN 1"
                         " ELSE uncertain END WHERE id = ? AND status = 'sending' AND phone <> ''", held)
    # The accepted ones (nearly all) in one UPDATE ... FROM a VALUES list per RECORD_BATCH: the
    # database parses and plans one statement for a batch, not one per message.
    sent = [(r.message_id, r.reference, int(getattr(r, "uncertain", False))) for r in receipts
            if not r.held and r.accepted]
    for start in range(0, len(sent), RECORD_BATCH):
        batch = sent[start:start + RECORD_BATCH]
        conn.execute(
            "UPDATE sms_messages SET status = 'sent', provider = ?, provider_ref = v.column2, handed_at = ?,"
            " failed_at = NULL, error_code = NULL, error_message = NULL,"
            " uncertain = CASE WHEN v.column3 = 1 THEN 1 ELSE sms_messages.uncertain END"
            f" FROM (VALUES {', '.join(['(?, ?, ?)'] * len(batch))}) AS v"
            " WHERE sms_messages.id = v.column1 AND sms_messages.status = 'sending'",
            (provider, now, *(x for row in batch for x in row)))
    failed = [(provider, r.reference, now, getattr(r, "code", None), r.error, int(getattr(r, "uncertain", False)),
               r.message_id) for r in receipts if not r.held and not r.accepted]
    if failed:
        conn.executemany(
            "UPDATE sms_messages SET status = 'failed', provider = ?, provider_ref = ?, handed_at = NULL, failed_at = ?,"
            " error_code = ?, error_message = ?, uncertain = CASE WHEN ? = 1 THEN 1 ELSE uncertain END"
            " WHERE id = ? AND status = 'sending'", failed)

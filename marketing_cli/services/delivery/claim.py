"""Claiming a round of an email send's messages (services/delivery/sender.py runs the rounds).

A claim moves up to a round's size of messages due now from `queued` to `sending` in one
transaction, under the send job's claim token (jobs.Run: renewed with the job's lease,
`keep_claimed`), each message reserving its share of the workspace's monthly_emails and
hourly_emails allowances in the same transaction (reservations.py). A message is marked
`sending` before it is handed over, so a runner that dies leaves its claimed messages in
`sending`; once their claim expires another worker claims them again, marked uncertain
(they may have been handed over): the crash window of sender.py's docstring. On PostgreSQL
rows another worker is claiming are passed over (FOR UPDATE SKIP LOCKED), in a READ
COMMITTED transaction without the advisory write lock (dialect.row_claim), so several
workers claim from one campaign's queue at once.
"""

from __future__ import annotations

import logging
import sqlite3

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.delivery.reservations import give_back, reserve
from marketing_cli.services.delivery.shaping import Shaper
from marketing_cli.services.delivery.warmup_gate import Gate
from marketing_cli.storage import dialect
from marketing_cli.storage.db import marks
from marketing_cli.storage.postgres.errors import retry_conflicts

NOT_SENDING = "not SENDING"  # `claim_round`'s answer for a campaign no longer SENDING

log = logging.getLogger("mkt.email.send")

_COLUMNS = ("SELECT m.id, m.variant_id, m.email, m.attempts, m.status, m.reserved_hour, m.lane, m.deferred_since,"
            " c.email AS contact_email,"
            " c.phone, c.data, c.status AS contact_status"
            " FROM email_messages m LEFT JOIN contacts c ON c.id = m.contact_id")
# A contact who revoked (one-click unsubscribe, a complaint) since the send was prepared: its
# message is cancelled by the claim that finds it, never handed over (docs/privacy.md).
REVOKED_STATUSES = ("UNSUBSCRIBED", "COMPLAINED")
REVOKED = "Not sent: the contact unsubscribed before it was handed over."
_CLAIM = (_COLUMNS + " WHERE m.campaign_id = :campaign AND m.status = 'queued'"
          " AND (m.retry_at IS NULL OR m.retry_at <= :now)"
          " AND (m.due_at IS NULL OR m.due_at <= :now) ORDER BY m.id LIMIT :size")
# A local-time message waits for its zone (due_at, UTC; the freeze gives every message of a
# local-time campaign one, services/email/preparation.py). Its claim reads the partial index
# email_messages_due (campaign_id, due_at) of queued messages, earliest zone first, and stops
# at the first message whose zone has not come: releasing a zone's share reads that share
# (and any message waiting for a retry), never the zones still waiting behind it.
_CLAIM_LOCAL = (_COLUMNS + " WHERE m.campaign_id = :campaign AND m.status = 'queued' AND m.due_at IS NOT NULL"
                " AND m.due_at <= :now AND (m.retry_at IS NULL OR m.retry_at <= :now)"
                " ORDER BY m.due_at, m.id LIMIT :size")
# While the domain warms up (warmup_gate.py): the most engaged recipients first
# (email_messages_warm; a message is ranked by the send job before it is claimed).
_RANKED = (_COLUMNS + " WHERE m.campaign_id = :campaign AND m.status = 'queued' AND m.warm_rank IS NOT NULL"
           " AND (m.retry_at IS NULL OR m.retry_at <= :now)"
           " AND (m.due_at IS NULL OR m.due_at <= :now) ORDER BY m.warm_rank, m.id LIMIT :size")
# Rows whose claim expired (their worker died, or was paused past its lease), or that an
# earlier run of this very job claimed (jobs.Run.earlier: it lost the job's lease): claimable
# again, and marked uncertain (they may have been handed over before the worker stopped).
_CLAIM_EXPIRED = (_COLUMNS + " WHERE m.campaign_id = :campaign AND m.status = 'sending'"
                  " AND (m.claim_expires_at IS NULL OR m.claim_expires_at < :now"
                  " OR (m.claim_token LIKE :earlier AND m.claim_token <> :token)) ORDER BY m.id LIMIT :size")


def _without_lanes(sql: str, held: list[str], taken: int = 0) -> str:
    """A queued claim's SQL leaving out the `held` lanes (shaping.py: suspended, or whose next
    start has not come) so that the other lanes' messages fill the round, and the `taken` rows
    already in the round (:taken0, ...); `sql` itself when there is nothing to leave out.

    A held lane's messages gather at the head of the queue (the other lanes' go out), and the
    lane is not in the index the claim reads: a claim that left them out would read past all
    of them every time. So it starts at the worker's cursor for that set of held lanes
    (:after, shaping.Shaper.cursor: the first message it found there last time)."""
    if not held and not taken:
        return sql
    where, order = sql.rsplit(" ORDER BY ", 1)
    if held:
        where += f" AND coalesce(m.lane, 'other') NOT IN ({', '.join(f':held{i}' for i in range(len(held)))})"
        where += " AND m.id >= :after"
    if taken:
        where += f" AND m.id NOT IN ({', '.join(f':taken{i}' for i in range(taken))})"
    return f"{where} ORDER BY {order}"


def _claim(conn: sqlite3.Connection, campaign_id: str, size: int, local: bool = False,
           claim: jobs.Run | None = None, workspace_id: int | None = None) -> list[sqlite3.Row]:
    """Up to `size` messages due now moved to `sending` under `claim`'s token (`local`: a
    local-time campaign): first those whose claim expired (marked uncertain), then queued ones.
    On PostgreSQL rows another worker is claiming are passed over (FOR UPDATE SKIP LOCKED),
    in a READ COMMITTED transaction without the advisory write lock (dialect.row_claim).
    With `workspace_id`, only as many as the workspace's hourly_emails allowance has left
    (`claim_round`)."""
    return claim_round(conn, campaign_id, size, local, claim, workspace_id)[0]


def claim_round(conn: sqlite3.Connection, campaign_id: str, size: int, local: bool = False,
                claim: jobs.Run | None = None, workspace_id: int | None = None, *, expired: bool = True,
                shaper: Shaper | None = None, gate: Gate | None = None) -> tuple[list[sqlite3.Row], str | None]:
    """`_claim`, and which allowance stopped it short: (rows, short), where short is None when
    nothing did, "monthly_emails" or "hourly_emails" (reservations.ALLOWANCES) for the
    allowance that bound the claim below `size` (billing.reserve), and NOT_SENDING when the
    campaign is no longer SENDING (nothing claimed: the send stops).

    `expired=False` looks for rows whose claim expired only when the queued ones do not fill
    the round (the send loop asks for them first once a second: a round saves a statement).

    With `workspace_id`, each claimed message reserves one message of the workspace's
    monthly_emails and hourly_emails allowances in the claim's own transaction
    (billing.reserve: the counter rows' locks order the workers' claims), so all the workers
    of the workspace together never claim more than the month or the hour allows; the
    message keeps the hour of its reservation (its month is the hour's)
    (reserved_hour) until its answer is recorded (record.py settles it). A message whose
    claim expired brings the reservation of its dead or paused worker along: kept when it is
    of this hour, given back (to its hour) otherwise and taken anew.

    With `shaper` (the send's provider lanes, shaping.py), the lanes held now are left out of the
    queued claim, and the messages of a slowed lane are booked on its pacer in the claim's
    transaction (those beyond its horizon stay queued).

    With `gate` (the warm-up of the send's domain, warmup_gate.py) while it runs, the lanes
    whose cap is used up today are left out too, the other messages are taken by their
    recipient's engagement (warm_rank; a local-time send keeps its zones' order), and each
    newly claimed message counts against its lane's cap of the day in the claim's transaction."""
    claim = claim or jobs.current_run()
    held = sorted(shaper.held(conn)) if shaper is not None else []
    warm = gate is not None and gate.active(conn) is not None
    if warm:
        held = sorted(set(held) | set(gate.full(conn)))  # type: ignore[union-attr]
    base = _RANKED if warm and not local else _CLAIM_LOCAL if local else _CLAIM
    queued_sql = _without_lanes(base, held)

    def attempt() -> tuple[list[sqlite3.Row], str | None]:
        with dialect.row_claim(conn):
            if conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] != "SENDING":
                return [], NOT_SENDING
            if warm:
                gate.lock(conn)  # type: ignore[union-attr]
            params = {"campaign": campaign_id, "now": clock.now(), "size": size, "earlier": claim.earlier,
                      "token": claim.token, **{f"held{i}": lane for i, lane in enumerate(held)},
                      "after": shaper.cursor(held, local) if shaper is not None and not warm else 0}
            lock = dialect.skip_locked(conn, "m")
            dropped = True
            while dropped:  # (a round whose every row was dropped claims again: the send goes on)
                rows = conn.execute(_CLAIM_EXPIRED + lock, params).fetchall() if expired else []
                if len(rows) < size:
                    queued = conn.execute(queued_sql + lock, {**params, "size": size - len(rows)}).fetchall()
                    if queued and held and not warm:
                        shaper.advance(held, local, queued[0]["id"])  # type: ignore[union-attr]
                    rows += queued
                if not expired and len(rows) < size:
                    rows += conn.execute(_CLAIM_EXPIRED + lock, {**params, "size": size - len(rows)}).fetchall()
                rows, dropped = _drop_revoked(conn, workspace_id, rows)
            if shaper is not None:
                rows = _book_lanes(conn, shaper, rows, held, _CLAIM_LOCAL if local else _CLAIM, lock, params,
                                   size, workspace_id)
            if warm:
                rows = gate.take(conn, rows)  # type: ignore[union-attr]
            short, hour = None, None
            if rows and workspace_id is not None:
                kept, short, hour = reserve(conn, workspace_id, rows)
                if warm and len(kept) < len(rows):
                    ids = {r["id"] for r in kept}
                    gate.give_back(conn, [r for r in rows if r["id"] not in ids])  # type: ignore[union-attr]
                rows = kept
            if rows:
                conn.execute("UPDATE email_messages SET attempts = attempts + 1, claim_token = ?, claim_expires_at = ?,"
                             " uncertain = CASE WHEN status = 'sending' THEN 1 ELSE uncertain END, status = 'sending',"
                             f" reserved_hour = coalesce(?, reserved_hour) WHERE id IN ({marks(rows)})",
                             (claim.token, claim.expires(), hour, *(r["id"] for r in rows)))
            return rows, short

    rows, short = retry_conflicts(attempt, f"claiming messages of campaign {campaign_id}")
    taken = sum(1 for r in rows if r["status"] == "sending")
    if taken:
        log.warning("campaign %s: %d message(s) of a worker whose claim expired taken over (recorded uncertain)",
                    campaign_id, taken)
    return rows, short


def _book_lanes(conn: sqlite3.Connection, shaper: Shaper, rows: list[sqlite3.Row], held: list[str], sql: str,
                lock: str, params: dict[str, object], size: int, workspace_id: int | None) -> list[sqlite3.Row]:
    """The rows the lanes let through (shaping.Shaper.book), and once, when a lane was found full
    (another worker booked its start first), as many of the other lanes' queued messages."""
    kept = shaper.book(conn, rows)
    if len(kept) == len(rows):
        return kept
    full = sorted(set(held) | {r["lane"] or "other" for r in rows} - {r["lane"] or "other" for r in kept})
    ids = [r["id"] for r in kept]
    more = conn.execute(_without_lanes(sql, full, len(ids)) + lock,
                        {**params, "size": size - len(kept), **{f"held{i}": lane for i, lane in enumerate(full)},
                         **{f"taken{i}": taken for i, taken in enumerate(ids)},
                         "after": shaper.cursor(full, sql is _CLAIM_LOCAL)}).fetchall()
    if more:
        shaper.advance(full, sql is _CLAIM_LOCAL, min(r["id"] for r in more))
    more, _ = _drop_revoked(conn, workspace_id, more)
    return kept + shaper.book(conn, more)


def _drop_revoked(conn: sqlite3.Connection, workspace_id: int | None, rows: list[sqlite3.Row]
                  ) -> tuple[list[sqlite3.Row], bool]:
    """The claimed rows whose contact has not revoked, and whether all of them had (in the claim's
    transaction: the contact's status is read by the claim's own statement). The others are
    cancelled with their reason; a taken-over claim's reservation goes back to its allowance."""
    gone = [r["id"] for r in rows if r["contact_status"] in REVOKED_STATUSES]
    if not gone:
        return rows, False
    where, params = f"id IN ({marks(gone)})", tuple(gone)
    if workspace_id is not None:
        give_back(conn, workspace_id, where, params)
    conn.execute(f"UPDATE email_messages SET status = 'cancelled', failure_reason = ?, reserved_hour = NULL"
                 f" WHERE {where}", (REVOKED, *params))
    kept = [r for r in rows if r["contact_status"] not in REVOKED_STATUSES]
    return kept, not kept


def keep_claimed(conn: sqlite3.Connection, token: str, until: str) -> None:
    """The lease renewer's: the rows claimed under `token` stay claimed until `until`."""
    with dialect.row_claim(conn):  # (rows of ours: no need to wait for the write lock)
        conn.execute("UPDATE email_messages SET claim_expires_at = ? WHERE claim_token = ? AND status = 'sending'",
                     (until, token))

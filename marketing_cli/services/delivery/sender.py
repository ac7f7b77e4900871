"""The email send, as jobs: send at speed, pick an A/B winner (the audience is frozen
before, by email.preprocess in services/email/preparation.py).

    email.send         rounds of messages: claim (queued -> sending, one transaction),
                       render + sign + hand to the transport in parallel, record every
                       answer (one transaction); until none is left -> SENT. Two rounds
                       of half `concurrency` each are claimed at once, so the pool has
                       the next round queued while a round is recorded and the next one
                       claimed.
    email.ab_winner    after the test share went out and `wait_minutes` passed: the variant
                       with the higher unique open (or click) rate, ties A, goes to the rest

Crash safety. A message is marked `sending` before it is handed over and `delivered` (or
failed) right after the server answered, a round at a time. The rounds in flight together
hold at most `concurrency` messages, so a runner that dies leaves at most `concurrency`
messages handed over and not recorded (in `sending`), and those are sent again when the job
is taken over: the only messages that can arrive twice, at most `concurrency` of them
(CONTRACT section 7). A message the server accepted and whose round was recorded is never
sent again.
A cancel is seen after each round: the messages of a claimed round not yet handed to the
transport are given back (cancelled), so at most the round in the transport's hands goes out.

Transport answers: 250 -> delivered; 5xx -> failed at once (the campaign goes on); 4xx or
a connection problem -> tried again after a backoff (30 s, 2 min), failed after
MAX_ATTEMPTS. After PAUSE_AFTER_ERRORS consecutive transport errors the campaign is
PAUSED (`mkt campaigns resume`). Rate (messages per second) and concurrency are
MKT_SEND_RATE (default 0: as fast as the transport takes them) and MKT_SEND_CONCURRENCY
(default 10), read and checked by kernel/pacing.py (shared with SMS). The rate is the
workspace's, whatever number of workers send: each round books its starts in the database
(services/account/pace.py) before it goes to the pool.

The monthly_emails and hourly_emails allowances hold for the workspace as a whole too: a
round is claimed only as far as both have room, reserved in the claim's transaction
(`_claim_round`: one message of the month's and one of the hour's allowance each), and each
message's reservation is settled when its answer is recorded: delivered, it counts as used;
not delivered (a failure, a retry, a message given back), it returns to the allowances. So
any number of workers, and any number of campaigns sending at once, together deliver at
most what the month and the hour allow, and the counters still read delivered messages.
When the hour's allowance is used up, the send waits for the next hour. When the month's
is, and none of it is still reserved (a reservation given back makes room again), the
campaign is PAUSED: its `status_detail` says why and how to raise the allowance, and
`mkt campaigns resume` sends the rest. (Scheduling checks the audience against the month's
allowance, but two campaigns scheduled together, an audience that grew before its freeze,
or a lowered allowance can still find it used up mid-send.)

A failure stays with its message. A message that cannot be composed, or that the server
cannot take (no SMTPUTF8 for a non-ASCII local part), fails at once with its reason; an
unexpected error of the transport counts as a connection problem; neither stops the
round. If the job itself fails (a database error, a lost lease), the answers of what was
handed over are recorded first, so its next attempt sends none of it again. A campaign
whose job fails for good never waits forever: the `@jobs.gave_up` hooks put a send back in
PAUSED (email.send, email.ab_winner) or a preparation back in DRAFT (email.preprocess),
the reason in `status_detail`. A campaign SENT with failed messages says how many and why
in `status_detail` (`failure_summary`); each message keeps its own `failure_reason`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, pacing
from marketing_cli.kernel.links import tracked_links
from marketing_cli.services.account import billing, pace, workspaces
from marketing_cli.services.contacts.merge_tags import Renderer
from marketing_cli.services.delivery import transport_settings
from marketing_cli.services.delivery.compose import CompiledVariant, Recipient, compile_variant
from marketing_cli.services.delivery.dkim import DkimSigner
from marketing_cli.services.delivery.path_tokens import MessageTokens
from marketing_cli.services.delivery.transport import TransportError
from marketing_cli.services.email import campaigns, domains, senders, stats
from marketing_cli.services.email.preparation import load_campaign, load_variants
from marketing_cli.storage import dialect
from marketing_cli.storage.db import instance_secret, marks, transaction
from marketing_cli.storage.postgres.errors import retry_conflicts

MAX_ATTEMPTS = 3
HELPER_JOB = "email.send_helper"
RETRY_DELAYS = (30, 120)
PAUSE_AFTER_ERRORS = 20
ALLOWANCES = ("monthly_emails", "hourly_emails")  # reserved per claimed message; counter rows locked in this order
NOT_SENDING = "not SENDING"  # `_claim_round`'s answer for a campaign no longer SENDING
ROUNDS_IN_FLIGHT = 2  # claimed and queued at once, `concurrency` messages between them (the crash window)
EXPIRED_EVERY = 1.0  # seconds: how often a claim looks for expired claims before queued messages
HALTED = "Not sent: the campaign stopped sending."  # a claimed message given back untouched
COMPOSE_FAILED = "the message could not be composed"
FAILED_SUMMARY = "{failed:,} of {total:,} messages failed: {reasons}."
SHOWN_REASONS = 3
MONTH_USED_UP = ("Paused: the workspace's monthly email allowance is used up. {detail} Then `mkt campaigns resume {id}`"
                 " (POST /v1/campaigns/{id}/resume) sends the rest.")
MONTH_RECHECK = 5.0  # seconds: the month's allowance is used up while reservations are out; look again then
SEND_GAVE_UP = ("Sending stopped: the send job failed for good ({error}). Fix the cause, then resume the "
                "campaign (mkt campaigns resume {id}).")

log = logging.getLogger("mkt.email.send")


# --------------------------------------------------------------------------- sending

class _Send:
    """Everything one send job needs, built once: compiled variants, values, transports."""

    def __init__(self, conn: sqlite3.Connection, row: sqlite3.Row) -> None:
        ws = row["workspace_id"]
        sender = senders.get_sender_identity(conn, ws, row["sender_identity_id"])
        if sender is None:
            raise MktError(400, "The campaign's sender identity no longer exists.")
        domain_name, selector, key = domains.dkim_signing_key(conn, sender["domain_id"])
        signer = DkimSigner(domain_name, selector, key)
        track = bool(conn.execute("SELECT interaction_tracking FROM workspaces WHERE id = ?", (ws,)).fetchone()[0])
        base = workspaces.tracking_base_url(conn, ws)
        reply_to = json.loads(row["reply_to"]) if row["reply_to"] else None
        self.secret = instance_secret(conn)
        self.variants: dict[str, CompiledVariant] = {}
        self.renderers: dict[str, Renderer] = {}
        for variant in load_variants(conn, row["id"]).values():
            links = stats.register_links(conn, row["id"], variant["id"], tracked_links(variant["body_html"]))
            self.variants[variant["id"]] = compile_variant(
                variant, sender, reply_to, tracking_base=base, campaign_id=row["id"], track=track,
                link_ids=links, signer=signer)
            self.renderers[variant["id"]] = Renderer(conn, ws, preview_text=variant["preview_text"] or "")
        # The envelope sender (MAIL FROM, where bounces go) is on the domain's return-path
        # host, which its CNAME record points at the domain (docs/sending-domains.md).
        code = domains.get_domain(conn, ws, sender["domain_id"])["domain_code"]
        self.envelope_from = f"bounces@{code}.{sender['domain_name']}"
        rate = pacing.read_pace(pacing.EMAIL)
        self.concurrency, self.pacer = rate.concurrency, pace.SharedPacer(ws, pace.EMAIL, rate.rate)
        self._local = threading.local()
        self._transports: list[Any] = []
        self._lock = threading.Lock()
        self.campaign_id = row["id"]
        # The workspace's transport as this process sees it (flags and variables first); an
        # outbox folder is counted on the campaign, so statistics can say where mail went.
        self.selection = transport_settings.selection(conn, ws)
        self.outbox = str(self.selection.folder) if self.selection.kind == "outbox" else None
        self.halt = threading.Event()  # set when the campaign left SENDING: claimed messages are given back
        self.campaign_id = row["id"]
        self.claim = jobs.current_run()  # the token our claimed rows carry, renewed with the job's lease

    def build(self, message: sqlite3.Row) -> bytes:
        """The signed message of one claimed row (merge tags for its contact, its own URLs)."""
        compiled = self.variants[message["variant_id"]]
        token = MessageTokens.make(self.secret, message["id"])
        contact = None if message["data"] is None else {
            "email": message["contact_email"], "phone": message["phone"], "data": message["data"]}
        values = self.renderers[message["variant_id"]].values_for(contact, extra=compiled.urls(token))
        return compiled.build(Recipient(message["id"], message["email"], token), values)

    def transport(self) -> Any:
        transport = getattr(self._local, "transport", None)
        if transport is None:
            transport = self._local.transport = self.selection.open()
            with self._lock:
                self._transports.append(transport)
        return transport

    def smtp_id(self, message: sqlite3.Row) -> str:
        return self.variants[message["variant_id"]].smtp_message_id(message["id"])

    def deliver(self, message: sqlite3.Row) -> tuple[int, str | None, bool]:
        """Build, sign and hand one message to this thread's transport: (message id, error or
        None, permanent). Building in the pool's threads overlaps one message's rendering and
        signing with the others' network waits.

        Never raises: whatever goes wrong with one recipient is that message's answer, so the
        round's other answers are recorded with it (an exception here would leave messages
        the server accepted unrecorded, and the job's next attempt would send them again).
        """
        if self.halt.is_set() or not self.claim.held():  # (paused past our claim: another worker has it)
            return message["id"], HALTED, False
        try:
            raw = self.build(message)
        except Exception as exc:  # noqa: BLE001 - this recipient's message only
            log.exception("message %s of campaign %s could not be composed", message["id"], self.campaign_id)
            return message["id"], f"{COMPOSE_FAILED}: {type(exc).__name__}: {exc}", True
        try:
            self.transport().send(raw, self.envelope_from, [message["email"]])
        except TransportError as exc:
            return message["id"], str(exc), exc.permanent
        except Exception as exc:  # noqa: BLE001 - not the server's answer: tried again, like a connection problem
            log.exception("sending message %s of campaign %s failed", message["id"], self.campaign_id)
            self.drop_transport()  # its session is in an unknown state
            return message["id"], f"sending failed: {type(exc).__name__}: {exc}", False
        return message["id"], None, False

    def drop_transport(self) -> None:
        transport, self._local.transport = getattr(self._local, "transport", None), None
        if transport is not None:
            with contextlib.suppress(Exception):  # a broken session: nothing to keep
                transport.close()

    def close(self) -> None:
        for transport in self._transports:
            transport.close()


_COLUMNS = ("SELECT m.id, m.variant_id, m.email, m.attempts, m.status, m.reserved_hour, c.email AS contact_email,"
            " c.phone, c.data"
            " FROM email_messages m LEFT JOIN contacts c ON c.id = m.contact_id")
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
# Rows whose claim expired (their worker died, or was paused past its lease), or that an
# earlier run of this very job claimed (jobs.Run.earlier: it lost the job's lease): claimable
# again, and marked uncertain (they may have been handed over before the worker stopped).
_CLAIM_EXPIRED = (_COLUMNS + " WHERE m.campaign_id = :campaign AND m.status = 'sending'"
                  " AND (m.claim_expires_at IS NULL OR m.claim_expires_at < :now"
                  " OR (m.claim_token LIKE :earlier AND m.claim_token <> :token)) ORDER BY m.id LIMIT :size")


def _claim(conn: sqlite3.Connection, campaign_id: str, size: int, local: bool = False,
           claim: jobs.Run | None = None, workspace_id: int | None = None) -> list[sqlite3.Row]:
    """Up to `size` messages due now moved to `sending` under `claim`'s token (`local`: a
    local-time campaign): first those whose claim expired (marked uncertain), then queued ones.
    On PostgreSQL rows another worker is claiming are passed over (FOR UPDATE SKIP LOCKED),
    in a READ COMMITTED transaction without the advisory write lock (dialect.row_claim).
    With `workspace_id`, only as many as the workspace's hourly_emails allowance has left
    (`_claim_round`)."""
    return _claim_round(conn, campaign_id, size, local, claim, workspace_id)[0]


def _claim_round(conn: sqlite3.Connection, campaign_id: str, size: int, local: bool = False,
                 claim: jobs.Run | None = None, workspace_id: int | None = None, *, expired: bool = True
                 ) -> tuple[list[sqlite3.Row], str | None]:
    """`_claim`, and which allowance stopped it short: (rows, short), where short is None when
    nothing did, "monthly_emails" or "hourly_emails" (ALLOWANCES) for the allowance that bound
    the claim below `size` (billing.reserve), and NOT_SENDING when the campaign is no longer
    SENDING (nothing claimed: the send stops).

    `expired=False` looks for rows whose claim expired only when the queued ones do not fill
    the round (the send loop asks for them first once a second: a round saves a statement).

    With `workspace_id`, each claimed message reserves one message of the workspace's
    monthly_emails and hourly_emails allowances in the claim's own transaction
    (billing.reserve: the counter rows' locks order the workers' claims), so all the workers
    of the workspace together never claim more than the month or the hour allows; the
    message keeps the hour of its reservation (its month is the hour's)
    (reserved_hour) until its answer is recorded (`_record_once` settles it). A message whose
    claim expired brings the reservation of its dead or paused worker along: kept when it is
    of this hour, given back (to its hour) otherwise and taken anew."""
    claim = claim or jobs.current_run()

    def attempt() -> tuple[list[sqlite3.Row], str | None]:
        with dialect.row_claim(conn):
            if conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] != "SENDING":
                return [], NOT_SENDING
            params = {"campaign": campaign_id, "now": clock.now(), "size": size, "earlier": claim.earlier,
                      "token": claim.token}
            lock = dialect.skip_locked(conn, "m")
            rows = conn.execute(_CLAIM_EXPIRED + lock, params).fetchall() if expired else []
            if len(rows) < size:
                rows += conn.execute((_CLAIM_LOCAL if local else _CLAIM) + lock,
                                     {**params, "size": size - len(rows)}).fetchall()
            if not expired and len(rows) < size:
                rows += conn.execute(_CLAIM_EXPIRED + lock, {**params, "size": size - len(rows)}).fetchall()
            short, hour = None, None
            if rows and workspace_id is not None:
                rows, short, hour = _reserve(conn, workspace_id, rows)
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


def _reserve(conn: sqlite3.Connection, workspace_id: int, rows: list[sqlite3.Row]
             ) -> tuple[list[sqlite3.Row], str | None, str]:
    """The claimable `rows` the monthly_emails and hourly_emails allowances cover, in the
    claim's transaction: (rows kept, the allowance that left some out or None, the hour
    reserved). Counter rows are locked newest hour first here and wherever reservations are
    settled, each hour's month just before it (`_settle`), so two transactions never wait for
    each other's rows (no deadlock at an hour's or a month's turn)."""
    hour = billing.period_of("hourly_emails")
    carried = {r["id"] for r in rows if r["reserved_hour"] == hour}  # a taken-over claim's reservation
    wanted = [r for r in rows if r["id"] not in carried]
    granted, short = billing.reserve(conn, workspace_id, ALLOWANCES, len(wanted))
    stale = Counter(r["reserved_hour"] for r in wanted[:granted] if r["reserved_hour"] is not None)
    for period in sorted(stale, reverse=True):  # an earlier hour's reservation of a taken-over claim
        _settle(conn, workspace_id, period, released=stale[period])
    keep = carried | {r["id"] for r in wanted[:granted]}
    return [r for r in rows if r["id"] in keep], short, hour


def _settle(conn: sqlite3.Connection, workspace_id: int, hour: str, *, released: int, used: int = 0) -> None:
    """End `released` reservations made in `hour` (`used` of them delivered, or delivered
    without one): of its month's allowance, then of the hour's (ALLOWANCES' lock order)."""
    billing.settle(conn, workspace_id, "monthly_emails", hour[:7], released=released, used=used)
    billing.settle(conn, workspace_id, "hourly_emails", hour, released=released, used=used)


def _give_back(conn: sqlite3.Connection, workspace_id: int, where: str, params: tuple[Any, ...]) -> None:
    """Settle, unused, the reservations of the claimed messages `where` selects (in the write
    transaction that takes them out of `sending` without an answer)."""
    for period, count in conn.execute(f"SELECT reserved_hour, count(*) FROM email_messages WHERE {where}"
                                      " AND reserved_hour IS NOT NULL GROUP BY reserved_hour ORDER BY reserved_hour DESC",
                                      params).fetchall():
        _settle(conn, workspace_id, period, released=count)


def keep_claimed(conn: sqlite3.Connection, token: str, until: str) -> None:
    """The lease renewer's: the rows claimed under `token` stay claimed until `until`."""
    with dialect.row_claim(conn):  # (rows of ours: no need to wait for the write lock)
        conn.execute("UPDATE email_messages SET claim_expires_at = ? WHERE claim_token = ? AND status = 'sending'",
                     (until, token))


def _owned(conn: sqlite3.Connection, token: str, ids: list[int]) -> dict[int, str | None]:
    """Which of `ids` still carry our claim (in the recording's transaction, locked till its
    end), each with the hour of its hourly_emails reservation (None: it holds none)."""
    if not ids:
        return {}
    return {r[0]: r[1] for r in conn.execute(
        f"SELECT id, reserved_hour FROM email_messages WHERE id IN ({marks(ids)}) AND claim_token = ?"
        f" AND status = 'sending'{dialect.for_update(conn)}", (*ids, token))}


def _record(conn: sqlite3.Connection, run: _Send, row_of: dict[int, sqlite3.Row],
            results: list[tuple[int, str | None, bool]], workspace_id: int) -> int:
    """Write a round's answers in one transaction; returns the number of temporary errors.
    Only rows still claimed under our token are written (fencing): the others were taken over
    by another worker while this one was paused past its claim; they are refused and logged."""
    return retry_conflicts(lambda: _record_once(conn, run, row_of, results, workspace_id),
                           f"recording messages of campaign {run.campaign_id}")


def _record_once(conn: sqlite3.Connection, run: _Send, row_of: dict[int, sqlite3.Row],
                 results: list[tuple[int, str | None, bool]], workspace_id: int) -> int:
    """One round's answers in one transaction. On PostgreSQL it is a READ COMMITTED writer
    without the advisory write lock (dialect.row_claim): what it writes is the rows of our
    claim (locked by _owned), per-contact counters, and counter rows the other workers of the
    campaign update too (the delivered trigger's email_campaign_counters, breakdowns and
    hours; usage_counters). Those shared rows are what the workers queue for, so they are
    taken last and held for the fewest round trips: the deliveries in one batch
    (stats.record_deliveries: the trigger locks the campaign's counter row first), the usage,
    COMMIT. A round of several variants (an A/B test) locks the campaign's counter rows first,
    in variant order, so two workers' rounds never wait for each other's (no deadlock)."""
    temporary = 0
    now = clock.utcnow()
    released: Counter[str] = Counter()  # per hour: reservations settled, and those delivered
    used: Counter[str] = Counter()
    accepted: dict[int, str] = {}
    with dialect.row_claim(conn):
        owned = _owned(conn, run.claim.token, [message_id for message_id, _, _ in results])
        refused = len(results) - len(owned)
        if refused:  # paused past our claim: another worker took these rows; its result stands
            log.warning("campaign %s: %d late acknowledgement(s) refused: their claim was taken over by another "
                        "worker", run.campaign_id, refused)
        for message_id, error, permanent in results:
            if message_id not in owned:
                continue
            if error is HALTED:  # never handed over: cancelled with its campaign, or queued again
                conn.execute("UPDATE email_messages SET attempts = attempts - 1, status = CASE WHEN (SELECT status"
                             " FROM campaigns WHERE id = email_messages.campaign_id) = 'CANCELLED' THEN 'cancelled'"
                             " ELSE 'queued' END WHERE id = ? AND status = 'sending'", (message_id,))
            elif error is None:
                accepted[message_id] = run.smtp_id(row_of[message_id])
            elif permanent or row_of[message_id]["attempts"] + 1 >= MAX_ATTEMPTS:
                stats.record_failure(conn, message_id, error[:500])
            else:
                temporary += 1
                delay = RETRY_DELAYS[min(row_of[message_id]["attempts"], len(RETRY_DELAYS) - 1)]
                conn.execute("UPDATE email_messages SET status = 'queued', failure_reason = ?, retry_at = ?"
                             " WHERE id = ? AND status = 'sending'",
                             (error[:500], clock.format_ts(now + timedelta(seconds=delay)), message_id))
        if len({row_of[i]["variant_id"] for i in accepted}) > 1:  # (one variant: its counter row is the first lock)
            conn.execute("SELECT 1 FROM email_campaign_counters WHERE campaign_id = ? ORDER BY variant_id"
                         f"{dialect.for_update(conn)}", (run.campaign_id,)).fetchall()
        by_hour: dict[str, list[int]] = {}  # the deliveries by the hour of their reservation (mostly one)
        for message_id in sorted(accepted, key=lambda i: (row_of[i]["variant_id"], i)):
            by_hour.setdefault(owned[message_id] or billing.period_of("hourly_emails"), []).append(message_id)
        for hour, ids in by_hour.items():  # (each delivered row's reservation cleared in the same UPDATE)
            used[hour] += stats.record_deliveries(conn, ids, smtp_ids=accepted, release=True)
        delivered = sum(used.values())
        # The allowances: each reservation settled (delivered: used in the hour and the month
        # it was reserved in; else given back), once, by the worker whose claim the row still carries.
        released.update(hour for hour in owned.values() if hour is not None)
        for hour in sorted(released.keys() | used.keys(), reverse=True):  # newest first, as a claim locks them
            _settle(conn, workspace_id, hour, released=released[hour], used=used[hour])
        # The reservations not cleared with a delivery (every accepted one too, in the rare
        # case that one of them was not recorded as delivered here)
        cleared = set(accepted) if delivered == len(accepted) else set()
        reserved = [i for i, hour in owned.items() if hour is not None and i not in cleared]
        if reserved:
            conn.execute(f"UPDATE email_messages SET reserved_hour = NULL WHERE id IN ({marks(reserved)})", reserved)
        if delivered and run.outbox is not None:
            stats.count_outbox_deliveries(conn, run.campaign_id, delivered, run.outbox)
    return temporary


@jobs.handler("email.send")
def send(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    _send(conn, payload["campaign_id"], helper=False)


@jobs.handler(HELPER_JOB)
def help_send(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    """A sibling of a campaign's email.send job: claims from the same queue of messages, and
    ends when it finds nothing to claim (the send job waits for retries and zones)."""
    _send(conn, payload["campaign_id"], helper=True)


def _call_helpers(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """Queue the send's helpers (jobs.send_workers() - 1 of them) when the campaign has at least
    jobs.HELPERS_FROM messages queued; a helper already queued is not queued twice."""
    workers = jobs.send_workers(conn)
    if workers <= 1:
        return
    queued = conn.execute("SELECT count(*) FROM (SELECT 1 FROM email_messages WHERE campaign_id = ?"
                          " AND status = 'queued' LIMIT ?) q", (row["id"], jobs.HELPERS_FROM)).fetchone()[0]
    if queued < jobs.HELPERS_FROM:
        return
    with transaction(conn):
        for n in range(1, workers):
            jobs.enqueue(conn, HELPER_JOB, {"campaign_id": row["id"]}, workspace_id=row["workspace_id"],
                         dedupe_key=f"{HELPER_JOB}:{row['id']}:{n}", max_attempts=1)


def _send(conn: sqlite3.Connection, campaign_id: str, *, helper: bool) -> None:
    row = load_campaign(conn, campaign_id)
    if row is not None and row["status"] == "CANCELLED":  # cancelled while a runner that then died sent
        with transaction(conn):
            where = ("campaign_id = ? AND status = 'sending'"
                     " AND (claim_expires_at IS NULL OR claim_expires_at < ? OR claim_token LIKE ?)")
            params = (campaign_id, clock.now(), jobs.current_run().earlier)
            _give_back(conn, row["workspace_id"], where, params)
            conn.execute(f"UPDATE email_messages SET status = 'cancelled', reserved_hour = NULL WHERE {where}", params)
    if row is None or row["status"] != "SENDING":
        return
    # A runner that died mid-round left its messages in `sending`: they are claimed again once
    # their claim expires (at most `concurrency` messages, each recorded uncertain).
    if not helper:
        _call_helpers(conn, row)
    run = _Send(conn, row)
    run.claim.keep(keep_claimed)
    try:
        _send_rounds(conn, row, run, helper=helper)
    finally:
        run.close()


def _send_rounds(conn: sqlite3.Connection, row: sqlite3.Row, run: _Send, *, helper: bool = False) -> None:
    """Claim, deliver and record rounds of messages until none is due.

    ROUNDS_IN_FLIGHT rounds are claimed at once: while the pool delivers one, the next one
    is already queued behind it, so the threads rarely wait for the database (recording a
    round and claiming the next) and the server never waits for a round's slowest message.
    The rounds in flight hold `concurrency` messages between them (each claim takes what is
    left of it, at most its share): a runner that dies has at most `concurrency` messages
    handed over and not recorded, the ones that can go out twice (CONTRACT section 7).

    Whatever stops the loop (an error of the database, a lost lease, a bug), the answers of
    the messages already handed to the transport are recorded before the error goes on to
    the job queue: its next attempt then sends none of them again. Only a runner that dies
    outright leaves messages in `sending` (the crash window of the module docstring).
    """
    ws = row["workspace_id"]
    errors_in_a_row = 0
    rounds = 1 if run.pacer.interval else ROUNDS_IN_FLIGHT  # a paced send is held by its rate, not by the pool
    share = -(-run.concurrency // rounds)  # a round's size at most: concurrency / rounds, rounded up
    in_flight: deque[tuple[list[sqlite3.Row], list[Future[tuple[int, str | None, bool]]]]] = deque()
    stop: str | None = None  # an allowance used up (ALLOWANCES), or "done" (nothing due, or no longer SENDING)
    expired_at = float("-inf")  # when the claims last looked for expired rows first (`_claim_round`)

    def record_oldest() -> tuple[list[tuple[int, str | None, bool]], int]:
        """Wait for the oldest round's answers and record them: (answers, temporary errors).
        The round leaves `in_flight` only once its answers are written."""
        claimed, futures = in_flight[0]
        results = [future.result() for future in futures]
        temporary = _record(conn, run, {m["id"]: m for m in claimed}, results, ws)
        in_flight.popleft()
        return results, temporary

    with ThreadPoolExecutor(max_workers=run.concurrency, thread_name_prefix="mkt-send") as pool:
        try:
            while True:
                jobs.heartbeat(conn)
                while stop is None and len(in_flight) < rounds:
                    size = min(share, run.concurrency - sum(len(claimed) for claimed, _ in in_flight))
                    if size <= 0:  # (concurrency 1: one message at a time)
                        break
                    expired = time.monotonic() - expired_at >= EXPIRED_EVERY
                    claimed, short = _claim_round(conn, row["id"], size, bool(row["local_time"]),
                                                  run.claim, ws, expired=expired)
                    expired_at = time.monotonic() if expired else expired_at
                    if not claimed:
                        stop = short if short in ALLOWANCES else "done"
                        if short == NOT_SENDING:  # (cancelled, paused): send nothing more
                            run.halt.set()
                        break
                    run.pacer.wait(conn, len(claimed))  # the workspace's rate, shared by all its workers
                    in_flight.append((claimed, [pool.submit(run.deliver, m) for m in claimed]))
                if not in_flight:
                    if stop == "hourly_emails":
                        _again_at(conn, row, _next_hour())
                    elif stop == "monthly_emails":
                        _month_used_up(conn, row)
                    else:
                        _finish_or_wait(conn, row, helper=helper)
                    return
                results, temporary = record_oldest()
                if stop is not None:  # (else the next claim reads the status first)
                    current = conn.execute("SELECT status FROM campaigns WHERE id = ?", (row["id"],)).fetchone()
                    if current is None or current[0] != "SENDING":  # cancelled meanwhile: send nothing more
                        run.halt.set()
                        stop = "done"
                errors_in_a_row = errors_in_a_row + temporary if temporary == len(results) else 0
                if errors_in_a_row >= PAUSE_AFTER_ERRORS:
                    while in_flight:  # what was already handed over is recorded before the pause
                        record_oldest()
                    campaigns.set_campaign_status(conn, row["id"], "PAUSED",
                                                  detail=f"Paused after {errors_in_a_row} transport errors in a row: "
                                                         f"{results[-1][1]}")
                    return
        except BaseException:
            run.halt.set()  # what the pool has not started is given back, not sent
            _record_handed_over(conn, in_flight, record_oldest)
            raise


def _record_handed_over(conn: sqlite3.Connection, in_flight: deque[Any], record_oldest: Any) -> None:
    """After an error: record the answers of every round in flight (each tried twice)."""
    if conn.in_transaction:  # the failed statement's transaction: our records must not join it
        conn.execute("ROLLBACK")
    while in_flight:
        for attempt in (1, 2):
            try:
                record_oldest()
                break
            except Exception:  # noqa: BLE001 - the job's own error is the one raised
                if attempt == 2:
                    log.exception("the answers of a round of %d messages could not be recorded; the job's next "
                                  "attempt sends them again", len(in_flight[0][0]))
                    in_flight.popleft()


def _month_used_up(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """The month's allowance had no room for a claim. While some of it is reserved by messages
    being sent (by any campaign's workers), those may still come back (not delivered), so the
    send looks again in MONTH_RECHECK seconds; once all of it is used, the campaign is PAUSED
    with the reason (once, by whichever of its workers found it first; the others then see it
    no longer SENDING)."""
    ws = row["workspace_id"]
    with transaction(conn):
        current = conn.execute("SELECT status FROM campaigns WHERE id = ?", (row["id"],)).fetchone()
        if current is None or current[0] != "SENDING":
            return
        held = conn.execute("SELECT held FROM usage_counters WHERE workspace_id = ? AND resource = 'monthly_emails'"
                            " AND period = ?", (ws, billing.period_of("monthly_emails"))).fetchone()
        if held is not None and held[0] > 0:
            _again_at(conn, row, clock.format_ts(clock.utcnow() + timedelta(seconds=MONTH_RECHECK)))
            return
        detail = MONTH_USED_UP.format(detail=billing.limit_detail(conn, ws, "monthly_emails"), id=row["id"])
        campaigns.set_campaign_status(conn, row["id"], "PAUSED", detail=detail)
    log.warning("campaign %s paused: the monthly_emails allowance of workspace %s is used up", row["id"], ws)


def _next_hour() -> str:
    now = clock.utcnow()
    return clock.format_ts(now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1))


def _again_at(conn: sqlite3.Connection, row: sqlite3.Row, run_at: str, job: str = "email.send") -> None:
    jobs.enqueue(conn, job, {"campaign_id": row["id"]}, workspace_id=row["workspace_id"],
                 dedupe_key=f"{job}:{row['id']}", run_at=run_at)


def _finish_or_wait(conn: sqlite3.Connection, row: sqlite3.Row, *, helper: bool = False) -> None:
    """No message is due now: wait for retries, for the next zone of a local-time send, for
    messages other workers hold, for the A/B winner, or end the send (SENT). Checked in the
    finishing transaction, so whichever job finds nothing queued or claimed finishes the
    campaign, exactly once (the status is read under the write lock). A helper that finds
    work left ends without queueing anything: the send job waits for it."""
    with transaction(conn):
        current = conn.execute("SELECT status, automation_id FROM campaigns WHERE id = ?", (row["id"],)).fetchone()
        if current is None or current["status"] != "SENDING":
            return
        retry = _next_instant(conn, row)
        claimed = conn.execute("SELECT min(coalesce(claim_expires_at, '')) FROM email_messages WHERE campaign_id = ?"
                               " AND status = 'sending'", (row["id"],)).fetchone()[0]
        if retry is not None or claimed is not None:  # claimed by another worker: back when its claim would expire
            if not helper:  # ('' is now)
                _again_at(conn, row, min(at or clock.now() for at in (retry, claimed) if at is not None))
            return
        if conn.execute("SELECT 1 FROM email_ab_holdout WHERE campaign_id = ? LIMIT 1", (row["id"],)).fetchone():
            wait = json.loads(row["ab_test"])["wait_minutes"]
            _again_at(conn, row, clock.format_ts(clock.utcnow() + timedelta(minutes=wait)), "email.ab_winner")
            return
        # An automation's campaign (services/email/automated.py) stays SENDING: more messages come.
        if current["automation_id"] is None:
            campaigns.set_campaign_status(conn, row["id"], "SENT", detail=failure_summary(conn, row["id"]))
            conn.execute("UPDATE campaigns SET sent_at = ? WHERE id = ?", (clock.now(), row["id"]))


def _next_instant(conn: sqlite3.Connection, row: sqlite3.Row) -> str | None:
    """When a queued message of the campaign may next be claimed ('' for now), None when none is queued.

    A local-time campaign reads it from email_messages_due: the earliest due time of a message
    not waiting for a retry (the next zone), and the retries of messages due before it; a
    retrying message due later cannot come earlier than that zone."""
    if not row["local_time"]:
        return conn.execute("SELECT min(max(coalesce(retry_at, ''), coalesce(due_at, ''))) FROM email_messages"
                            " WHERE campaign_id = ? AND status = 'queued'", (row["id"],)).fetchone()[0]
    zone = conn.execute("SELECT due_at FROM email_messages WHERE campaign_id = ?"
                        " AND status = 'queued' AND due_at IS NOT NULL AND retry_at IS NULL ORDER BY due_at LIMIT 1",
                        (row["id"],)).fetchone()
    before = " AND due_at < ?" if zone else ""
    retry = conn.execute("SELECT min(max(retry_at, due_at)) FROM email_messages WHERE campaign_id = ?"
                         f" AND status = 'queued' AND due_at IS NOT NULL{before} AND retry_at IS NOT NULL",
                         (row["id"], *(zone or ()))).fetchone()[0]
    return min(filter(None, (zone and zone[0], retry)), default=None)


def failure_summary(conn: sqlite3.Connection, campaign_id: str) -> str | None:
    """The `status_detail` of a campaign sent with failed messages: how many, and the most
    common reasons with their counts (each message keeps its own in `failure_reason`)."""
    reasons = conn.execute("SELECT failure_reason, count(*) AS n FROM email_messages"
                           " WHERE campaign_id = ? AND status = 'failed' GROUP BY failure_reason"
                           " ORDER BY n DESC, failure_reason", (campaign_id,)).fetchall()
    if not reasons:
        return None
    failed = sum(r["n"] for r in reasons)
    total = conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ?", (campaign_id,)).fetchone()[0]
    shown = [f"{(r['failure_reason'] or 'no reason given').rstrip('.')} ({r['n']:,})" for r in reasons[:SHOWN_REASONS]]
    if len(reasons) > SHOWN_REASONS:
        shown.append(f"{len(reasons) - SHOWN_REASONS:,} other reasons")
    return FAILED_SUMMARY.format(failed=failed, total=total, reasons="; ".join(shown))


# --------------------------------------------------------------------------- the A/B winner

def winner_rates(conn: sqlite3.Connection, campaign_id: str, criterion: str) -> dict[str, float]:
    """Each variant's unique open (or click) rate among its delivered messages."""
    column = "opened" if criterion == "OPENS" else "clicked"  # one of two fixed names of ours
    rates = {}
    for r in conn.execute(f"SELECT v.type, coalesce(k.delivered, 0) AS delivered, coalesce(k.{column}, 0) AS hits"
                          " FROM campaign_variants v LEFT JOIN email_campaign_counters k"
                          " ON k.campaign_id = v.campaign_id AND k.variant_id = v.id"
                          " WHERE v.campaign_id = ? ORDER BY v.type", (campaign_id,)):
        rates[r["type"]] = r["hits"] / r["delivered"] if r["delivered"] else 0.0
    return rates


@jobs.handler("email.ab_winner")
def pick_winner(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    row = load_campaign(conn, payload["campaign_id"])
    if row is None or row["status"] != "SENDING" or not row["ab_test"]:
        return
    settings = json.loads(row["ab_test"])
    rates = winner_rates(conn, row["id"], settings["winner_criterion"])
    winner = "B" if rates.get("B", 0.0) > rates.get("A", 0.0) else "A"
    variant_id = load_variants(conn, row["id"])[winner]["id"]
    domain = "lower(substr(email, instr(email, '@') + 1))"
    with transaction(conn):
        conn.execute(  # in contact_id order, the holdout's key order (the message ids are the same on both engines)
            "INSERT OR IGNORE INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider,"
            f" created_at) SELECT campaign_id, ?, contact_id, email, {domain}, {stats.provider_sql(conn, domain)},"
            " ? FROM email_ab_holdout WHERE campaign_id = ? ORDER BY contact_id", (variant_id, clock.now(), row["id"]))
        conn.execute("DELETE FROM email_ab_holdout WHERE campaign_id = ?", (row["id"],))
        decision = {**settings, "winner": winner, "rates": rates, "decided_at": clock.now()}
        conn.execute("UPDATE campaigns SET ab_test = ? WHERE id = ?", (json.dumps(decision), row["id"]))
        _again_at(conn, row, clock.now())


@jobs.gave_up("email.send")
@jobs.gave_up("email.ab_winner")
def send_gave_up(conn: sqlite3.Connection, job: dict[str, Any], error: str) -> None:
    """A send whose job will not run again is PAUSED with the reason, not left SENDING: what
    was delivered stays delivered, and `resume` sends the rest once the cause is fixed."""
    row = load_campaign(conn, job["campaign_id"])
    if row is None or row["status"] != "SENDING":
        return
    campaigns.set_campaign_status(conn, row["id"], "PAUSED",
                                  detail=SEND_GAVE_UP.format(error=error.rstrip("."), id=row["id"]))

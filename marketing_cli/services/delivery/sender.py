"""The email send, as jobs: send at speed, pick an A/B winner (the audience is frozen
before, by email.preprocess in services/email/preparation.py).

    email.send         rounds of messages: claim (queued -> sending, one transaction),
                       render + sign + hand to the transport in parallel, record every
                       answer (one transaction); until none is left -> SENT. Two rounds
                       of half `concurrency` each are in the pool at once, so the pool has
                       the next round queued while a round is recorded. Unless a rate or
                       a warm-up paces the claims, one claim takes CLAIM_AHEAD rounds,
                       handed over a round at a time (a claim costs a transaction; the
                       campaign's status is read before each round all the same).
    email.ab_winner    after the test share went out and `wait_minutes` passed: the variant
                       with the higher unique open (or click) rate, ties A, goes to the rest
                       (ab_winner.py)

This module runs the rounds (the jobs, the loop, what a failed job leaves behind); each
step of a round is a module of its own in services/delivery/:

    claim.py          a round of messages due now claimed under the job's claim token
    reservations.py   each claimed message's reservation of the monthly and hourly allowances
    handoff.py        each message built, signed and handed to the transport (`Send`)
    record.py         a round's answers recorded (fenced), its reservations settled
    finish.py         no round left: wait (retries, zones, the next hour), pause, or SENT
    ab_winner.py      the A/B test's winner

Crash safety. A message is marked `sending` before it is handed over and `delivered` (or
failed) right after the server answered, a round at a time. The rounds in flight together
hold at most `concurrency` messages, so a runner that dies leaves at most `concurrency`
messages handed over and not recorded (in `sending`), and those are sent again when the job
is taken over: the only messages that can arrive twice, at most `concurrency` of them
(CONTRACT section 7). The rows it had claimed ahead and not handed over are in `sending` too:
claimed again the same way (marked uncertain, as any row of an expired claim), sent once. A
message the server accepted and whose round was recorded is never sent again.
A cancel is seen after each round: the messages of a claimed round not yet handed to the
transport are given back (cancelled), so at most the round in the transport's hands goes out.

Transport answers (record.py, by the reply rules of replies.py): 250 -> delivered; permanent
(5xx) -> failed at once (the campaign goes on); throttle (421 4.7.28, 454 Throttling failure)
-> back to the queue, not an attempt, and its provider lane slowed or suspended (shaping.py);
transient (another 4xx, a connection problem) -> tried again after an exponential backoff,
failed after 72 hours of deferrals. After PAUSE_AFTER_ERRORS consecutive transient errors the
campaign is PAUSED (`mkt campaigns resume`).

Provider lanes (lanes.py, shaping.py): the send job gives the messages queued since its last
pass their lane (gmail, yahoo, microsoft, apple, other) before it calls its helpers; each
claim leaves out the lanes held now (suspended, or paced beyond their horizon) and books a
slowed lane's starts, so one provider's push-back slows that provider only. When only held
lanes have messages left, a worker waits for the nearest one (LANE_NAP seconds at most) and
goes on; a longer hold ends the job, to run again when the lane opens (finish.py). Rate (messages per second) and concurrency are
MKT_SEND_RATE (default 0: as fast as the transport takes them) and MKT_SEND_CONCURRENCY
(default 10), read and checked by kernel/pacing.py (shared with SMS). The rate is the
workspace's, whatever number of workers send: each round books its starts in the database
(services/account/pace.py) before it goes to the pool.

The monthly_emails and hourly_emails allowances hold for the workspace as a whole too: a
round is claimed only as far as both have room, each message's reservation settled when its
answer is recorded (reservations.py), so any number of workers, and any number of campaigns
sending at once, together deliver at most what the month and the hour allow. When the
hour's allowance is used up, the send waits for the next hour; when the month's is, the
campaign is PAUSED with the reason (finish.py).

A failure stays with its message (handoff.py): a message that cannot be composed or taken
fails with its reason and the round goes on. If the job itself fails (a database error, a
lost lease), the answers of what was handed over are recorded first, so its next attempt
sends none of it again. A campaign whose job fails for good never waits forever: the
`@jobs.gave_up` hooks put a send back in PAUSED (email.send, email.ab_winner) or a
preparation back in DRAFT (email.preprocess), the reason in `status_detail`. A campaign
SENT with failed messages says how many and why in `status_detail` (finish.py's
`failure_summary`); each message keeps its own `failure_reason`.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.delivery import lanes, warmup_gate
from marketing_cli.services.delivery.claim import NOT_SENDING, claim_round, keep_claimed
from marketing_cli.services.delivery.finish import again_at, finish_or_wait, month_used_up, next_hour
from marketing_cli.services.delivery.handoff import HALTED, Send
from marketing_cli.services.delivery.record import record_round
from marketing_cli.services.delivery.reservations import ALLOWANCES, give_back
from marketing_cli.services.email import campaigns
from marketing_cli.services.email.preparation import load_campaign
from marketing_cli.storage.db import marks, transaction

HELPER_JOB = "email.send_helper"
PAUSE_AFTER_ERRORS = 20
ROUNDS_IN_FLIGHT = 2  # claimed and queued at once, `concurrency` messages between them (the crash window)
LANE_NAP = 5.0  # seconds: a lane held no longer than this is waited for by the worker, not by a new job
CLAIM_AHEAD = 4  # rounds claimed in one transaction when nothing paces the claims (handed over a round at a time)
EXPIRED_EVERY = 1.0  # seconds: how often a claim looks for expired claims before queued messages
SEND_GAVE_UP = ("Sending stopped: the send job failed for good ({error}). Fix the cause, then resume the "
                "campaign (mkt campaigns resume {id}).")

log = logging.getLogger("mkt.email.send")


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
            give_back(conn, row["workspace_id"], where, params)
            conn.execute(f"UPDATE email_messages SET status = 'cancelled', reserved_hour = NULL WHERE {where}", params)
    if row is None or row["status"] != "SENDING":
        return
    # A runner that died mid-round left its messages in `sending`: they are claimed again once
    # their claim expires (at most `concurrency` messages, each recorded uncertain).
    if not helper:
        lanes.assign_lanes(conn, row["id"])  # (before the helpers: they claim by lane too)
        warmup_gate.rank(conn, row["id"])  # (a warming-up domain's claims go by engagement)
        _call_helpers(conn, row)
    run = Send(conn, row)
    run.claim.keep(keep_claimed)
    gate = warmup_gate.Gate.for_campaign(conn, row["id"])
    try:
        _send_rounds(conn, row, run, helper=helper, gate=gate)
    finally:
        run.close()


def _send_rounds(conn: sqlite3.Connection, row: sqlite3.Row, run: Send, *, helper: bool = False,
                 gate: warmup_gate.Gate | None = None) -> None:
    """Claim, deliver and record rounds of messages until none is due.

    ROUNDS_IN_FLIGHT rounds are in the pool at once: while the pool delivers one, the next
    one is already queued behind it, so the threads rarely wait for the database (recording a
    round and claiming the next) and the server never waits for a round's slowest message.
    The rounds in flight hold `concurrency` messages between them (each round takes what is
    left of it, at most its share): a runner that dies has at most `concurrency` messages
    handed over and not recorded, the ones that can go out twice (CONTRACT section 7).
    A claim takes CLAIM_AHEAD rounds when nothing paces the claims (`next_round`); the rows
    claimed ahead wait in `ahead`, are handed over only while the campaign is SENDING, and
    are given back (queued, or cancelled with the campaign) when the loop ends without them.

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
    ahead: deque[sqlite3.Row] = deque()  # claimed, not handed over yet (CLAIM_AHEAD)
    stop: str | None = None  # an allowance used up (ALLOWANCES), or "done" (nothing due, or no longer SENDING)
    expired_at = float("-inf")  # when the claims last looked for expired rows first (`claim_round`)

    def record_oldest() -> tuple[list[tuple[int, str | None, bool]], int]:
        """Wait for the oldest round's answers and record them: (answers, temporary errors).
        The round leaves `in_flight` only once its answers are written."""
        claimed, futures = in_flight[0]
        results = [future.result() for future in futures]
        temporary = record_round(conn, run, {m["id"]: m for m in claimed}, results, ws)
        in_flight.popleft()
        return results, temporary

    def next_round(size: int) -> list[sqlite3.Row]:
        """The next round's rows: from `ahead` while the campaign is still SENDING (read now,
        as a claim reads it), else claimed, CLAIM_AHEAD rounds at once when nothing paces
        the claims (no rate, no warm-up)."""
        nonlocal stop, expired_at
        if ahead:
            current = conn.execute("SELECT status FROM campaigns WHERE id = ?", (row["id"],)).fetchone()
            if current is not None and current[0] == "SENDING":
                return [ahead.popleft() for _ in range(min(size, len(ahead)))]
            stop = "done"  # cancelled or paused meanwhile: what was claimed ahead goes back, unsent
            run.halt.set()
            return []
        batch = size * CLAIM_AHEAD if rounds > 1 and (gate is None or gate.active(conn) is None) else size
        expired = time.monotonic() - expired_at >= EXPIRED_EVERY
        claimed, short = claim_round(conn, row["id"], batch, bool(row["local_time"]), run.claim, ws,
                                     expired=expired, shaper=run.shaper, gate=gate)
        expired_at = time.monotonic() if expired else expired_at
        if not claimed:
            stop = short if short in ALLOWANCES else "done"
            if short == NOT_SENDING:  # (cancelled, paused): send nothing more
                run.halt.set()
            return []
        ahead.extend(claimed[size:])
        return claimed[:size]

    with ThreadPoolExecutor(max_workers=run.concurrency, thread_name_prefix="mkt-send") as pool:
        try:
            while True:
                jobs.heartbeat(conn)
                while stop is None and len(in_flight) < rounds:
                    size = min(share, run.concurrency - sum(len(claimed) for claimed, _ in in_flight))
                    if size <= 0:  # (concurrency 1: one message at a time)
                        break
                    claimed = next_round(size)
                    if not claimed:
                        break
                    run.pacer.wait(conn, len(claimed))  # the workspace's rate, shared by all its workers
                    in_flight.append((claimed, [pool.submit(run.deliver, m) for m in claimed]))
                if not in_flight:
                    _give_back_ahead(conn, run, ahead, ws)
                    if stop == "hourly_emails":
                        again_at(conn, row, next_hour())
                    elif stop == "monthly_emails":
                        month_used_up(conn, row)
                    else:
                        held = run.shaper.held(conn)
                        capped = gate.full(conn) if gate is not None else {}
                        nap = _lane_nap(conn, row["id"], held) if stop == "done" and not run.halt.is_set() else None
                        if nap is not None:  # only a lane held for a moment has messages due: wait for it
                            time.sleep(nap)
                            run.shaper.forget()
                            stop = None
                            continue
                        waiting = warmup_gate.held_back(conn, row["id"], gate) if capped else []
                        finish_or_wait(conn, row, helper=helper, held={**held, **capped},
                                       detail="; ".join(item["line"] for item in waiting) + "." if waiting else None)
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
                    _give_back_ahead(conn, run, ahead, ws)
                    campaigns.set_campaign_status(conn, row["id"], "PAUSED",
                                                  detail=f"Paused after {errors_in_a_row} transport errors in a row: "
                                                         f"{results[-1][1]}")
                    return
        except BaseException:
            run.halt.set()  # what the pool has not started is given back, not sent
            _record_handed_over(conn, in_flight, record_oldest)
            with contextlib.suppress(Exception):  # (else their claim expires and they are claimed again)
                _give_back_ahead(conn, run, ahead, ws)
            raise


def _give_back_ahead(conn: sqlite3.Connection, run: Send, ahead: deque[sqlite3.Row], workspace_id: int) -> None:
    """The rows claimed ahead and never handed over, given back as a halted round is (record.py:
    queued again, or cancelled with their campaign; their reservations released)."""
    if ahead:
        rows = list(ahead)
        ahead.clear()
        record_round(conn, run, {m["id"]: m for m in rows}, [(m["id"], HALTED, False) for m in rows], workspace_id)


def _lane_nap(conn: sqlite3.Connection, campaign_id: str, held: dict[str, float]) -> float | None:
    """Seconds to sleep before claiming again when a lane held for LANE_NAP seconds at most has
    messages due now (at most one second at a time, so the job's lease is renewed); else None."""
    soon = [lane for lane, wait in held.items() if wait <= LANE_NAP]
    if not soon:
        return None
    now = clock.now()
    due = conn.execute("SELECT 1 FROM email_messages WHERE campaign_id = ? AND status = 'queued'"
                       f" AND coalesce(lane, 'other') IN ({marks(soon)}) AND (retry_at IS NULL OR retry_at <= ?)"
                       " AND (due_at IS NULL OR due_at <= ?) LIMIT 1", (campaign_id, *soon, now, now)).fetchone()
    return None if due is None else max(0.01, min(1.0, *(held[lane] for lane in soon)))


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

"""Recording the answers of a round of an email send (services/delivery/sender.py runs the
rounds, handoff.py hands the messages over).

Transport answers (replies.py reads each against the reply rules): 250 -> delivered;
permanent (5xx) -> failed at once (the campaign goes on); throttle (421 4.7.28, 454 Throttling
failure ...) -> not a failure and not an attempt: back to `queued`, and the lane's rate is cut
(shaping.py, after the round is written, in a transaction of its own); transient (another 4xx,
or a connection problem) -> tried again after an exponential backoff with jitter (`backoff`:
1 minute, doubling, at most BACKOFF_MAX), failed once the message has been deferred for
MKT_SEND_GIVE_UP_HOURS (default 72). A message never handed over (HALTED) goes back to
`queued`, or to `cancelled` with its campaign. A round's answers are written in one
transaction, right after the server answered, so a message the server accepted and whose
round was recorded is never sent again; each message's reservation of the workspace's allowances is settled
in the same transaction (reservations.py).

Fencing: only rows still claimed under our token are written (`_owned` locks them till the
transaction ends). A worker paused past its claim finds its rows taken over by another
worker; its late answers are refused and logged, and the other worker's result stands.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.delivery import breakers, lanes, replies, shaping
from marketing_cli.services.delivery.bounce_classes import classify_reply
from marketing_cli.services.delivery.handoff import HALTED, Send
from marketing_cli.services.delivery.lanes import OTHER
from marketing_cli.services.delivery.reservations import settle
from marketing_cli.services.email import stats
from marketing_cli.storage import dialect
from marketing_cli.storage.db import marks
from marketing_cli.storage.postgres.errors import retry_conflicts

GIVE_UP_ENV = "MKT_SEND_GIVE_UP_HOURS"
GIVE_UP_HOURS = 72.0     # RFC 5321 section 4.5.4.1: give up after at least 4-5 days; providers' relays 72 h
BACKOFF_FIRST = 60.0     # seconds: the first deferral's wait
BACKOFF_MAX = 4 * 3600.0
JITTER = 0.2             # each wait drawn within +-20 % of its step, so deferred messages do not come back together


def give_up_hours() -> float:
    """MKT_SEND_GIVE_UP_HOURS: hours of deferrals after which a message fails (default 72)."""
    raw = os.environ.get(GIVE_UP_ENV, "").strip()
    if not raw:
        return GIVE_UP_HOURS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 24 * 30:
        raise MktError(400, f"{GIVE_UP_ENV} must be a number of hours from 0 to 720, not '{raw}'.")
    return value


def check_environment() -> None:
    """`mkt jobs run` and `mkt serve` refuse to start on a bad MKT_SEND_GIVE_UP_HOURS or an
    unreadable lanes, lane rates or reply rules table (exit 1 with the file and line)."""
    give_up_hours()
    replies.check_environment()
    lanes.check_environment()
    shaping.check_environment()


def backoff(deferrals: int) -> float:
    """Seconds before a message deferred `deferrals` times before (0 for the first) is tried again."""
    step = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(deferrals, 20))
    return max(BACKOFF_FIRST * (1 - JITTER), step * random.uniform(1 - JITTER, 1 + JITTER))


@dataclass
class Outcome:
    """What a round's answers say about its lanes: the first throttle of each throttled lane,
    and the lanes with a delivery and no throttle (shaping.Shaper.observe)."""

    temporary: int = 0
    refused: int = 0  # permanent refusals of a class the circuit breaker counts (breakers.py)
    throttled: dict[str, replies.Reply] = field(default_factory=dict)
    delivered: set[str] = field(default_factory=set)

log = logging.getLogger("mkt.email.send")


def _owned(conn: sqlite3.Connection, token: str, ids: list[int]) -> dict[int, str | None]:
    """Which of `ids` still carry our claim (in the recording's transaction, locked till its
    end), each with the hour of its hourly_emails reservation (None: it holds none)."""
    if not ids:
        return {}
    return {r[0]: r[1] for r in conn.execute(
        f"SELECT id, reserved_hour FROM email_messages WHERE id IN ({marks(ids)}) AND claim_token = ?"
        f" AND status = 'sending'{dialect.for_update(conn)}", (*ids, token))}


def record_round(conn: sqlite3.Connection, run: Send, row_of: dict[int, sqlite3.Row],
                 results: list[tuple[int, str | None, bool]], workspace_id: int) -> int:
    """Write a round's answers in one transaction; returns the number of temporary errors.
    Only rows still claimed under our token are written (fencing): the others were taken over
    by another worker while this one was paused past its claim; they are refused and logged.
    The lanes are told what the round said afterwards (cut, suspended or grown: shaping.py),
    and the circuit breaker reads the campaign's rates after a round with a refusal it counts,
    or every CHECK_EVERY answers (breakers.py; a trip pauses it: the next claim sees it)."""
    outcome = retry_conflicts(lambda: _record_once(conn, run, row_of, results, workspace_id),
                              f"recording messages of campaign {run.campaign_id}")
    run.shaper.observe(conn, outcome.throttled, outcome.delivered - outcome.throttled.keys())
    before, run.answered = run.answered, run.answered + len(results)
    if outcome.refused or run.answered // breakers.CHECK_EVERY > before // breakers.CHECK_EVERY:
        breakers.check(conn, run.campaign_id)
    return outcome.temporary


def _record_once(conn: sqlite3.Connection, run: Send, row_of: dict[int, sqlite3.Row],
                 results: list[tuple[int, str | None, bool]], workspace_id: int) -> Outcome:
    """One round's answers in one transaction. On PostgreSQL it is a READ COMMITTED writer
    without the advisory write lock (dialect.row_claim): what it writes is the rows of our
    claim (locked by _owned), per-contact counters, and counter rows the other workers of the
    campaign update too (the delivered trigger's email_campaign_counters, breakdowns and
    hours; usage_counters). Those shared rows are what the workers queue for, so they are
    taken last and held for the fewest round trips: the deliveries in one batch
    (stats.record_deliveries: the trigger locks the campaign's counter row first), the usage,
    COMMIT. A round of several variants (an A/B test) locks the campaign's counter rows first,
    in variant order, so two workers' rounds never wait for each other's (no deadlock)."""
    outcome = Outcome()
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
                outcome.delivered.add(row_of[message_id]["lane"] or OTHER)
            else:
                _record_error(conn, row_of[message_id], error, permanent, now, outcome)
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
            settle(conn, workspace_id, hour, released=released[hour], used=used[hour])
        # The reservations not cleared with a delivery (every accepted one too, in the rare
        # case that one of them was not recorded as delivered here)
        cleared = set(accepted) if delivered == len(accepted) else set()
        reserved = [i for i, hour in owned.items() if hour is not None and i not in cleared]
        if reserved:
            conn.execute(f"UPDATE email_messages SET reserved_hour = NULL WHERE id IN ({marks(reserved)})", reserved)
        if delivered and run.outbox is not None:
            stats.count_outbox_deliveries(conn, run.campaign_id, delivered, run.outbox)
    return outcome


def _record_error(conn: sqlite3.Connection, row: sqlite3.Row, error: str, permanent: bool, now: datetime,
                  outcome: Outcome) -> None:
    """One message's refusal, read by the reply rules (the module docstring)."""
    lane = row["lane"] or OTHER
    reply = replies.classify(error, lane, permanent)
    if reply.cls == replies.THROTTLE:  # not an attempt: its claim is undone, its lane slowed
        outcome.throttled.setdefault(lane, reply)
        conn.execute("UPDATE email_messages SET status = 'queued', attempts = attempts - 1 WHERE id = ?"
                     " AND status = 'sending'", (row["id"],))
        return
    since = clock.parse_ts(row["deferred_since"]) if row["deferred_since"] else now
    if reply.cls == replies.PERMANENT or now - since >= timedelta(hours=give_up_hours()):
        permanent = reply.cls == replies.PERMANENT
        bounce_class = classify_reply(error, permanent)
        stats.record_failure(conn, row["id"], error[:500], bounce_class=bounce_class)
        outcome.refused += bounce_class in breakers.COUNTED
        return
    outcome.temporary += 1
    conn.execute("UPDATE email_messages SET status = 'queued', failure_reason = ?, retry_at = ?,"
                 " deferred_since = coalesce(deferred_since, ?) WHERE id = ? AND status = 'sending'",
                 (error[:500], clock.format_ts(now + timedelta(seconds=backoff(row["attempts"]))),
                  clock.format_ts(now), row["id"]))

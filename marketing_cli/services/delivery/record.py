"""Recording the answers of a round of an email send (services/delivery/sender.py runs the
rounds, handoff.py hands the messages over).

Transport answers: 250 -> delivered; 5xx -> failed at once (the campaign goes on); 4xx or
a connection problem -> tried again after a backoff (RETRY_DELAYS: 30 s, 2 min), failed
after MAX_ATTEMPTS. A message never handed over (HALTED) goes back to `queued`, or to
`cancelled` with its campaign. A round's answers are written in one transaction, right
after the server answered, so a message the server accepted and whose round was recorded
is never sent again; each message's reservation of the workspace's allowances is settled
in the same transaction (reservations.py).

Fencing: only rows still claimed under our token are written (`_owned` locks them till the
transaction ends). A worker paused past its claim finds its rows taken over by another
worker; its late answers are refused and logged, and the other worker's result stands.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from datetime import timedelta

from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.delivery.bounce_classes import classify_reply
from marketing_cli.services.delivery.handoff import HALTED, Send
from marketing_cli.services.delivery.reservations import settle
from marketing_cli.services.email import stats
from marketing_cli.storage import dialect
from marketing_cli.storage.db import marks
from marketing_cli.storage.postgres.errors import retry_conflicts

MAX_ATTEMPTS = 3
RETRY_DELAYS = (30, 120)

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
    by another worker while this one was paused past its claim; they are refused and logged."""
    return retry_conflicts(lambda: _record_once(conn, run, row_of, results, workspace_id),
                           f"recording messages of campaign {run.campaign_id}")


def _record_once(conn: sqlite3.Connection, run: Send, row_of: dict[int, sqlite3.Row],
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
                stats.record_failure(conn, message_id, error[:500], bounce_class=classify_reply(error, permanent))
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
            settle(conn, workspace_id, hour, released=released[hour], used=used[hour])
        # The reservations not cleared with a delivery (every accepted one too, in the rare
        # case that one of them was not recorded as delivered here)
        cleared = set(accepted) if delivered == len(accepted) else set()
        reserved = [i for i, hour in owned.items() if hour is not None and i not in cleared]
        if reserved:
            conn.execute(f"UPDATE email_messages SET reserved_hour = NULL WHERE id IN ({marks(reserved)})", reserved)
        if delivered and run.outbox is not None:
            stats.count_outbox_deliveries(conn, run.campaign_id, delivered, run.outbox)
    return temporary

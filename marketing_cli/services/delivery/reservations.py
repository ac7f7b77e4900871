"""The email send's reservations of the workspace's monthly_emails and hourly_emails
allowances (services/delivery/sender.py sends; services/account/billing.py keeps the counters).

The monthly_emails and hourly_emails allowances hold for the workspace as a whole too: a
round is claimed only as far as both have room, reserved in the claim's transaction
(`reserve`, from claim.py's `claim_round`: one message of the month's and one of the hour's
allowance each), and each message's reservation is settled when its answer is recorded
(`settle`, from record.py): delivered, it counts as used; not delivered (a failure, a retry,
a message given back: `give_back`), it returns to the allowances. So any number of workers,
and any number of campaigns sending at once, together deliver at most what the month and
the hour allow, and the counters still read delivered messages. (What the send does when
one of them is used up: finish.py.)

A message keeps the hour of its reservation (its month is the hour's) in `reserved_hour`
until its answer is recorded. Counter rows are locked newest hour first, each hour's month
just before it (ALLOWANCES' order), wherever reservations are taken or settled, so two
transactions never wait for each other's rows (no deadlock at an hour's or a month's turn).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any

from marketing_cli.services.account import billing

ALLOWANCES = ("monthly_emails", "hourly_emails")  # reserved per claimed message; counter rows locked in this order


def reserve(conn: sqlite3.Connection, workspace_id: int, rows: list[sqlite3.Row]
            ) -> tuple[list[sqlite3.Row], str | None, str]:
    """The claimable `rows` the monthly_emails and hourly_emails allowances cover, in the
    claim's transaction: (rows kept, the allowance that left some out or None, the hour
    reserved). Counter rows are locked newest hour first here and wherever reservations are
    settled, each hour's month just before it (`settle`), so two transactions never wait for
    each other's rows (no deadlock at an hour's or a month's turn)."""
    hour = billing.period_of("hourly_emails")
    carried = {r["id"] for r in rows if r["reserved_hour"] == hour}  # a taken-over claim's reservation
    wanted = [r for r in rows if r["id"] not in carried]
    granted, short = billing.reserve(conn, workspace_id, ALLOWANCES, len(wanted))
    stale = Counter(r["reserved_hour"] for r in wanted[:granted] if r["reserved_hour"] is not None)
    for period in sorted(stale, reverse=True):  # an earlier hour's reservation of a taken-over claim
        settle(conn, workspace_id, period, released=stale[period])
    keep = carried | {r["id"] for r in wanted[:granted]}
    return [r for r in rows if r["id"] in keep], short, hour


def settle(conn: sqlite3.Connection, workspace_id: int, hour: str, *, released: int, used: int = 0) -> None:
    """End `released` reservations made in `hour` (`used` of them delivered, or delivered
    without one): of its month's allowance, then of the hour's (ALLOWANCES' lock order)."""
    billing.settle(conn, workspace_id, "monthly_emails", hour[:7], released=released, used=used)
    billing.settle(conn, workspace_id, "hourly_emails", hour, released=released, used=used)


def give_back(conn: sqlite3.Connection, workspace_id: int, where: str, params: tuple[Any, ...]) -> None:
    """Settle, unused, the reservations of the claimed messages `where` selects (in the write
    transaction that takes them out of `sending` without an answer)."""
    for period, count in conn.execute(f"SELECT reserved_hour, count(*) FROM email_messages WHERE {where}"
                                      " AND reserved_hour IS NOT NULL GROUP BY reserved_hour ORDER BY reserved_hour DESC",
                                      params).fetchall():
        settle(conn, workspace_id, period, released=count)

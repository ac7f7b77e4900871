"""The workspace's send rate, one for all its processes: a pacer whose clock is a database row.

MKT_SEND_RATE and MKT_SMS_RATE (kernel/pacing.py reads them) are messages per second for the
workspace as a whole, however many `mkt jobs run` workers and send helpers share the work,
on one machine or several. Each channel of a workspace has one row of `pace_slots`: the
earliest start of its next message (`next_at`, microseconds since 1970-01-01 UTC). A worker
books the next n starts with one statement in a transaction of its own,

    start = max(next_at, now);  next_at = start + n x interval;  RETURNING start

then sleeps until `start` outside any transaction (nothing is held during the sleep or the
provider call, so it works behind PgBouncer in transaction mode: no session state, no
advisory lock, no LISTEN/NOTIFY). The row's lock orders concurrent bookings on PostgreSQL,
the file's write lock on SQLite. As with one process's pacer, the k-th message of a send
starts no earlier than k / rate seconds after the first, and a pause (the senders were
slower than the rate) is not made up for with a burst afterwards. Rate 0 never touches the
database.

The clock is the database's on PostgreSQL (the statement's own start time, so one value for
the whole statement), where the workers run on several machines: a machine whose clock runs
ahead or behind books the same starts and waits the same time as the others, as the wait is
the booked start less the database's now, both read by the booking. On SQLite (one file, one
machine) it is kernel/clock's UTC.
"""

from __future__ import annotations

import sqlite3
import threading
import time

from marketing_cli.kernel import clock
from marketing_cli.storage import dialect

EMAIL = "email"
SMS = "sms"

# One statement: insert the first booking or move the row's next start, answering the start
# and the now it was booked at ({now}: a parameter, or the database's clock on PostgreSQL).
_BOOK = ("INSERT INTO pace_slots (workspace_id, channel, next_at) VALUES (:ws, :channel, {now} + :span)"
         " ON CONFLICT (workspace_id, channel) DO UPDATE SET next_at ="
         " CASE WHEN pace_slots.next_at > {now} THEN pace_slots.next_at ELSE {now} END + :span"
         " RETURNING next_at - :span, {now}")
# PostgreSQL's statement_timestamp(): the same value wherever the statement reads it.
_DATABASE_NOW_US = "CAST(extract(epoch FROM statement_timestamp()) * 1000000 AS BIGINT)"


def now_us() -> int:
    """kernel/clock's UTC now, in whole microseconds since 1970-01-01."""
    moment = clock.utcnow()
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


class SharedPacer:
    """Spaces the starts of a workspace's messages on one channel `1 / rate` seconds apart,
    across threads, processes and machines (the module docstring)."""

    def __init__(self, workspace_id: int, channel: str, rate: float) -> None:
        self.workspace_id = workspace_id
        self.channel = channel
        self.interval = 1.0 / rate if rate > 0 else 0.0
        # Threads that share one connection use it one at a time: the bookings, and the SMS
        # hand-off's revocation watch (services/sms/handoff.py), which reads on the same connection.
        self.lock = threading.Lock()

    def book(self, conn: sqlite3.Connection, count: int = 1) -> float:
        """Book the next `count` starts; the seconds to wait for the first (0: now)."""
        span = round(count * self.interval * 1_000_000)
        with self.lock:  # (checked under the lock: another thread's statement is not a transaction)
            if conn.in_transaction:  # the row's lock would be held through the sleep
                raise RuntimeError("the pacer books its starts outside any transaction")
            sql = _BOOK.format(now=_DATABASE_NOW_US if dialect.postgresql(conn) else ":now")
            start, now = conn.execute(sql, {"ws": self.workspace_id, "channel": self.channel, "now": now_us(),
                                            "span": span}).fetchall()[0]
        return max(0, start - now) / 1_000_000

    def wait(self, conn: sqlite3.Connection, count: int = 1) -> None:
        """Book the next `count` starts and sleep until the first of them. Rate 0 never waits."""
        if not self.interval or count <= 0:
            return
        delay = self.book(conn, count)
        if delay > 0:
            time.sleep(delay)

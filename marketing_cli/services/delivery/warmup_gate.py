"""A warm-up as the send sees it (warmup.py holds the schedule; claim.py, finish.py and
lane_view.py call this module).

- `Gate.active`: the send's domain's warm-up while it runs, read at most every FRESH seconds;
  None (one small query every FRESH seconds, nothing else) when there is none: the claim is then
  the one it was without warm-ups.
- `Gate.take`: in the claim's transaction, each newly claimed message of a capped lane counts
  against its lane's cap of the UTC day (warmup_counters, the row locked by the upsert on
  PostgreSQL, the write lock on SQLite: set-based, as billing.reserve holds hourly_emails), so
  all workers and campaigns of the domain together stay under it; those beyond stay queued.
  A message tried again counts again: the cap is on what the provider is handed.
- `Gate.full`: the lanes whose cap is used up today, left out of the claim (claim.py
  `_without_lanes`) so the other lanes go on, held until the next UTC midnight (finish.py).
- `rank`: while a warm-up runs, the send job gives its queued messages their recipient's
  engagement rank (email_messages.warm_rank) and the claim takes them by it: opened or clicked
  in the last 30 days first, then 90, then contacts created in the last 30 days, then the rest.
  The claims of a warming-up domain lock its counter rows first (`Gate.lock`): one after
  the other, so the order holds across workers.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections import Counter
from datetime import timedelta
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.delivery import warmup
from marketing_cli.services.delivery.lanes import NAMES
from marketing_cli.storage.db import marks, transaction

FRESH = 5.0  # seconds a worker reuses its reading of the warm-up
RECENT, ENGAGED = 30, 90  # days
MARK = "lane's warm-up cap until"  # in WAIT_LINE: a status_detail of ours
WAIT_LINE = "{count:,} message{s} wait for the {lane} lane's warm-up cap until {until:%Y-%m-%d %H:%M} UTC" \
            " (day {day} of {days}: {cap:,} a day)"


def domain_of(conn: sqlite3.Connection, campaign_id: str) -> int | None:
    row = conn.execute("SELECT s.domain_id FROM campaigns c JOIN sender_identities s ON s.id = c.sender_identity_id"
                       " WHERE c.id = ?", (campaign_id,)).fetchone()
    return row[0] if row else None


class Gate:
    """The warm-up of one send's domain (one per worker)."""

    def __init__(self, domain_id: int | None) -> None:
        self.domain_id = domain_id
        self._warm: warmup.Warmup | None = None
        self._read_at = float("-inf")

    @classmethod
    def for_campaign(cls, conn: sqlite3.Connection, campaign_id: str) -> Gate:
        return cls(domain_of(conn, campaign_id))

    def active(self, conn: sqlite3.Connection) -> warmup.Warmup | None:
        if self.domain_id is None:
            return None
        if time.monotonic() - self._read_at >= FRESH:
            self._warm, self._read_at = warmup.find(conn, self.domain_id), time.monotonic()
        warm = self._warm
        return warm if warm is not None and warm.state == "active" and warm.caps_today() else None

    def full(self, conn: sqlite3.Connection) -> dict[str, float]:
        """The lanes whose cap is used up today: lane -> seconds until the next UTC midnight."""
        warm = self.active(conn)
        if warm is None:
            return {}
        caps, used = warm.caps_today(), warmup.used_today(conn, warm.domain_id)
        wait = max(0.0, (warmup.tomorrow() - clock.utcnow()).total_seconds())
        return {lane: wait for lane, cap in caps.items() if used.get(lane, 0) >= cap}

    def lock(self, conn: sqlite3.Connection) -> None:
        """At the start of a claim's transaction: lock the day's counter rows of the capped lanes
        (the upsert's row locks on PostgreSQL; SQLite's claim holds the write lock already), so
        the claims of a warming-up domain follow one another: each reads the queue after the
        last one committed, and the most engaged recipients go first across all workers."""
        warm = self.active(conn)
        if warm is None:
            return
        lanes = sorted(warm.caps_today())
        conn.execute("INSERT INTO warmup_counters (domain_id, day, lane, used) VALUES "
                     + ", ".join(["(?, ?, ?, 0)"] * len(lanes))
                     + " ON CONFLICT (domain_id, day, lane) DO UPDATE SET used = warmup_counters.used",
                     [x for lane in lanes for x in (warm.domain_id, warmup.today().isoformat(), lane)])

    def take(self, conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[sqlite3.Row]:
        """The claimed rows the day's caps let through, counted (in the claim's transaction). A row
        taken over from a worker whose claim expired was counted when first claimed."""
        warm = self.active(conn)
        if warm is None or not rows:
            return rows
        caps = warm.caps_today()
        wanted = Counter(r["lane"] or "other" for r in rows if r["status"] == "queued" and (r["lane"] or "other") in caps)
        if not wanted:
            return rows
        day, lanes = warmup.today().isoformat(), sorted(wanted)
        found = dict(conn.execute(
            "INSERT INTO warmup_counters (domain_id, day, lane, used) VALUES " + ", ".join(["(?, ?, ?, 0)"] * len(lanes))
            + " ON CONFLICT (domain_id, day, lane) DO UPDATE SET used = warmup_counters.used RETURNING lane, used",
            [x for lane in lanes for x in (warm.domain_id, day, lane)]).fetchall())
        room = {lane: max(0, min(wanted[lane], caps[lane] - found[lane])) for lane in lanes}
        for lane in lanes:
            if room[lane]:
                conn.execute("UPDATE warmup_counters SET used = used + ? WHERE domain_id = ? AND day = ? AND lane = ?",
                             (room[lane], warm.domain_id, day, lane))
        kept = []
        for r in rows:
            lane = r["lane"] or "other"
            if r["status"] == "queued" and lane in room:
                if room[lane] <= 0:
                    continue
                room[lane] -= 1
            kept.append(r)
        return kept

    def give_back(self, conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> None:
        """Uncount claimed rows that were not claimed after all (the allowances had no room)."""
        warm = self.active(conn)
        if warm is None or not rows:
            return
        caps = warm.caps_today()
        back = Counter(r["lane"] or "other" for r in rows if r["status"] == "queued" and (r["lane"] or "other") in caps)
        for lane, n in sorted(back.items()):
            conn.execute("UPDATE warmup_counters SET used = CASE WHEN used > ? THEN used - ? ELSE 0 END"
                         " WHERE domain_id = ? AND day = ? AND lane = ?",
                         (n, n, warm.domain_id, warmup.today().isoformat(), lane))


def rank(conn: sqlite3.Connection, campaign_id: str) -> int:
    """At the start of a send job: give the campaign's queued messages without one their
    engagement rank (the module docstring) when its domain is warming up (how many were
    ranked), and take back yesterday's "wait for the warm-up cap" status_detail (written again
    by finish.py if the send still waits)."""
    detail = conn.execute("SELECT status_detail FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
    if detail is not None and detail[0] and MARK in detail[0]:
        with transaction(conn):
            conn.execute("UPDATE campaigns SET status_detail = NULL WHERE id = ? AND status = 'SENDING'"
                         " AND status_detail LIKE ?", (campaign_id, f"%{MARK}%"))
    if Gate.for_campaign(conn, campaign_id).active(conn) is None:
        return 0
    now = clock.utcnow()
    d30, d90 = (clock.format_ts(now - timedelta(days=n)) for n in (RECENT, ENGAGED))
    with transaction(conn):
        return conn.execute(
            "UPDATE email_messages SET warm_rank = coalesce((SELECT CASE"
            " WHEN c.last_opened_at >= ? OR c.last_clicked_at >= ? THEN 0"
            " WHEN c.last_opened_at >= ? OR c.last_clicked_at >= ? THEN 1"
            " WHEN c.created_at >= ? THEN 2 ELSE 3 END FROM contacts c WHERE c.id = email_messages.contact_id), 3)"
            " WHERE campaign_id = ? AND status = 'queued' AND warm_rank IS NULL",
            (d30, d30, d90, d90, d30, campaign_id)).rowcount


def held_back(conn: sqlite3.Connection, campaign_id: str, gate: Gate | None = None) -> list[dict[str, Any]]:
    """One item per lane whose warm-up cap is used up today and holds some of the campaign's
    queued messages (the `held_back` of the campaign view, lane_view.py)."""
    gate = gate or Gate.for_campaign(conn, campaign_id)
    full = gate.full(conn)
    warm = gate.active(conn)
    if not full or warm is None:
        return []
    lanes = sorted(full)
    counts = dict(conn.execute(f"SELECT coalesce(lane, 'other'), count(*) FROM email_messages WHERE campaign_id = ?"
                               f" AND status = 'queued' AND coalesce(lane, 'other') IN ({marks(lanes)})"
                               " GROUP BY coalesce(lane, 'other')", (campaign_id, *lanes)).fetchall())
    until, caps = warmup.tomorrow(), warm.caps_today()
    items = []
    for lane in lanes:
        count = counts.get(lane, 0)
        if not count:
            continue
        line = WAIT_LINE.format(count=count, s="s" if count != 1 else "", lane=NAMES.get(lane, lane), until=until,
                                day=warm.day, days=warm.schedule.days, cap=caps[lane])
        items.append({"lane": lane, "messages": count, "state": "warmup", "opens_at": clock.format_ts(until),
                      "until": clock.format_ts(until + timedelta(days=max(0, math.ceil(count / caps[lane]) - 1)
                                                      if caps[lane] else 0)),
                      "rate": None, "reason": f"warm-up day {warm.day} of {warm.schedule.days}: "
                                              f"{caps[lane]:,} a day", "line": line})
    return items

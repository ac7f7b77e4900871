"""Each provider lane's rate, held for a workspace across all its workers and machines, cut when
the relay pushes back and grown back once the replies are clean (docs/deliverability.md
"Provider lanes"; KumoMTA's shaping.toml and its automation rules are the model, TCP's AIMD,
RFC 5681, the arithmetic).

A lane has no rate of its own until a relay throttles it (replies.py), unless lane_rates.csv
(or the operator's copy named by MKT_LANE_RATES) gives it a ceiling. A throttle cuts the lane's
rate (from its ceiling, or `start`, times `decrease`, never below `floor`) at most once per
`every` seconds, whichever worker saw it; a `suspend` rule also holds the lane until its
duration has passed. A round whose messages of a slowed lane were all delivered grows its rate
by `increase` at most once per `every` seconds, back to its ceiling (none: the lane is free again).

The state is one row of lane_state per workspace and lane, the pacer's clock in it as in
services/account/pace.py: a claim (claim.py, in its transaction) books the starts of a slowed
lane's messages that have come (one every 1/rate seconds; those left unused for SLACK seconds
lapse) and leaves the others queued. No message waits inside a round for a start to come: a
round is recorded when its slowest message is answered, so a sleeper would hold the other
lanes' messages back. A claim leaves out the lanes that are suspended or whose next start has
not come, so the other lanes' messages fill the rounds (claim.py tops a round up once when a lane turns out
full). Each worker reads the rows at most every FRESH seconds while no lane is slowed or
suspended: with nothing throttled that is one small query per FRESH seconds and nothing else;
while one is, at every claim.

lane_view.py says what a campaign's held lanes hold and why (`held_back`).
"""

from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.data_tables import DataTable, csv_rows
from marketing_cli.services.account.pace import now_us
from marketing_cli.services.delivery.lanes import OTHER
from marketing_cli.services.delivery.replies import LANES, Reply
from marketing_cli.storage import dialect
from marketing_cli.storage.db import transaction

RATES_ENV = "MKT_LANE_RATES"
BUILT_IN = Path(__file__).with_name("lane_rates.csv")
SLACK = 0.25    # seconds: the starts of a slowed lane that went unused this long ago may still be booked
FRESH = 0.5     # seconds a worker reuses its reading of the lanes' rows
CURSOR_FRESH = 5.0  # seconds a worker's claim cursors hold (claim.py `_without_lanes`)
_DB_NOW_US = "CAST(extract(epoch FROM statement_timestamp()) * 1000000 AS BIGINT)"
RATE_COLUMNS = ("lane", "rate", "start", "floor", "decrease", "increase", "every")


@dataclass(frozen=True)
class LaneRate:
    lane: str
    rate: float        # the lane's ceiling; 0 = none
    start: float       # where the first cut starts without a ceiling
    floor: float
    decrease: float
    increase: float
    every: float
    source: str


def parse_rates(text: str, origin: str) -> dict[str, LaneRate]:
    rates: dict[str, LaneRate] = {}
    header = False
    for n, cells in csv_rows(text):
        if not header:
            if [c.lower() for c in cells[:len(RATE_COLUMNS)]] != list(RATE_COLUMNS):
                raise MktError(400, f"{origin} line {n}: the header must be {','.join(RATE_COLUMNS)},source.")
            header = True
            continue
        lane = cells[0].lower()
        if lane not in LANES:
            raise MktError(400, f"{origin} line {n}: '{cells[0]}' is not a lane ({', '.join(LANES)}).")
        try:
            rate, start, floor, decrease, increase, every = (float(c) for c in cells[1:7])
        except ValueError:
            raise MktError(400, f"{origin} line {n}: rate, start, floor, decrease, increase and every are "
                                "numbers.") from None
        if not all(map(math.isfinite, (rate, start, floor, increase, every))) or min(rate, increase) < 0 \
                or not 0 < floor <= start or not 0 < decrease < 1 or every <= 0 or (rate and floor > rate):
            raise MktError(400, f"{origin} line {n}: expected rate >= 0, 0 < floor <= start (and <= rate when "
                                "set), 0 < decrease < 1, increase >= 0, every > 0.")
        rates[lane] = LaneRate(lane, rate, start, floor, decrease, increase, every, ", ".join(cells[7:]))
    if OTHER not in rates:
        raise MktError(400, f"{origin}: no row for the `other` lane (the lanes without a row take it).")
    return rates


RATES = DataTable(RATES_ENV, BUILT_IN, parse_rates, "lane rates table")


def check_environment() -> None:
    """`mkt jobs run` and `mkt serve` refuse to start on a lane rates table they cannot read."""
    RATES.current()


def lane_rate(lane: str, rates: dict[str, LaneRate] | None = None) -> LaneRate:
    rates = rates if rates is not None else RATES.current()
    return rates.get(lane) or rates[OTHER]


@dataclass(frozen=True)
class State:
    lane: str
    rate: float                    # messages per second now; 0 = no rate of its own
    next_at: int                   # the pacer's next start, microseconds since 1970
    suspended_until: str | None
    reason: str | None


class Shaper:
    """One worker's view of its workspace's lanes (the module docstring)."""

    def __init__(self, workspace_id: int) -> None:
        self.workspace_id = workspace_id
        self._states: dict[str, State] = {}
        self._read_at = float("-inf")
        self._cursors: dict[tuple[str, ...], int] = {}
        self._cursors_at = time.monotonic()

    def states(self, conn: sqlite3.Connection) -> dict[str, State]:
        """The lanes with a rate or a suspension: read again after FRESH seconds, or at every call
        while some lane has one (a claim then sees the starts the other workers booked)."""
        if not self._states and time.monotonic() - self._read_at < FRESH:
            return self._states
        rates = RATES.current()
        found = {r[0]: State(r[0], r[1] or lane_rate(r[0], rates).rate, r[2], r[3], r[4]) for r in conn.execute(
            "SELECT lane, rate, next_at, suspended_until, reason FROM lane_state WHERE workspace_id = ?",
            (self.workspace_id,))}
        for lane, limits in rates.items():  # a ceiling holds before any push-back
            if limits.rate and lane not in found:
                found[lane] = State(lane, limits.rate, 0, None, None)
        now = clock.now()
        self._states = {k: v for k, v in found.items() if v.rate > 0 or (v.suspended_until or "") > now}
        self._read_at = time.monotonic()
        return self._states

    def forget(self) -> None:
        self._read_at = float("-inf")

    def cursor(self, held: list[str], local: bool) -> int:
        """Where a claim that leaves the `held` lanes out starts (claim.py `_without_lanes`): the
        first message it found there last time, 0 for a local-time send (its claim goes by due
        time) and every CURSOR_FRESH seconds (a message that came back to the queue below the
        cursor, a retry now due, is found again then, and at the latest when the send job
        runs again)."""
        if local:
            return 0
        if time.monotonic() - self._cursors_at >= CURSOR_FRESH:
            self._cursors, self._cursors_at = {}, time.monotonic()
        return self._cursors.get(tuple(held), 0)

    def advance(self, held: list[str], local: bool, first: int) -> None:
        if not local:
            self._cursors[tuple(held)] = max(first, self._cursors.get(tuple(held), 0))

    def held(self, conn: sqlite3.Connection) -> dict[str, float]:
        """The lanes a claim leaves out now: lane -> seconds until it may be claimed again."""
        return self._held(self.states(conn))

    @staticmethod
    def _held(states: dict[str, State]) -> dict[str, float]:
        if not states:
            return {}
        now, us = clock.utcnow(), now_us()
        held = {}
        for s in states.values():
            wait = 0.0
            if s.suspended_until and s.suspended_until > clock.format_ts(now):
                wait = (clock.parse_ts(s.suspended_until) - now).total_seconds()
            if s.rate > 0 and s.next_at > us:
                wait = max(wait, (s.next_at - us) / 1e6)
            if wait > 0:
                held[s.lane] = wait
        return held

    def book(self, conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[sqlite3.Row]:
        """In a claim's transaction: the `rows` a claim keeps. A slowed lane's are booked on its
        pacer as far as its starts have come (the others stay queued), a suspended lane's stay queued."""
        states = self._states  # (as the claim's `held` read them)
        if not states or not rows:
            return rows
        lanes = {r["lane"] or OTHER for r in rows} & states.keys()
        if not lanes:
            return rows
        held = self._held(states)
        now = clock.now()
        dropped: set[int] = set()
        for lane in sorted(lanes):
            mine = [r for r in rows if (r["lane"] or OTHER) == lane]
            state = states[lane]
            if lane in held or (state.suspended_until and state.suspended_until > now):
                dropped.update(r["id"] for r in mine)
                continue
            if state.rate <= 0:
                continue
            kept = self._book_lane(conn, lane, state.rate, mine)
            dropped.update(r["id"] for r in mine[kept:])
        return [r for r in rows if r["id"] not in dropped]

    def _book_lane(self, conn: sqlite3.Connection, lane: str, rate: float, rows: list[sqlite3.Row]) -> int:
        """Book up to len(rows) of `lane`'s starts that have come (SLACK seconds back at most);
        how many were booked. A message never waits in a round for its start: a round waits
        for its slowest message, so one sleeper would hold the other lanes' messages back."""
        conn.execute("INSERT INTO lane_state (workspace_id, lane, rate, next_at) VALUES (?, ?, 0, 0)"
                     " ON CONFLICT (workspace_id, lane) DO NOTHING", (self.workspace_id, lane))
        now_sql = _DB_NOW_US if dialect.postgresql(conn) else str(now_us())
        row = conn.execute(f"SELECT rate, next_at, {now_sql} FROM lane_state WHERE workspace_id = ? AND lane = ?"
                           f"{dialect.for_update(conn)}", (self.workspace_id, lane)).fetchone()
        interval = 1e6 / (row[0] or rate)
        if row[1] > row[2]:
            return 0
        first = max(row[1], row[2] - SLACK * 1e6)
        count = min(len(rows), int((row[2] - first) // interval) + 1)
        conn.execute("UPDATE lane_state SET next_at = ? WHERE workspace_id = ? AND lane = ?",
                     (round(first + count * interval), self.workspace_id, lane))
        return count

    def observe(self, conn: sqlite3.Connection, throttled: dict[str, Reply], clean: set[str]) -> None:
        """After a round was recorded, in a transaction of its own: cut the throttled lanes (and
        suspend them where a rule says so), grow the slowed lanes whose replies were clean."""
        if not throttled and not (clean & self._states.keys()):  # (as the last claim read them)
            return
        rates = RATES.current()
        moment = clock.utcnow()
        now = clock.format_ts(moment)
        with transaction(conn):
            for lane, reply in sorted(throttled.items()):
                limits = lane_rate(lane, rates)
                before = clock.format_ts(moment - timedelta(seconds=limits.every))
                until = (clock.format_ts(moment + timedelta(seconds=reply.rule.duration))
                         if reply.rule is not None and reply.rule.action == "suspend" else None)
                base = limits.rate or limits.start
                cut = f"(CASE WHEN lane_state.rate > 0 THEN lane_state.rate ELSE {base!r} END * {limits.decrease!r})"
                due = "(lane_state.cut_at IS NULL OR lane_state.cut_at <= :before)"
                conn.execute(
                    "INSERT INTO lane_state (workspace_id, lane, rate, next_at, suspended_until, reason, reason_at,"
                    " cut_at) VALUES (:ws, :lane, :first, 0, :until, :reason, :now, :now)"
                    " ON CONFLICT (workspace_id, lane) DO UPDATE SET"
                    f" rate = CASE WHEN {due} THEN CASE WHEN {cut} < :floor THEN :floor ELSE {cut} END"
                    " ELSE lane_state.rate END,"
                    f" cut_at = CASE WHEN {due} THEN :now ELSE lane_state.cut_at END,"
                    " suspended_until = CASE WHEN :until IS NOT NULL AND (lane_state.suspended_until IS NULL"
                    " OR lane_state.suspended_until < :until) THEN :until ELSE lane_state.suspended_until END,"
                    " reason = :reason, reason_at = :now",
                    {"ws": self.workspace_id, "lane": lane, "first": max(limits.floor, base * limits.decrease),
                     "until": until, "reason": reply.shown, "now": now, "before": before, "floor": limits.floor})
            for lane in sorted(clean - throttled.keys()):
                limits = lane_rate(lane, rates)
                top = limits.rate or limits.start
                conn.execute(
                    "UPDATE lane_state SET rate = CASE WHEN rate + :inc >= :top THEN :free ELSE rate + :inc END,"
                    " grown_at = :now WHERE workspace_id = :ws AND lane = :lane AND rate > 0"
                    " AND (cut_at IS NULL OR cut_at <= :before) AND (grown_at IS NULL OR grown_at <= :before)",
                    {"inc": limits.increase, "top": top, "free": limits.rate, "now": now, "ws": self.workspace_id,
                     "lane": lane, "before": clock.format_ts(moment - timedelta(seconds=limits.every))})
        self.forget()

"""Caps on how much may go out in a period: the `over_cap` groups of an estimate.

A cap is `Cap(name, left, window_end, until, reason)`: at most `left` messages due before
`window_end` go; the latest of them beyond that move to `over_cap` until `until`, when the cap
has room again. Today's caps are the workspace's allowances (monthly_emails and
hourly_emails, as the send reserves them: services/delivery/reservations.py). A warm-up's
daily cap per provider lane plugs in with `register(source)`: a source is
`source(conn, workspace_id, channel) -> list[Cap]`, asked for every estimate of the channel.
A cap that depends on the campaign (its sending domain's warm-up: `warmup_caps`, the day's cap
per provider lane, services/delivery/warmup.py) is `campaign_caps(conn, row, parts)`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from marketing_cli.kernel import clock
from marketing_cli.services.estimates.groups import Part


@dataclass(frozen=True)
class Cap:
    name: str
    left: int
    window_end: datetime | None     # parts due before it count against `left` (None: every part)
    until: datetime | None          # when the over_cap part has room again
    reason: str


Source = Callable[[sqlite3.Connection, int, str], list[Cap]]
SOURCES: list[Source] = []
_COUNTED = ("now", "waiting", "held")


def register(source: Source) -> Source:
    """Add a source of caps (a warm-up's daily cap per lane); usable as a decorator."""
    if source not in SOURCES:
        SOURCES.append(source)
    return source


def _next_month(moment: datetime) -> datetime:
    first = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return (first + timedelta(days=32)).replace(day=1)


@register
def allowance_caps(conn: sqlite3.Connection, workspace_id: int, channel: str) -> list[Cap]:
    """The monthly_emails and hourly_emails allowances left now (email only: SMS is prepaid)."""
    if channel != "email":
        return []
    from marketing_cli.services.account import billing

    now = clock.utcnow().astimezone(UTC)
    month, hour = _next_month(now), now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    month_left = billing.remaining(conn, workspace_id, "monthly_emails")
    hour_left = billing.remaining(conn, workspace_id, "hourly_emails")
    return [Cap("monthly_emails", month_left, month, month,
                f"the monthly_emails allowance: {month_left:,} left this month"),
            Cap("hourly_emails", hour_left, hour, hour, f"the hourly_emails allowance: {hour_left:,} left this hour")]


def caps_for(conn: sqlite3.Connection, workspace_id: int, channel: str) -> list[Cap]:
    return [cap for source in SOURCES for cap in source(conn, workspace_id, channel)]


def campaign_caps(conn: sqlite3.Connection, row: sqlite3.Row | None, parts: list[Part],
                  now: datetime | None = None) -> list[Cap]:
    """The caps of one email campaign's own: its domain's warm-up (`warmup_caps`)."""
    return warmup_caps(conn, row, parts, now) if row is not None else []


def warmup_caps(conn: sqlite3.Connection, row: sqlite3.Row, parts: list[Part],
                now: datetime | None = None) -> list[Cap]:
    """While the campaign's sending domain warms up, what is over today's room of its lanes
    waits for tomorrow (UTC). Frozen (its messages have their lanes): each capped lane's queued
    messages beyond its room. Not frozen yet (the audience's split by lane is not known): only
    when every lane is capped today, the audience beyond their room together."""
    from marketing_cli.services.delivery import warmup, warmup_gate
    from marketing_cli.services.delivery.lanes import NAMES
    from marketing_cli.services.delivery.replies import LANES

    gate = warmup_gate.Gate.for_campaign(conn, row["id"])
    warm = gate.active(conn)
    if warm is None:
        return []
    moment = now or clock.utcnow()
    tomorrow = warmup.tomorrow()
    caps, used = warm.caps_today(), warmup.used_today(conn, warm.domain_id)
    room = {lane: max(0, cap - used.get(lane, 0)) for lane, cap in caps.items()}
    counted = sum(p.recipients for p in parts if p.state in _COUNTED
                  and (max(p.until, moment) if p.until else moment) < tomorrow)
    if row["status"] in ("IN_REVIEW", "SENDING", "PAUSED"):
        queued = dict(conn.execute("SELECT coalesce(lane, 'other'), count(*) FROM email_messages WHERE campaign_id = ?"
                                   " AND status = 'queued' GROUP BY coalesce(lane, 'other')", (row["id"],)).fetchall())
        over = {lane: queued.get(lane, 0) - room[lane] for lane in room if queued.get(lane, 0) > room[lane]}
    elif set(LANES) <= set(caps):
        total = sum(room.values())
        over = {"all": counted - total} if counted > total else {}
    else:
        return []
    if not over:
        return []
    which = ("every lane's cap" if "all" in over else
             ", ".join(f"the {NAMES.get(lane, lane)} lane's cap of {caps[lane]:,} a day" for lane in sorted(over)))
    reason = f"the sending domain's warm-up (day {warm.day} of {warm.schedule.days}): {which}"
    return [Cap("warmup", max(0, counted - sum(over.values())), tomorrow, tomorrow, reason)]


def apply(parts: list[Part], caps: list[Cap], now: datetime | None = None) -> list[Part]:
    """`parts` with, for each cap in turn, its excess moved to over_cap from the latest parts back."""
    moment = now or clock.utcnow()
    for cap in caps:
        parts = _apply(parts, cap, moment)
    return parts


def _apply(parts: list[Part], cap: Cap, now: datetime) -> list[Part]:
    def due(part: Part) -> datetime:
        return max(part.until, now) if part.until else now

    counted = [p for p in parts if p.state in _COUNTED and (cap.window_end is None or due(p) < cap.window_end)]
    excess = sum(p.recipients for p in counted) - max(0, cap.left)
    if excess <= 0:
        return parts
    chosen = {id(p) for p in counted}
    rest = [p for p in parts if id(p) not in chosen]
    kept: list[Part] = []
    for part in sorted(counted, key=due, reverse=True):
        take = min(excess, part.recipients)
        if take:
            moved = None if part.units is None else part.units * take // part.recipients
            rest.append(Part("over_cap", take, cap.until, cap.reason, moved))
            part = replace(part, recipients=part.recipients - take,
                           units=None if part.units is None else part.units - (moved or 0))
            excess -= take
        kept.append(part)
    return rest + kept

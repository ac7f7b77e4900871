"""Caps on how much may go out in a period: the `over_cap` groups of an estimate.

A cap is `Cap(name, left, window_end, until, reason)`: at most `left` messages due before
`window_end` go; the latest of them beyond that move to `over_cap` until `until`, when the cap
has room again. Today's caps are the workspace's allowances (monthly_emails and
hourly_emails, as the send reserves them: services/delivery/reservations.py). A warm-up's
daily cap per provider lane plugs in with `register(source)`: a source is
`source(conn, workspace_id, channel) -> list[Cap]`, asked for every estimate of the channel.
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

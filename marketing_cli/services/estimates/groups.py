"""The estimate object and the arithmetic every channel shares (CONTRACT section 12).

An estimate is `{"recipients", "cost", "groups": [...]}`; each group is
`{"state", "recipients", "until", "reason", "cost"}`:

    now       goes out now, or at the scheduled instant (`until`, null for now)
    waiting   waits for its recipients' local time (`until`: the zone's instant)
    held      held by SMS quiet hours (`until`: when the window opens; `reason`: the rule)
    skipped   will not be sent (`reason`: no published rate, unsubscribed, no phone number ...)
    over_cap  over an allowance or a warm-up cap (`until`: when the cap has room again)

`recipients` counts who will get the message (every group but `skipped`), `cost` what they
cost (SMS, a decimal string; null for email, which has no price per message). Groups of
one state, instant and reason are one group; they are ordered by when they go, skipped last.

The channel modules (email.py, sms.py) hand in `Part`s: a count of recipients with their
state, instant, reason and cost in the price's integer units, summed set-based in SQL; the
caps (caps.py) then move the latest parts over an allowance into `over_cap`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from marketing_cli.kernel import clock

STATES = ("now", "waiting", "held", "skipped", "over_cap")
SENT = ("now", "waiting", "held", "over_cap")   # the states whose recipients get the message
_ORDER = {state: n for n, state in enumerate(STATES)}


@dataclass(frozen=True)
class Part:
    """Some recipients in one state: `until` a datetime (UTC) or None, `units` their cost in
    the price's integer units (None: the channel has no price)."""

    state: str
    recipients: int
    until: datetime | None = None
    reason: str | None = None
    units: int | None = None


def merge(parts: list[Part]) -> list[Part]:
    """One part per (state, until, reason), counts and costs added; empty parts dropped."""
    merged: dict[tuple[str, datetime | None, str | None], Part] = {}
    for part in parts:
        if part.recipients <= 0:
            continue
        key = (part.state, part.until, part.reason)
        found = merged.get(key)
        if found is None:
            merged[key] = part
        else:
            units = None if found.units is None and part.units is None else (found.units or 0) + (part.units or 0)
            merged[key] = replace(found, recipients=found.recipients + part.recipients, units=units)
    return sorted(merged.values(), key=_sort_key)


def _sort_key(part: Part) -> tuple[Any, ...]:
    return (part.state == "skipped", part.until.isoformat() if part.until else "", _ORDER[part.state],
            part.reason or "")


def estimate(parts: list[Part], money: Any = None) -> dict[str, Any]:
    """The estimate object from parts; `money(units) -> str` formats a cost (None: no price)."""
    groups = merge(parts)

    def cost(units: int | None) -> str | None:
        return None if money is None else money(units or 0)

    sent = [g for g in groups if g.state in SENT]
    return {"recipients": sum(g.recipients for g in sent),
            "cost": cost(sum(g.units or 0 for g in sent)) if money is not None else None,
            "groups": [{"state": g.state, "recipients": g.recipients,
                        "until": clock.format_ts(g.until) if g.until else None, "reason": g.reason,
                        "cost": cost(g.units) if g.state in SENT else (None if money is None else money(0))}
                       for g in groups]}


def empty(money: Any = None) -> dict[str, Any]:
    return estimate([], money)


# --- what the faces read from an estimate -------------------------------------------------------

def next_release(est: dict[str, Any], now: datetime | None = None) -> dict[str, Any] | None:
    """The first group still to come (waiting, held, over_cap or a later `now`) with its instant:
    what `show` and `watch` name as "next: ... at ..., N recipients"."""
    moment = clock.format_ts(now or clock.utcnow())
    later = [g for g in est["groups"] if g["state"] in SENT and g["until"] and g["until"] > moment]
    return min(later, key=lambda g: g["until"]) if later else None


def last_release(est: dict[str, Any]) -> str | None:
    """The instant of the latest group to come (the end of the send, at the earliest)."""
    times = [g["until"] for g in est["groups"] if g["state"] in SENT and g["until"]]
    return max(times) if times else None


def eta_seconds(est: dict[str, Any], rate: float, now: datetime | None = None) -> int | None:
    """Seconds until every message to come is sent: the messages due now at `rate`, and each
    later group from its instant (waiting and held ones count). Without a rate yet, the latest
    group's instant (None when nothing waits)."""
    moment = now or clock.utcnow()
    if rate <= 0:
        last = last_release(est)
        return max(0, round((clock.parse_ts(last) - moment).total_seconds())) if last else None
    end = 0.0
    backlog = 0.0  # seconds of work still queued at the instant reached so far
    clock_at = 0.0
    for group in sorted((g for g in est["groups"] if g["state"] in SENT),
                        key=lambda g: g["until"] or ""):
        start = max(0.0, (clock.parse_ts(group["until"]) - moment).total_seconds()) if group["until"] else 0.0
        if start > clock_at + backlog:
            clock_at, backlog = start, 0.0
        backlog += group["recipients"] / rate
        end = max(end, clock_at + backlog)
    return round(end)


def zone_list(zones: list[str], limit: int = 3) -> str:
    """'Europe/London, Europe/Lisbon and 4 more zones'."""
    names = sorted(set(zones))
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more zones"

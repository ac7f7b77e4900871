"""Local time at the edges: time zone names, wall-clock times people type, and the UTC
instant of "09:00 in Sydney on 1 December" (docs/campaigns.md "Local-time delivery").

Everything stored or exchanged is UTC (kernel/clock.py); this module is where a local
reading becomes a UTC instant, and it is the only one that does.

- A zone name is an IANA name that `zoneinfo` can load (`Europe/Paris`); `canonical_zone`
  also accepts it in another case (`europe/paris`) and answers the IANA spelling.
- A wall-clock time that does not exist (02:30 on the night clocks spring forward) is moved
  forward by the length of the gap, as `dateutil.tz.resolve_imaginary` does: 02:30 in
  New York on 2027-03-14 is 03:30 EDT. A time that exists twice (the night clocks fall
  back) is its first occurrence (`fold=0`, the earlier UTC instant).
- A typed time (`2026-12-01 09:00`, `2026-12-01T09:00+01:00`, `2026-12-01T08:00:00Z`, a
  date alone for midnight) is read with dateutil's ISO 8601 parser; without an offset it
  is in the zone given (the workspace's).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC_ZONE = "UTC"
_HHMM = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")
BAD_TYPED_TIME = ("'{value}' is not a date and time: write it as YYYY-MM-DD HH:MM (in the workspace's time zone, "
                  "{zone}) or with an offset, e.g. 2026-12-01T09:00+01:00 or 2026-12-01T08:00Z.")
BAD_LOCAL_TIME = "The local time must be HH:MM on a 24-hour clock (for example 09:00), not '{value}'."


@lru_cache(maxsize=1)
def _zones_by_folded_name() -> dict[str, str]:
    from zoneinfo import available_timezones

    return {name.casefold(): name for name in available_timezones()}


def canonical_zone(name: object) -> str | None:
    """The IANA name of a zone `zoneinfo` can load, in its own spelling; None otherwise."""
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        return None
    return _canonical(name.strip())


@lru_cache(maxsize=4096)
def _canonical(text: str) -> str | None:
    found = _zones_by_folded_name().get(text.casefold())
    if found is not None:
        return found
    try:
        ZoneInfo(text)  # a name the system knows but does not list (a link such as "US/Pacific")
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None
    return text


@lru_cache(maxsize=4096)
def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def offsets_agree(names: tuple[str, ...], at: datetime) -> str | None:
    """One of `names` when every one is a zone with the same UTC offset at `at`, else None.

    phonenumbers gives several zones for many numbers (+1 208: Boise and Los Angeles) and
    `Etc/Unknown` for none; a number is placed only when all its zones read the same clock
    at the moment of sending. The answer is the first name (phonenumbers sorts them)."""
    if not names:
        return None
    offsets = set()
    for name in names:
        if canonical_zone(name) is None:
            return None
        offsets.add(at.astimezone(zone(name)).utcoffset())
    return names[0] if len(offsets) == 1 else None


def parse_local_time(value: object) -> str:
    """'9:00' or '09:00' -> '09:00'; ValueError with BAD_LOCAL_TIME otherwise."""
    match = _HHMM.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(BAD_LOCAL_TIME.format(value=value))
    return f"{int(match.group(1)):02d}:{match.group(2)}"


def resolve_wall_clock(moment: datetime) -> datetime:
    """A zone-aware wall-clock reading made real: a time in a DST gap moves forward by the
    gap (dateutil.tz.resolve_imaginary); a repeated time keeps fold=0 (its first instant)."""
    from dateutil import tz

    return tz.resolve_imaginary(moment.replace(fold=0))


def local_instant(day: date, hhmm: str, zone_name: str) -> datetime:
    """The UTC instant at which the clock in `zone_name` reads `hhmm` on `day`."""
    hours, minutes = (int(part) for part in hhmm.split(":"))
    wall = datetime.combine(day, time(hours, minutes), tzinfo=zone(zone_name))
    return resolve_wall_clock(wall).astimezone(timezone.utc)


def local_date(moment: datetime, zone_name: str) -> date:
    """The calendar date in `zone_name` at the UTC instant `moment`."""
    return moment.astimezone(zone(zone_name)).date()


def parse_typed_time(value: object, default_zone: str) -> datetime:
    """A time as a person types it, as a UTC datetime; ValueError with BAD_TYPED_TIME otherwise.

    `2026-12-01 09:00` and `2026-12-01T09:00` are in `default_zone`; `...+01:00` and `...Z`
    carry their own offset. A date alone is its midnight in `default_zone`."""
    from dateutil.parser import isoparse

    text = value.strip() if isinstance(value, str) else ""
    try:
        if not text or len(text) > 64:
            raise ValueError(text)
        moment = isoparse(text.replace("z", "Z"))
    except (ValueError, OverflowError):
        raise ValueError(BAD_TYPED_TIME.format(value=value, zone=default_zone)) from None
    if moment.tzinfo is None:
        moment = resolve_wall_clock(moment.replace(tzinfo=zone(default_zone)))
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError(BAD_TYPED_TIME.format(value=value, zone=default_zone)) from None


def first_instant(day: date, hhmm: str) -> datetime:
    """The earliest UTC instant at which some zone reads `hhmm` on `day`: UTC+14 (Kiribati's
    Line Islands) is the first zone on Earth to reach any wall-clock time."""
    hours, minutes = (int(part) for part in hhmm.split(":"))
    return datetime.combine(day, time(hours, minutes), tzinfo=timezone.utc) - timedelta(hours=14)

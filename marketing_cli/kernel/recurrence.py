"""Recurrence rules (RFC 5545 RRULE) read in a time zone, as UTC instants.

A rule is parsed by dateutil's `rrulestr` with a zone-aware DTSTART in the zone the
series was made in, so `BYHOUR=9` means 09:00 on that zone's clock, summer and winter.
What this module settles, so every caller gets the same instants:

- DTSTART is the next whole minute after the moment the series is made (given to
  `Rule`), so `COUNT` counts occurrences from then on, never one already past.
- `BYHOUR` without `BYMINUTE` means on the hour (`BYMINUTE=0` is added); without
  `BYHOUR` the rule keeps DTSTART's minute (FREQ=DAILY: every day at the time it was made).
- A local time that does not exist (inside a DST gap: 02:30 on the night clocks go
  forward) is moved forward by the gap with `dateutil.tz.resolve_imaginary`, so 02:30
  becomes 03:30 that day; no instant that does not exist is ever returned or stored. An
  ambiguous time (the hour repeated when clocks go back) is its first occurrence.
- `UNTIL` must be UTC (`UNTIL=20261231T235959Z`): RFC 5545 requires it when DTSTART has a
  zone, and dateutil refuses anything else; the message says so.
- `BYMONTHDAY=31` skips short months; `BYMONTHDAY=-1` is the last day of every month.
- Occurrences closer than MIN_INTERVAL apart are refused (a marketing series is not a
  per-minute job): FREQ=SECONDLY and MINUTELY, INTERVAL below 1, and rules whose first
  occurrences crowd.
- Every computation is bounded (COMPUTE_SECONDS). dateutil walks a rule period by period
  until it finds an occurrence or reaches the year 9999, and a rule that can never match
  (`FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30`, `FREQ=HOURLY;INTERVAL=24;BYHOUR=5` from 08:00)
  walks 70 million hours without yielding: a request or a job would hang. dateutil offers
  no bound (UNTIL does not stop a walk that finds nothing), so `_Guarded` wraps its
  per-period helper (`dateutil.rrule._iterinfo`, looked up on each iteration) with a
  deadline held in a context variable: outside this module's calls it does nothing; inside
  one, a walk past the deadline stops with a 400 that says the rule is too sparse.

Knows no database: services/email/series.py stores the rule, the zone and DTSTART.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from marketing_cli.errors import MktError
from marketing_cli.kernel.numbers import parse_digits

MIN_INTERVAL = timedelta(hours=1)
CHECKED_OCCURRENCES = 50  # how many first occurrences the interval check looks at
MAX_RULE_LENGTH = 500
MAX_PREVIEW = 100
COMPUTE_SECONDS = 2.0
FINEST = ("SECONDLY", "MINUTELY")

RULE_REQUIRED = "Please provide a recurrence rule (an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=MO;BYHOUR=9)."
RULE_INVALID = "Invalid recurrence rule: {reason}. Write an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=MO;BYHOUR=9."
RULE_TOO_LONG = f"The recurrence rule must be {MAX_RULE_LENGTH} characters or less."
UNTIL_NOT_UTC = "UNTIL must be a UTC time ending in Z (for example UNTIL=20261231T235959Z)."
DTSTART_GIVEN = "The recurrence rule must not set DTSTART: a series starts when it is made."
TOO_OFTEN = "A recurring campaign may repeat at most once an hour: this rule has occurrences {gap} apart."
NO_OCCURRENCE = "The recurrence rule has no occurrence after now: nothing would ever be sent."
ZONE_INVALID = "Unknown time zone '{zone}'."
PREVIEW_COUNT = f"The preview count must be an integer from 1 to {MAX_PREVIEW}."
TOO_FINE = "A recurring campaign may repeat at most once an hour: use FREQ=HOURLY or a longer frequency."
BAD_INTERVAL = "Invalid recurrence rule: INTERVAL must be a whole number from 1 to 999999."
TOO_SPARSE = ("The recurrence rule's occurrences could not be found in reasonable time (they are too far apart "
              "or never come): simplify the rule.")

T = TypeVar("T")
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("mkt_rrule_deadline", default=None)


class _TooSparse(Exception):
    pass


def _install_guard() -> None:
    """Wrap dateutil's per-period helper with the deadline check (module docstring)."""
    import dateutil.rrule as dr

    base = getattr(dr, "_iterinfo", None)
    if base is None or getattr(base, "_mkt_guarded", False):
        return

    def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
        def check(self: Any, *args: Any) -> Any:
            deadline = _deadline.get()
            if deadline is not None and time.monotonic() > deadline:
                raise _TooSparse
            return method(self, *args)
        return check

    names = ("rebuild", "ydayset", "mdayset", "wdayset", "ddayset", "htimeset")
    attributes = {name: guarded(getattr(base, name)) for name in names if hasattr(base, name)}
    dr._iterinfo = type("_Guarded", (base,), {"_mkt_guarded": True, **attributes})


@contextmanager
def _bounded() -> Iterator[None]:
    token = _deadline.set(time.monotonic() + COMPUTE_SECONDS) if _deadline.get() is None else None
    try:
        yield
    except _TooSparse:
        raise MktError(400, TOO_SPARSE) from None
    finally:
        if token is not None:
            _deadline.reset(token)


def zone_of(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise MktError(400, ZONE_INVALID.format(zone=name)) from None


def normalize_rule(text: object) -> str:
    """The rule as stored: upper case, no `RRULE:` prefix, BYMINUTE=0 added to a BYHOUR rule."""
    if not isinstance(text, str) or not text.strip():
        raise MktError(400, RULE_REQUIRED)
    rule = text.strip()
    if len(rule) > MAX_RULE_LENGTH:
        raise MktError(400, RULE_TOO_LONG)
    if "\n" in rule or "\r" in rule or "DTSTART" in rule.upper():
        raise MktError(400, DTSTART_GIVEN if "DTSTART" in rule.upper() else
                       RULE_INVALID.format(reason="write one RRULE on one line"))
    rule = rule.upper()
    rule = rule.removeprefix("RRULE:")
    parts = [p.strip() for p in rule.split(";") if p.strip()]
    values = {p.split("=", 1)[0]: p.partition("=")[2] for p in parts}
    names = set(values)
    if values.get("FREQ") in FINEST:
        raise MktError(400, TOO_FINE)
    interval = parse_digits(values["INTERVAL"], 6) if "INTERVAL" in values else 1
    if interval is None or interval < 1:
        raise MktError(400, BAD_INTERVAL)
    if "BYHOUR" in names and "BYMINUTE" not in names:
        parts.append("BYMINUTE=0")
    if "BYSECOND" not in names:
        parts.append("BYSECOND=0")
    return ";".join(parts)


def start_after(moment: datetime) -> datetime:
    """DTSTART of a series made at `moment`: the next whole minute (UTC)."""
    return moment.astimezone(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1)


class Rule:
    """A stored rule, its zone and its DTSTART (UTC); occurrences come out as UTC datetimes."""

    def __init__(self, rule: str, zone: str, dtstart: datetime) -> None:
        from dateutil.rrule import rrulestr

        _install_guard()
        self.text = rule
        self.zone = zone_of(zone)
        start = dtstart.astimezone(self.zone)
        try:
            self._rule = rrulestr(rule, dtstart=start, forceset=False, unfold=False)
        except ValueError as exc:
            reason = str(exc)
            if "UNTIL" in reason and "UTC" in reason:
                raise MktError(400, UNTIL_NOT_UTC) from None
            raise MktError(400, RULE_INVALID.format(reason=_reason(reason))) from None
        except (TypeError, OverflowError, IndexError, KeyError, AttributeError) as exc:
            raise MktError(400, RULE_INVALID.format(reason=_reason(str(exc) or type(exc).__name__))) from None

    def _resolved(self, local: datetime) -> datetime:
        from dateutil import tz

        return tz.resolve_imaginary(local).astimezone(timezone.utc)

    def _walk(self, moment: datetime, inclusive: bool) -> Iterator[datetime]:
        """Occurrences from `moment` on, UTC, each instant once (a gap-resolved 02:30 that
        lands on a 03:30 of the rule counts once). Callers bound it with `_bounded`."""
        last = None
        for local in self._rule.xafter(moment.astimezone(self.zone), inc=inclusive):
            instant = self._resolved(local)
            if last is not None and instant <= last:
                continue
            if instant < moment or (instant == moment and not inclusive):
                continue
            last = instant
            yield instant

    def after(self, moment: datetime, *, inclusive: bool = False) -> datetime | None:
        """The first occurrence after `moment` (or at it, when inclusive), UTC; None when the rule ended."""
        with _bounded():
            return next(self._walk(moment, inclusive), None)

    def between(self, low: datetime, high: datetime) -> list[datetime]:
        """Occurrences from `low` to `high`, both included, UTC, in order."""
        out: list[datetime] = []
        with _bounded():
            for instant in self._walk(low, True):
                if instant > high:
                    break
                out.append(instant)
        return out

    def upcoming(self, moment: datetime, count: int) -> list[datetime]:
        """The next `count` occurrences after `moment` (fewer when the rule ends)."""
        out: list[datetime] = []
        with _bounded():
            for instant in self._walk(moment, False):
                out.append(instant)
                if len(out) >= count:
                    break
        return out

    def local(self, moment: datetime) -> str:
        """The instant on the rule's zone clock, RFC 3339 with its offset."""
        return moment.astimezone(self.zone).isoformat(timespec="seconds")

    def check_spacing(self, moment: datetime) -> None:
        """400 when the rule never fires after `moment`, or fires more often than MIN_INTERVAL."""
        first = self.upcoming(moment, CHECKED_OCCURRENCES)
        if not first:
            raise MktError(400, NO_OCCURRENCE)
        gaps = [b - a for a, b in pairwise(first)]
        if gaps and min(gaps) < MIN_INTERVAL:
            raise MktError(400, TOO_OFTEN.format(gap=_duration(min(gaps))))


def _reason(text: str) -> str:
    return text.strip().rstrip(".")[:200] or "it could not be read"


def _duration(gap: timedelta) -> str:
    seconds = int(gap.total_seconds())
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60} minute(s)"
    return f"{seconds} second(s)"


def preview_count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PREVIEW:
        raise MktError(400, PREVIEW_COUNT)
    return value

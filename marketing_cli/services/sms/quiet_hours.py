"""SMS quiet hours: when a marketing text may reach a number, from a table of rules (data, not
code) and the number's place (docs/sms.md "Quiet hours").

The table (`quiet_hours.csv` beside this module, or the operator's copy named by
MKT_SMS_QUIET_HOURS) holds rows of region (US, US-FL, FR), days (weekdays, or a date rule
for holidays: MM-DD, easter+N) and hours in local time. A number's place comes from
phonenumbers: its country, its US state (the geocoder's description of the area code) and its
candidate time zones (`timezone`). The rules that bind it are its country's AND its state's;
a country with no rows of its own (neither the country nor any subdivision) takes the rows of
region `*`, the default window (08:00-21:00 every day as shipped): no marketing text wakes
anyone where the law is silent. An operator's table without `*` rows leaves such countries open.

Fail closed, always:
- Several candidate zones (+1 208: Boise and Los Angeles): only the hours allowed in all of them.
- No zone (Etc/Unknown, or a non-geographic number such as +1 800 whose only answer is the
  whole calling code): every zone of the country, and when no state is known either, every
  state's rules too; for the US that leaves 14:00-20:00 Eastern in winter, derived here from
  the table and the zones, never written down.

`Window` turns a place into allowed UTC intervals over a few weeks (each rule in each zone,
intersected) and answers, for an instant, "open until U" or "held until T, because R".
A number's place is places.py's. Nothing here touches the database: gate.py applies it to
message rows, one evaluation per distinct place, not per message.
"""

from __future__ import annotations

import csv
import io
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from pathlib import Path

from marketing_cli.errors import MktError
from marketing_cli.kernel.data_tables import DataTable
from marketing_cli.services.sms.places import Place

TABLE_ENV = "MKT_SMS_QUIET_HOURS"
BUILT_IN = Path(__file__).with_name("quiet_hours.csv")
HORIZON_DAYS = 16          # intervals are computed this far ahead; nothing open in it: held to its end
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_REGION = re.compile(r"^(?:[A-Z]{2}(-[A-Z0-9]{1,3})?|\*)$")
DEFAULT = "*"  # the region of the rows for every country that has none of its own
_DATE_RULE = re.compile(r"^(?:(\d\d)-(\d\d)|easter([+-]\d{1,3}))$")
_SPAN = re.compile(r"^(\d\d):(\d\d)-(\d\d):(\d\d)$")


# --- the table ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    region: str
    days: str                       # as written
    weekdays: frozenset[int]        # empty for a date rule
    month_day: tuple[int, int] | None
    easter_offset: int | None
    spans: tuple[tuple[int, int], ...]  # minutes from local midnight; () = closed
    hours: str                      # as written
    source: str

    def matches_date(self, day: date) -> bool:
        if self.month_day is not None:
            return (day.month, day.day) == self.month_day
        if self.easter_offset is not None:
            from dateutil.easter import easter

            return day == easter(day.year) + timedelta(days=self.easter_offset)
        return False


@dataclass(frozen=True)
class Table:
    rules: tuple[Rule, ...]
    origin: str                     # "built-in" or the operator's file path
    by_region: dict[str, tuple[Rule, ...]] = field(default_factory=dict, compare=False, hash=False)

    def regions_of(self, country: str) -> list[str]:
        """The subdivisions of `country` that have rows (US-CT, US-FL ...)."""
        return sorted(r for r in self.by_region if r.startswith(country + "-"))


def _parse_weekdays(text: str) -> frozenset[int] | None:
    out: set[int] = set()
    for part in text.split(","):
        ends = [p.strip().capitalize()[:3] for p in part.split("-")]
        if len(ends) > 2 or any(e not in DAYS for e in ends):
            return None
        first, last = DAYS.index(ends[0]), DAYS.index(ends[-1])
        out.update(range(first, last + 1) if first <= last else [*range(first, 7), *range(last + 1)])
    return frozenset(out)


def _parse_hours(text: str) -> tuple[tuple[int, int], ...] | None:
    if text.strip().lower() == "closed":
        return ()
    spans = []
    for part in text.split():
        m = _SPAN.match(part)
        if not m:
            return None
        h1, m1, h2, m2 = (int(g) for g in m.groups())
        start, end = h1 * 60 + m1, h2 * 60 + m2
        if h1 > 23 or m1 > 59 or m2 > 59 or end > 24 * 60 or end <= start:
            return None
        spans.append((start, end))
    return tuple(sorted(spans)) or None


def parse_table(text: str, origin: str) -> Table:
    """The rows of a quiet-hours CSV (comment lines start with #); a 400 naming the first bad line."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.lstrip().startswith("#")]
    if not lines or [c.strip() for c in next(csv.reader([lines[0][1]]))][:3] != ["region", "days", "hours"]:
        raise MktError(400, f"{origin}: the first row must be the header region,days,hours,source.")
    rules = []
    for n, line in lines[1:]:
        cells = [c.strip() for c in next(csv.reader(io.StringIO(line)))]
        if len(cells) < 3:
            raise MktError(400, f"{origin} line {n}: expected region,days,hours[,source].")
        region, days, hours = cells[0].upper(), cells[1], cells[2]
        source = ", ".join(cells[3:]).strip()
        if not _REGION.match(region):
            raise MktError(400, f"{origin} line {n}: '{cells[0]}' is not a region (a country such as US, US-FL, "
                                f"or * for every country without rows of its own).")
        spans = _parse_hours(hours)
        if spans is None:
            raise MktError(400, f"{origin} line {n}: '{hours}' is not closed or HH:MM-HH:MM spans (end after start).")
        date_rule = _DATE_RULE.match(days.strip().lower())
        month_day = easter_offset = None
        weekdays: frozenset[int] = frozenset()
        if date_rule and date_rule.group(3):
            easter_offset = int(date_rule.group(3))
        elif date_rule:
            month_day = (int(date_rule.group(1)), int(date_rule.group(2)))
            try:
                date(2024, *month_day)
            except ValueError:
                raise MktError(400, f"{origin} line {n}: '{days}' is not a day of the year.") from None
        else:
            parsed = _parse_weekdays(days)
            if not parsed:
                raise MktError(400, f"{origin} line {n}: '{days}' is not weekdays (Mon-Sun, Sat, Mon,Wed), "
                                    "MM-DD or easter+N.")
            weekdays = parsed
        rules.append(Rule(region, days, weekdays, month_day, easter_offset, spans, hours, source))
    by_region: dict[str, list[Rule]] = {}
    for rule in rules:
        by_region.setdefault(rule.region, []).append(rule)
    return Table(tuple(rules), origin, {k: tuple(v) for k, v in by_region.items()})


TABLE = DataTable(TABLE_ENV, BUILT_IN, parse_table, "quiet-hours table")


def current_table() -> Table:
    """The table in effect for this process: the operator's (MKT_SMS_QUIET_HOURS) or the built-in one.

    Read again when the file changes (its modification time and size), so an edit needs no restart.
    A file that cannot be read or parsed raises: nothing is sent on a table nobody can read.
    """
    return TABLE.current()


def check_environment() -> None:
    """`mkt jobs run` and `mkt serve` refuse to start on a quiet-hours table they cannot read or
    parse (exit 1 with the file and line), as on a bad MKT_SMS_RATE: better than jobs failing later."""
    current_table()


def table_text() -> str:
    """The table in effect as CSV (`mkt sms quiet-hours show --csv`: a copy to edit)."""
    return TABLE.text()


# --- the window ---------------------------------------------------------------------------------

Interval = tuple[datetime, datetime]


def _local(day: date, minute: int, zone: object) -> datetime:
    from dateutil import tz

    moment = datetime.combine(day, time()) + timedelta(minutes=minute)
    return tz.resolve_imaginary(moment.replace(tzinfo=zone)).astimezone(UTC)  # a time in a DST gap moves forward


def _day_rules(rules: tuple[Rule, ...], day: date) -> tuple[list[Rule], bool]:
    """The rows that set `day`'s hours (date rules win over weekdays) and whether they are date rules."""
    dated = [r for r in rules if r.matches_date(day)]
    return (dated, True) if dated else ([r for r in rules if day.weekday() in r.weekdays], False)


def _merge(spans: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


@dataclass(frozen=True)
class Verdict:
    open: bool
    until: datetime | None          # open: when the window closes (None: never); held: when it opens
    reason: str | None = None       # held only


class Window:
    """The hours a place may be texted, as UTC intervals from `start` over HORIZON_DAYS days."""

    def __init__(self, table: Table, place: Place, start: date) -> None:
        from zoneinfo import ZoneInfo

        self.place, self.start = place, start
        self.end = datetime.combine(start + timedelta(days=HORIZON_DAYS), time(), UTC)
        country = place.country or ""
        names = [country] if country in table.by_region else []
        if place.region in table.by_region:
            names.append(place.region)
        elif place.region is None:
            names += table.regions_of(country)  # no state known: every state's rules
        if not names and not table.regions_of(country) and DEFAULT in table.by_region:
            names = [DEFAULT]  # the law of this country is not in the table: the default window
        self.pairs = [(name, table.by_region[name], zone, ZoneInfo(zone)) for name in names for zone in place.zones]
        self.unrestricted = not names
        self.spans = {(name, zone): self._spans(rules, tz) for name, rules, zone, tz in self.pairs}
        allowed: list[Interval] | None = None
        for spans in self.spans.values():
            allowed = spans if allowed is None else _intersect(allowed, spans)
        self.allowed = allowed or []

    def _spans(self, rules: tuple[Rule, ...], zone: object) -> list[Interval]:
        out = []
        for offset in range(-1, HORIZON_DAYS + 1):
            day = self.start + timedelta(days=offset)
            for rule in _day_rules(rules, day)[0]:
                out += [(_local(day, s, zone), _local(day, e, zone)) for s, e in rule.spans]
        return _merge(out)

    def at(self, now: datetime) -> Verdict:
        if self.unrestricted:
            return Verdict(True, None)
        i = bisect_right(self.allowed, (now, datetime.max.replace(tzinfo=UTC)))
        if i and self.allowed[i - 1][0] <= now < self.allowed[i - 1][1]:
            return Verdict(True, self.allowed[i - 1][1])
        opens = self.allowed[i][0] if i < len(self.allowed) else self.end
        return Verdict(False, opens, self._reason(now))

    def _reason(self, now: datetime) -> str:
        if not self.place.zones:
            return f"quiet hours: no time zone is known for {self.place.country}"
        closed = []
        for order, (name, rules, zone, tz) in enumerate(self.pairs):
            spans = self.spans[(name, zone)]
            if any(s <= now < e for s, e in spans):
                continue
            later = [s for s, _ in spans if s > now]
            closed.append((later[0] if later else self.end, name.count("-"), -order, name, rules, zone, tz))
        if not closed:  # open in each pair but in none at once (zones too far apart): name the first two
            (n1, _, z1, _), (n2, _, z2, _) = self.pairs[0], self.pairs[-1]
            text = f"quiet hours: no hour is allowed in both {z1} ({n1}) and {z2} ({n2}) at once"
        else:
            _, _, _, name, rules, zone, tz = max(closed)
            day = now.astimezone(tz).date()
            chosen, dated = _day_rules(rules, day)
            if not chosen or all(not r.spans for r in chosen):
                label = (f"{day.isoformat()} ({chosen[0].source or chosen[0].days})" if dated
                         else DAY_NAMES[day.weekday()])
                text = f"quiet hours: {_named(name)} closed on {label} {zone}"
            else:
                hours = " ".join(f"{s // 60:02d}:{s % 60:02d}-{e // 60:02d}:{e % 60:02d}"
                                 for r in chosen for s, e in r.spans)
                text = f"quiet hours: {_named(name)} {hours} {zone}"
        if not self.place.zone_known:
            text += f" (time zone unknown: every {self.place.country} zone counts)"
        return text


def _named(region: str) -> str:
    return "the default (*)" if region == DEFAULT else region


@lru_cache(maxsize=4096)
def window(table: Table, place: Place, start: date) -> Window:
    return Window(table, place, start)


def verdict(place: Place, now: datetime, table: Table | None = None) -> Verdict:
    """May `place` be texted at `now`? (One Window per place and day, cached.)"""
    table = table or current_table()
    return window(table, place, (now.astimezone(UTC) - timedelta(days=1)).date()).at(now)

"""The buckets of a campaign timeline, and how hourly counts fold into them (docs/statistics.md).

Both channels keep their events counted per UTC hour (schema step 16: `hour` is the first 13
characters of the event's timestamp, `2026-11-25T17`). A timeline starts at the hour of the
send's start (its timestamp floored to the hour) and has:

- `hours`: one bucket per hour for the first HOURS (72) hours;
- `days`: then one bucket per 24 hours, continuing from the end of the hourly part (so a day
  bucket starts at the same hour of day as the send did), for at most DAYS days.

Only buckets that have begun are listed (a bucket's start <= now), empty ones included: a
campaign sent 5 hours ago has 6 hourly buckets and no daily one, one sent a week ago has 72
and 4. So the number of points depends only on the start and the clock, never on which hours
saw events, and a chart drawn while a send runs grows one point per hour. An event counted
before the start hour (a clock step) counts in the first bucket; one after the last daily
bucket is not drawn (it still counts in the statistics). No connection here: the services read
their hour rows and call `fold`; the report's chart (`campaign_chart`) is one query shape for
both channels, run through the `execute` the service passes with its own events and hour table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from marketing_cli.kernel import clock

HOURS = 72
DAYS = 90
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)


def hour_of(key: str) -> datetime:
    """The start of a stored hour key ('2026-11-25T17')."""
    return datetime.fromisoformat(key[:13] + ":00:00+00:00")  # fromisoformat: ~20x faster than strptime


def iso(moment: datetime) -> str:
    """A bucket's start as RFC 3339 UTC with a trailing Z ('2026-11-25T17:00:00Z')."""
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def bucket_starts(start: datetime, now: datetime) -> tuple[list[datetime], list[datetime]]:
    """The hourly and the daily bucket starts of a timeline whose send started at `start`."""
    first = floor_hour(start)
    hours = [first + i * HOUR for i in range(HOURS) if first + i * HOUR <= now]
    daily_from = first + HOURS * HOUR
    days = [daily_from + i * DAY for i in range(DAYS) if daily_from + i * DAY <= now]
    return hours, days


def fold(start: datetime | None, now: datetime, counts: Iterable[tuple[str, Mapping[str, Any]]],
         zero: Mapping[str, Any]) -> dict[str, Any]:
    """{"hours": [...], "days": [...], "totals": {...}} of per-hour `counts` ((hour key, {name: n})).

    Each bucket is {"start": iso, **one value per name of `zero`}; `zero` gives the names and
    the zero of each (0, or Decimal 0 for money). `totals` sums the listed buckets. A timeline
    that has not started (`start` None or after `now`) has no buckets."""
    if start is None or start > now:
        return {"hours": [], "days": [], "totals": dict(zero)}
    hour_starts, day_starts = bucket_starts(start, now)
    hours = [dict(zero) for _ in hour_starts]
    days = [dict(zero) for _ in day_starts]
    first = hour_starts[0]
    for key, values in counts:
        offset = max(0, int((hour_of(key) - first) / HOUR))
        if offset < HOURS:
            target = hours[offset] if offset < len(hours) else None
        else:
            index = (offset - HOURS) // 24
            target = days[index] if index < len(days) else None
        if target is not None:
            for name in zero:
                target[name] += values[name]
    totals = dict(zero)
    for bucket in (*hours, *days):
        for name in zero:
            totals[name] += bucket[name]
    return {"hours": [{"start": iso(at), **b} for at, b in zip(hour_starts, hours, strict=True)],
            "days": [{"start": iso(at), **b} for at, b in zip(day_starts, days, strict=True)],
            "totals": totals}


# ------------------------------------------------------------------ the report's chart
#
# The API's timeline keeps its fixed hours-then-days shape; the charts of the HTML report and
# the dashboard draw the activity on a bucket chosen from its span instead, so a small send
# read the same day (every event in one hour) fills its chart as well as a month-long one:
# a minute per bucket up to 2 hours, 5 minutes up to 6, 15 up to a day, an hour up to a
# week, a UTC day beyond. The services count the buckets in SQL and hand the rows to `chart`.

CHART_STEPS = ((timedelta(hours=2), 1), (timedelta(hours=6), 5), (DAY, 15), (7 * DAY, 60))
DAY_MINUTES = 1440
CHART_BUCKETS = 400  # at most: a daily chart stops after 400 days (the statistics still count later events)


def chart_step(span: timedelta) -> int:
    """Minutes per bucket of a chart whose activity spans `span` (first to last event)."""
    return next((minutes for limit, minutes in CHART_STEPS if span <= limit), DAY_MINUTES)


def floor_to(moment: datetime, minutes: int) -> datetime:
    """`moment` (UTC) floored to a bucket of `minutes` (a divisor of an hour, 60, or a day)."""
    moment = moment.astimezone(timezone.utc).replace(second=0, microsecond=0)
    if minutes >= DAY_MINUTES:
        return moment.replace(hour=0, minute=0)
    of_day = moment.hour * 60 + moment.minute
    of_day -= of_day % minutes
    return moment.replace(hour=of_day // 60, minute=of_day % 60)


def chart(start: datetime, minutes: int, rows: Iterable[tuple[datetime, Mapping[str, Any]]],
          names: Iterable[str]) -> dict[str, Any]:
    """{"minutes", "buckets": [{"start", **one count per name}]}: buckets of `minutes` from the
    one holding `start` through the last one with an event, empty ones included, so the x axis
    is time. `rows` are (bucket start, counts) as the SQL grouped them; an event before `start`
    (a clock step) counts in the first bucket."""
    names = tuple(names)
    first, step = floor_to(start, minutes), timedelta(minutes=minutes)
    counted: dict[int, dict[str, Any]] = {}
    for at, values in rows:
        offset = max(0, (at - first) // step)
        if offset < CHART_BUCKETS and any(values[name] for name in names):  # an hour of other series only
            bucket = counted.setdefault(offset, dict.fromkeys(names, 0))
            for name in names:
                bucket[name] += values[name] or 0
    size = max(counted, default=0) + 1
    return {"minutes": minutes,
            "buckets": [{"start": iso(first + i * step), **counted.get(i, dict.fromkeys(names, 0))}
                        for i in range(size)]}


class ChartSource(NamedTuple):
    """A channel's chart: `events` a SELECT of (at, one 0/1 column per name) with a `?` for the
    campaign id in each of its `parts` arms; `hours` the channel's hour table (kept by triggers)."""
    events: str
    parts: int
    hours: str
    names: tuple[str, ...]


def campaign_chart(execute: Callable[..., Any], source: ChartSource, campaign_id: str, started: str | None,
                   fine_limit: int) -> dict[str, Any] | None:
    """The report's chart (`chart`) of a campaign that started at `started` (None: not yet, no
    chart), on a bucket fitted to the span of its activity. Buckets under an hour count the events
    themselves, so past `fine_limit` messages sent the chart keeps to hours (their rows are summed)."""
    if started is None:
        return None
    start = clock.parse_ts(started)
    last, messages = execute(f"SELECT max(hour), sum(sent) FROM {source.hours} WHERE campaign_id = ?",
                             (campaign_id,)).fetchone()
    end = hour_of(last) + HOUR if last else start
    minutes = chart_step(end - floor_hour(start))
    if minutes < 60 and (messages or 0) > fine_limit:
        minutes = 60
    return chart(start, minutes, chart_rows(execute, source, campaign_id, minutes), source.names)


def chart_rows(execute: Callable[..., Any], source: ChartSource, campaign_id: str,
               minutes: int) -> list[tuple[datetime, Any]]:
    """(bucket start, counts) grouped in SQL: from the events under an hour, from the hour rows else."""
    sums = ", ".join(f"sum({name}) AS {name}" for name in source.names)
    if minutes < 60:
        rows = execute(f"SELECT substr(at, 1, 13) AS hour, CAST(substr(at, 15, 2) AS INTEGER) / ? AS part, {sums}"
                       f" FROM ({source.events}) e GROUP BY 1, 2", (minutes, *[campaign_id] * source.parts))
        return [(hour_of(r["hour"]) + timedelta(minutes=r["part"] * minutes), r) for r in rows]
    width = 13 if minutes == 60 else 10  # '2026-11-25T17' or '2026-11-25'
    rows = execute(f"SELECT substr(hour, 1, {width}) AS at, {sums} FROM {source.hours}"
                   " WHERE campaign_id = ? GROUP BY 1", (campaign_id,))
    return [(hour_of(r["at"] if minutes == 60 else r["at"] + "T00"), r) for r in rows]

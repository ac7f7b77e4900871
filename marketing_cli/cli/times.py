"""Times for people: stored and answered in UTC, shown in UTC and in the terminal's own zone.

Only the faces convert (the edges): services, the database and `--json` keep RFC 3339 UTC.
The terminal's zone is the process's local zone (the `TZ` variable, else the system's).
When it is UTC itself, one time is shown, not the same one twice.
"""

from __future__ import annotations

from datetime import datetime

from marketing_cli.kernel import clock

UTC_NAMES = ("UTC", "Z", "GMT+00:00", "UTC+00:00")


def _local(moment: datetime) -> datetime | None:
    """The moment in the terminal's zone, or None when that zone is UTC."""
    local = moment.astimezone()
    if local.utcoffset() == moment.utcoffset() and (local.tzname() or "UTC") in UTC_NAMES:
        return None
    return local


def _parse(timestamp: str | None) -> datetime | None:
    if not timestamp:
        return None
    try:
        return clock.parse_ts(timestamp)
    except (TypeError, ValueError):
        return None


def local_clock(moment: datetime) -> str:
    """`2026-12-01 10:00 CET`: the moment in the terminal's zone."""
    local = moment.astimezone()
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"


def when_cell(timestamp: str | None) -> str:
    """A table cell: `2026-12-01 09:00 UTC`, and under it the terminal's time
    (`2026-12-01 10:00 CET`) when its zone is not UTC; empty when there is no time."""
    moment = _parse(timestamp)
    if moment is None:
        return timestamp or ""
    utc = f"{moment:%Y-%m-%d %H:%M} UTC"
    local = _local(moment)
    return utc if local is None else f"{utc}\n{local_clock(local)}"


def when_line(timestamp: str | None, empty: str = "") -> str:
    """One line for a `show` panel: `2026-12-01T09:00:00Z (local time 2026-12-01 10:00 CET)`."""
    moment = _parse(timestamp)
    if moment is None:
        return timestamp or empty
    local = _local(moment)
    return timestamp if local is None else f"{timestamp} (local time {local_clock(local)})"

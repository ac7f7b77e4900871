"""kernel/localtime.py: times people type, wall clock to UTC across DST, zone names."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from marketing_cli.kernel import clock
from marketing_cli.kernel.localtime import (
    canonical_zone,
    first_instant,
    local_instant,
    offsets_agree,
    parse_local_time,
    parse_typed_time,
)


@pytest.mark.parametrize(("typed", "zone", "utc"), [
    ("2026-12-01 09:00", "Europe/Paris", "2026-12-01T08:00:00.000Z"),      # the workspace's zone (CET)
    ("2026-12-01T09:00", "Europe/Paris", "2026-12-01T08:00:00.000Z"),
    ("2026-07-01 09:00", "Europe/Paris", "2026-07-01T07:00:00.000Z"),      # CEST
    ("2026-12-01T09:00+01:00", "America/New_York", "2026-12-01T08:00:00.000Z"),  # its own offset wins
    ("2026-12-01T08:00:00Z", "Asia/Tokyo", "2026-12-01T08:00:00.000Z"),    # the spec's format, unchanged
    ("2026-12-01T08:00:00.250z", "UTC", "2026-12-01T08:00:00.250Z"),
    ("2026-12-01", "America/New_York", "2026-12-01T05:00:00.000Z"),        # a date alone: its midnight
    ("  2026-12-01 09:00  ", "UTC", "2026-12-01T09:00:00.000Z"),
    # 02:30 does not exist in New York on 2027-03-14 (clocks jump 02:00 -> 03:00): resolved
    # forward by the gap (dateutil.tz.resolve_imaginary) to 03:30 EDT.
    ("2027-03-14 02:30", "America/New_York", "2027-03-14T07:30:00.000Z"),
    # 01:30 exists twice in New York on 2026-11-01: its first occurrence (EDT).
    ("2026-11-01 01:30", "America/New_York", "2026-11-01T05:30:00.000Z"),
])
def test_typed_times(typed: str, zone: str, utc: str) -> None:
    assert clock.format_ts(parse_typed_time(typed, zone)) == utc


@pytest.mark.parametrize("typed", ["tomorrow", "", "2026-13-01 09:00", "2026-12-01 25:00", "09:00", None, 5,
                                   "2026-12-01 09:00 Europe/Paris"])
def test_what_is_not_a_time_is_refused_with_the_formats(typed: object) -> None:
    with pytest.raises(ValueError) as err:
        parse_typed_time(typed, "Europe/Paris")
    assert "YYYY-MM-DD HH:MM (in the workspace's time zone, Europe/Paris)" in str(err.value)


def test_local_instants_across_dst_and_the_first_zone() -> None:
    assert clock.format_ts(local_instant(date(2027, 3, 27), "09:00", "Europe/Paris")) == "2027-03-27T08:00:00.000Z"
    assert clock.format_ts(local_instant(date(2027, 3, 28), "09:00", "Europe/Paris")) == "2027-03-28T07:00:00.000Z"
    assert clock.format_ts(local_instant(date(2027, 4, 4), "09:00", "Australia/Sydney")) == "2027-04-03T23:00:00.000Z"
    assert clock.format_ts(local_instant(date(2027, 3, 14), "02:30", "America/New_York")) == "2027-03-14T07:30:00.000Z"
    assert clock.format_ts(first_instant(date(2026, 12, 1), "09:00")) == "2026-11-30T19:00:00.000Z"
    assert local_instant(date(2026, 12, 1), "09:00", "Pacific/Kiritimati") == first_instant(date(2026, 12, 1), "09:00")


def test_zone_names_and_agreeing_offsets() -> None:
    assert canonical_zone("europe/PARIS") == "Europe/Paris"
    assert canonical_zone(" UTC ") == "UTC"
    for bad in ("Etc/Unknown", "Mars/Base", "", None, "../../etc/passwd", "x" * 100):
        assert canonical_zone(bad) is None
    winter = datetime(2027, 1, 10, 12, tzinfo=timezone.utc)
    assert offsets_agree(("America/New_York", "America/Toronto"), winter) == "America/New_York"
    assert offsets_agree(("America/Boise", "America/Los_Angeles"), winter) is None
    assert offsets_agree(("Etc/Unknown",), winter) is None
    assert offsets_agree((), winter) is None
    # Phoenix keeps MST all year: it agrees with Denver in winter only.
    assert offsets_agree(("America/Denver", "America/Phoenix"), winter) == "America/Denver"
    assert offsets_agree(("America/Denver", "America/Phoenix"), datetime(2027, 7, 1, tzinfo=timezone.utc)) is None
    assert parse_local_time("9:05") == "09:05"
    for bad in ("24:00", "9", "09:60", "nine", None):
        with pytest.raises(ValueError):
            parse_local_time(bad)

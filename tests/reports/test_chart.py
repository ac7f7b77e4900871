"""The report's chart (kernel/timeline.py `chart`, the services' `campaign_chart`): its bucket
follows the span of the activity, so one hour, one day and one month of events each fill it;
the bars are counted in SQL on both engines, and each bucket holds the events of its time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from typing import Any

import pytest

from marketing_cli.kernel import timeline
from marketing_cli.reports import html
from marketing_cli.services.email import report as email_report
from marketing_cli.services.sms import report as sms_report
from tests import factories


@pytest.mark.parametrize(("span", "minutes"), [(timedelta(minutes=1), 1), (timedelta(hours=2), 1),
                                               (timedelta(hours=3), 5), (timedelta(hours=6), 5),
                                               (timedelta(hours=7), 15), (timedelta(days=1), 15),
                                               (timedelta(days=3), 60), (timedelta(days=8), 1440)])
def test_the_bucket_follows_the_span(span: timedelta, minutes: int) -> None:
    assert timeline.chart_step(span) == minutes


def test_buckets_are_contiguous_and_an_early_event_counts_in_the_first() -> None:
    start = datetime(2026, 11, 21, 13, 22, 40, tzinfo=timezone.utc)
    rows = [(datetime(2026, 11, 21, 13, 30, tzinfo=timezone.utc), {"n": 2}),
            (datetime(2026, 11, 21, 13, 10, tzinfo=timezone.utc), {"n": 1}),   # before the start
            (datetime(2026, 11, 21, 13, 45, tzinfo=timezone.utc), {"n": None})]  # other series only: no bucket
    chart = timeline.chart(start, 5, rows, ["n"])
    assert chart["minutes"] == 5
    assert [b["start"] for b in chart["buckets"]] == [f"2026-11-21T13:{m:02d}:00Z" for m in range(20, 35, 5)]
    assert [b["n"] for b in chart["buckets"]] == [1, 0, 2]
    assert timeline.floor_to(start, 1440) == datetime(2026, 11, 21, tzinfo=timezone.utc)


class Bars(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.charts: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "svg" and found.get("class") == "timeline":
            self.charts.append({"series": found["data-series"], "buckets": int(found["data-buckets"] or 0),
                                "bars": []})
        elif tag == "rect" and found.get("class") == "bar":
            self.charts[-1]["bars"].append(found)


def charts(page: str) -> list[dict[str, Any]]:
    parser = Bars()
    parser.feed(page)
    return parser.charts


# one hour: 12 first opens over 37 minutes, the last click at 38 (a bucket a minute); one
# day: 12 over 17.5 hours in 15-minute buckets; one month: 12 over 30 days, one a UTC day (31 or 32)
EXPECTED = {"hour": (1, 39), "day": (15, 72), "month": (1440, 31)}


@pytest.mark.parametrize("span", ["hour", "day", "month"])
def test_an_email_report_fills_its_chart_whatever_the_span(conn: Any, workspace: dict, span: str) -> None:
    world = factories.email_span_world(conn, workspace["id"], span)
    data = email_report.campaign_report(conn, workspace["id"], world["id"])
    minutes, count = EXPECTED[span]
    if span == "month":  # 30 days and 67 minutes from the start: 31 or 32 UTC days, by the time of day
        last = world["start"] + timedelta(minutes=factories.SPANS["month"][1][-1] + 1)
        count = (timeline.floor_to(last, 1440) - timeline.floor_to(world["start"], 1440)).days + 1
    chart = data["chart"]
    assert (chart["minutes"], len(chart["buckets"])) == (minutes, count)
    assert chart["buckets"][0]["start"] == timeline.iso(timeline.floor_to(world["start"], minutes))
    for key, total in (("unique_opens", 12), ("total_clicks", 12), ("unsubscribed", 4)):
        assert sum(b[key] for b in chart["buckets"]) == total
    opens = [i for i, b in enumerate(chart["buckets"]) if b["unique_opens"]]
    assert len(opens) == 12 and opens[-1] >= count - 2  # spread from the start to the end of the axis
    drawn = charts(html.render(data))
    assert [c["series"] for c in drawn] == ["First opens", "Clicks", "Unsubscribes"]
    assert [len(c["bars"]) for c in drawn] == [12, 12, 4]
    assert all(c["buckets"] == count for c in drawn)
    xs = [float(b["x"]) for b in drawn[0]["bars"]]
    assert max(xs) - min(xs) > 0.8 * (html.CHART_W - html.PAD - 30)  # the bars cover the width


@pytest.mark.parametrize("minutes", [60, 15])
def test_an_sms_report(conn: Any, workspace: dict, monkeypatch: pytest.MonkeyPatch, minutes: int) -> None:
    """sms_timeline_world's events span 75 hours (hourly buckets); forced to 15 minutes, the
    same events are counted from the messages and clicks themselves."""
    first = factories.timeline_start(80)
    cid = factories.sms_timeline_world(conn, workspace["id"], first)
    monkeypatch.setattr(timeline, "chart_step", lambda span: minutes)
    data = sms_report.campaign_report(conn, workspace["id"], cid)
    buckets = data["chart"]["buckets"]

    def hours(bucket: dict[str, Any]) -> float:  # a bucket's start, in hours after `first`
        return (datetime.fromisoformat(bucket["start"].replace("Z", "+00:00")) - first) / timedelta(hours=1)

    # from the start (20 minutes past `first`) through the click at 75 h; sent "now" is not drawn
    assert data["chart"]["minutes"] == minutes and hours(buckets[0]) == (0 if minutes == 60 else 0.25)
    assert hours(buckets[-1]) == 75 and len(buckets) == (76 if minutes == 60 else 300)
    assert [hours(b) for b in buckets if b["delivered"]] == [0 if minutes == 60 else 0.5]  # both at 0.5 h
    assert [(hours(b), b["total_clicks"]) for b in buckets if b["total_clicks"]] == (
        [(2, 3), (75, 1)] if minutes == 60 else [(2, 2), (2.25, 1), (75, 1)])
    assert sum(b["unsubscribed"] for b in buckets) == 1
    drawn = charts(html.render(data))
    assert [len(c["bars"]) for c in drawn] == [1, 2 if minutes == 60 else 3, 1]


def test_a_send_not_started_has_no_chart(conn: Any, workspace: dict) -> None:
    campaign = factories.email_campaign(conn, workspace["id"], "Draft")
    data = email_report.campaign_report(conn, workspace["id"], campaign["id"])
    assert data["chart"] is None and charts(html.render(data)) == []


def test_above_the_fine_limit_the_chart_keeps_hourly_buckets(conn: Any, workspace: dict,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Finer buckets read every message of the campaign: past FINE_LIMIT messages, hours."""
    from marketing_cli.services.email import timeline as email_timeline

    world = factories.email_span_world(conn, workspace["id"], "hour")
    monkeypatch.setattr(email_timeline, "FINE_LIMIT", 11)  # twelve messages sent
    chart = email_report.campaign_report(conn, workspace["id"], world["id"])["chart"]
    assert chart["minutes"] == 60 and len(chart["buckets"]) == 1
    assert (chart["buckets"][0]["unique_opens"], chart["buckets"][0]["total_clicks"]) == (12, 12)

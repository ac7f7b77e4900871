"""Recurring and feed campaigns through the service layer, on a fixed clock: a weekly series
sends once a week and once after an outage, copies are idempotent per occurrence, rules in
a zone (DST gap, last day of the month, UNTIL in UTC, COUNT), pause / resume / stop, and
feeds served by a local HTTP server (nothing new: skipped; two new items: one copy with both)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.email import campaigns, occurrences, series, variant_html
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.storage.db import transaction
from tests import factories
from tests.factories import FixedClock, rss

WEEKLY = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"
MONDAY_8 = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc)  # a Monday


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> FixedClock:
    fake = factories.FixedClock(MONDAY_8)
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


@pytest.fixture
def ready(conn: sqlite3.Connection, workspace: dict[str, Any], fixed: FixedClock) -> dict[str, Any]:
    """A sendable campaign to two subscribed contacts (outbox transport)."""
    return factories.sendable_campaign(conn, workspace["id"], ["ann@example.org", "bob@example.org"])


def _copies(conn: sqlite3.Connection, ws: int, source_id: str) -> list[dict[str, Any]]:
    listed = campaigns.list_campaigns(conn, ws, limit=100)["campaigns"]
    return [c for c in listed if c["id"] != source_id]


def _outbox(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "outbox").rglob("*.eml")) if (tmp_path / "outbox").exists() else []


def test_a_weekly_series_sends_once_a_week(conn: sqlite3.Connection, workspace: dict, ready: dict, fixed: FixedClock,
                                           tmp_path: Path) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})
    assert made["status"] == "ACTIVE" and made["timezone"] == "UTC"
    assert made["rrule"] == "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0"
    assert made["next_occurrence"] == {"at": "2026-11-30T09:00:00.000Z", "local": "2026-11-30T09:00:00+00:00"}
    assert [u["at"] for u in made["upcoming"]][:2] == ["2026-11-30T09:00:00.000Z", "2026-12-07T09:00:00.000Z"]

    jobs.run_due(conn)
    assert _copies(conn, ws, ready["id"]) == []  # 08:00: nothing due yet
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    jobs.run_due(conn)
    copies = _copies(conn, ws, ready["id"])
    assert [c["status"] for c in copies] == ["SENT"]
    assert copies[0]["name"] == "Spring sale (2026-11-30 09:00)"
    assert len(_outbox(tmp_path)) == 2
    assert campaigns.get_campaign(conn, ws, ready["id"])["status"] == "DRAFT"  # the definition stays

    fixed.advance(days=3)
    jobs.run_due(conn)
    assert len(_copies(conn, ws, ready["id"])) == 1  # nothing between Mondays
    fixed.set(datetime(2026, 12, 7, 9, 0, 1, tzinfo=timezone.utc))
    jobs.run_due(conn)
    assert len(_copies(conn, ws, ready["id"])) == 2
    shown = series.get_series(conn, ws, made["id"])
    assert shown["counts"] == {"SENT": 2, "MISSED": 0, "SKIPPED": 0, "FAILED": 0}
    assert [o["occurrence_at"] for o in shown["occurrences"]] == ["2026-12-07T09:00:00.000Z",
                                                                  "2026-11-30T09:00:00.000Z"]
    assert shown["next_occurrence"]["at"] == "2026-12-14T09:00:00.000Z"


def test_after_an_outage_the_latest_missed_occurrence_is_sent_once(conn: sqlite3.Connection, workspace: dict,
                                                                   ready: dict, fixed: FixedClock) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})
    fixed.set(datetime(2026, 12, 14, 12, 0, tzinfo=timezone.utc))  # 3 Mondays passed with no runner
    jobs.run_due(conn)
    copies = _copies(conn, ws, ready["id"])
    assert len(copies) == 1 and copies[0]["status"] == "SENT"
    shown = series.get_series(conn, ws, made["id"])
    assert shown["counts"] == {"SENT": 1, "MISSED": 2, "SKIPPED": 0, "FAILED": 0}
    outcome = {o["occurrence_at"]: (o["status"], o["campaign_id"]) for o in shown["occurrences"]}
    assert outcome["2026-12-14T09:00:00.000Z"] == ("SENT", copies[0]["id"])
    assert outcome["2026-11-30T09:00:00.000Z"][0] == outcome["2026-12-07T09:00:00.000Z"][0] == "MISSED"
    assert "2026-12-14T09:00:00+00:00 was sent instead" in shown["occurrences"][-1]["reason"]
    assert shown["next_occurrence"]["at"] == "2026-12-21T09:00:00.000Z"


def test_a_replayed_tick_makes_no_second_copy(conn: sqlite3.Connection, workspace: dict, ready: dict,
                                              fixed: FixedClock) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    stale = conn.execute("SELECT * FROM campaign_series WHERE id = ?", (made["id"],)).fetchone()
    slot = datetime(2026, 11, 30, 9, tzinfo=timezone.utc)
    occurrences.run_tick(conn, {"series_id": made["id"]})
    occurrences.run_tick(conn, {"series_id": made["id"]})  # a replay after the series moved on
    with transaction(conn):  # a second runner that read the series before the first one wrote
        occurrences._occur(conn, stale, series.rule_of(stale), slot, None)
    jobs.run_due(conn)  # the queued job of that occurrence runs too
    assert len(_copies(conn, ws, ready["id"])) == 1
    assert conn.execute("SELECT count(*) FROM campaign_series_occurrences").fetchone()[0] == 1
    queued = conn.execute("SELECT dedupe_key FROM jobs WHERE type = ? AND status = 'queued'", (series.JOB,)).fetchall()
    assert [r[0] for r in queued] == [f"{series.JOB}:{made['id']}:2026-12-07T09:00:00.000Z"]


def test_each_copy_goes_to_the_audience_as_it_stands(conn: sqlite3.Connection, workspace: dict, ready: dict,
                                                     fixed: FixedClock) -> None:
    ws = workspace["id"]
    series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})
    fixed.set(datetime(2026, 11, 30, 9, 1, tzinfo=timezone.utc))
    jobs.run_due(conn)
    factories.contact(conn, ws, "cat@example.org")
    fixed.set(datetime(2026, 12, 7, 9, 1, tzinfo=timezone.utc))
    jobs.run_due(conn)
    totals = [c["progress"]["total"] for c in
              (campaigns.get_campaign(conn, ws, c["id"]) for c in _copies(conn, ws, ready["id"]))]
    assert sorted(totals) == [2, 3]


def test_pause_resume_and_stop(conn: sqlite3.Connection, workspace: dict, ready: dict, fixed: FixedClock) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})
    assert series.pause_series(conn, ws, made["id"])["status"] == "PAUSED"
    with pytest.raises(MktError) as paused_twice:
        series.pause_series(conn, ws, made["id"])
    assert paused_twice.value.message == series.ONLY_ACTIVE
    fixed.set(datetime(2026, 12, 8, 10, 0, tzinfo=timezone.utc))
    jobs.run_due(conn)
    assert _copies(conn, ws, ready["id"]) == []  # nothing while paused
    resumed = series.resume_series(conn, ws, made["id"])
    assert resumed["status"] == "ACTIVE" and resumed["counts"]["SKIPPED"] == 2
    assert resumed["occurrences"][0]["reason"] == series.PAUSED_REASON
    assert resumed["next_occurrence"]["at"] == "2026-12-14T09:00:00.000Z"
    jobs.run_due(conn)
    assert _copies(conn, ws, ready["id"]) == []  # paused occurrences are not sent late

    stopped = series.stop_series(conn, ws, made["id"])
    assert stopped["status"] == "STOPPED" and stopped["next_occurrence"] is None
    fixed.set(datetime(2026, 12, 14, 9, 5, tzinfo=timezone.utc))
    jobs.run_due(conn)
    assert _copies(conn, ws, ready["id"]) == []
    for action in (series.stop_series, series.resume_series, series.pause_series):
        with pytest.raises(MktError) as ended:
            action(conn, ws, made["id"])
        assert ended.value.message == "This series has already ended (STOPPED)."
    # stopped: the campaign can recur again, or be scheduled on its own
    assert series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})["status"] == "ACTIVE"


def test_the_definition_is_not_scheduled_on_its_own(conn: sqlite3.Connection, workspace: dict, ready: dict,
                                                    fixed: FixedClock) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})
    with pytest.raises(MktError) as refused:
        email_schedule.schedule_campaign(conn, ws, ready["id"], {"schedule_type": "NOW"})
    assert refused.value.message.startswith(f"This campaign defines recurring series {made['id']}")
    with pytest.raises(MktError) as twice:
        series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY})
    assert twice.value.message == series.ALREADY.format(id=made["id"])


def test_a_count_ends_the_series(conn: sqlite3.Connection, workspace: dict, ready: dict, fixed: FixedClock) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, ready["id"], {"rrule": "FREQ=DAILY;BYHOUR=9;COUNT=2"})
    assert [u["at"] for u in made["upcoming"]] == ["2026-11-30T09:00:00.000Z", "2026-12-01T09:00:00.000Z"]
    for day in (30, 1):
        fixed.set(datetime(2026, 11 if day == 30 else 12, day, 9, 0, 1, tzinfo=timezone.utc))
        jobs.run_due(conn)
    shown = series.get_series(conn, ws, made["id"])
    assert shown["status"] == "FINISHED" and shown["next_occurrence"] is None and shown["counts"]["SENT"] == 2
    assert len(_copies(conn, ws, ready["id"])) == 2


def test_until_in_utc_ends_the_series_at_that_instant(conn: sqlite3.Connection, workspace: dict, ready: dict,
                                                      fixed: FixedClock) -> None:
    made = series.preview_series(conn, workspace["id"], ready["id"],
                                 {"rrule": "FREQ=DAILY;BYHOUR=9;UNTIL=20261202T090000Z", "count": 10})
    assert [o["at"] for o in made["occurrences"]] == ["2026-11-30T09:00:00.000Z", "2026-12-01T09:00:00.000Z",
                                                      "2026-12-02T09:00:00.000Z"]
    with pytest.raises(MktError) as local_until:
        series.preview_series(conn, workspace["id"], ready["id"], {"rrule": "FREQ=DAILY;UNTIL=20261202T090000"})
    assert local_until.value.message == "UNTIL must be a UTC time ending in Z (for example UNTIL=20261231T235959Z)."


def test_last_day_of_the_month(conn: sqlite3.Connection, workspace: dict, ready: dict, fixed: FixedClock) -> None:
    shown = series.preview_series(conn, workspace["id"], ready["id"],
                                  {"rrule": "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=18", "count": 4})
    assert [o["at"][:10] for o in shown["occurrences"]] == ["2026-11-30", "2026-12-31", "2027-01-31", "2027-02-28"]


def test_a_time_in_a_dst_gap_is_moved_forward_never_stored(conn: sqlite3.Connection, workspace: dict, ready: dict,
                                                           fixed: FixedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(series, "workspace_zone", lambda conn, ws: "Europe/Paris")
    fixed.set(datetime(2027, 3, 26, 12, 0, tzinfo=timezone.utc))
    shown = series.preview_series(conn, workspace["id"], ready["id"],
                                  {"rrule": "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "count": 3})
    assert shown["timezone"] == "Europe/Paris"
    assert shown["occurrences"] == [
        {"at": "2027-03-27T01:30:00.000Z", "local": "2027-03-27T02:30:00+01:00"},
        {"at": "2027-03-28T01:30:00.000Z", "local": "2027-03-28T03:30:00+02:00"},  # 02:30 does not exist that night
        {"at": "2027-03-29T00:30:00.000Z", "local": "2027-03-29T02:30:00+02:00"},
    ]
    made = series.create_series(conn, workspace["id"], ready["id"], {"rrule": "FREQ=DAILY;BYHOUR=2;BYMINUTE=30"})
    fixed.set(datetime(2027, 3, 28, 1, 31, tzinfo=timezone.utc))
    jobs.run_due(conn)
    stored = [r[0] for r in conn.execute("SELECT occurrence_at FROM campaign_series_occurrences WHERE series_id = ?",
                                         (made["id"],))]
    assert stored == ["2027-03-27T01:30:00.000Z", "2027-03-28T01:30:00.000Z"]
    assert series.get_series(conn, workspace["id"], made["id"])["next_occurrence"]["local"] == \
        "2027-03-29T02:30:00+02:00"


def test_a_rule_that_cannot_be_computed_ends_the_series_with_the_reason(
        conn: sqlite3.Connection, workspace: dict, ready: dict, fixed: FixedClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.kernel import recurrence

    made = series.create_series(conn, workspace["id"], ready["id"], {"rrule": WEEKLY})
    monkeypatch.setattr(recurrence, "COMPUTE_SECONDS", -1.0)  # every walk is past its deadline
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    assert jobs.run_due(conn)["failed"] == 0
    row = conn.execute("SELECT status, status_detail, next_run_at FROM campaign_series WHERE id = ?",
                       (made["id"],)).fetchone()
    assert (row["status"], row["next_run_at"]) == ("FINISHED", None)
    assert row["status_detail"].startswith("The series ended: its next occurrence could not be computed (")
    assert _copies(conn, workspace["id"], ready["id"]) == []


def test_the_rule_is_read_in_the_workspace_zone_utc_unless_set(conn: sqlite3.Connection, workspace: dict) -> None:
    from marketing_cli.services.account import workspaces

    assert series.workspace_zone(conn, workspace["id"]) == "UTC"
    workspaces.update_workspace(conn, workspace["id"], {"name": "Paris office", "conversion_tracking": False,
                                                        "timezone": "Europe/Paris"})
    assert series.workspace_zone(conn, workspace["id"]) == "Europe/Paris"


@pytest.mark.parametrize(("body", "message"), [
    ({}, "Please provide a recurrence rule (an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=MO;BYHOUR=9)."),
    ({"rrule": "FREQ=FORTNIGHTLY"}, "Invalid recurrence rule: invalid 'FREQ': FORTNIGHTLY. Write an RFC 5545 RRULE "
                                    "such as FREQ=WEEKLY;BYDAY=MO;BYHOUR=9."),
    ({"rrule": "FREQ=WEEKLY;BYDAY=XX"}, None),
    ({"rrule": "FREQ=MINUTELY"}, "A recurring campaign may repeat at most once an hour: use FREQ=HOURLY or a "
                                 "longer frequency."),
    ({"rrule": "FREQ=HOURLY;BYMINUTE=0,30"}, "A recurring campaign may repeat at most once an hour: this rule has "
                                             "occurrences 30 minute(s) apart."),
    ({"rrule": "FREQ=DAILY;INTERVAL=0"}, "Invalid recurrence rule: INTERVAL must be a whole number from 1 to 999999."),
    ({"rrule": "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30"}, "The recurrence rule's occurrences could not be found in "
                                                       "reasonable time (they are too far apart or never come): "
                                                       "simplify the rule."),
    ({"rrule": "FREQ=MONTHLY;INTERVAL=12;BYMONTH=2"}, "The recurrence rule has no occurrence after now: nothing "
                                                      "would ever be sent."),
    ({"rrule": "FREQ=DAILY;UNTIL=20200101T000000Z"}, "The recurrence rule has no occurrence after now: nothing "
                                                     "would ever be sent."),
    ({"rrule": "DTSTART:20260101T000000Z\nRRULE:FREQ=DAILY"}, "The recurrence rule must not set DTSTART: a series "
                                                              "starts when it is made."),
    ({"rrule": 7}, "The member 'rrule' must be a string."),
    ({"rrule": WEEKLY, "every": "week"}, "Unknown member 'every'"),
    ({"rrule": WEEKLY, "feed_url": "ftp://x.org/feed"}, "The url must start with http:// or https://"),
    ([], "Invalid request body."),
])
def test_bad_rules_are_refused_and_nothing_is_written(conn: sqlite3.Connection, workspace: dict, ready: dict,
                                                      body: Any, message: str | None) -> None:
    with pytest.raises(MktError) as refused:
        series.create_series(conn, workspace["id"], ready["id"], body)
    assert refused.value.status == 400
    if message is None:
        assert refused.value.message.startswith("Invalid recurrence rule: ")
    else:
        assert refused.value.message == message
    assert conn.execute("SELECT count(*) FROM campaign_series").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM jobs WHERE type = ?", (series.JOB,)).fetchone()[0] == 0


def test_a_campaign_that_is_not_ready_cannot_recur(conn: sqlite3.Connection, workspace: dict, fixed: FixedClock) -> None:
    draft = factories.campaign(conn, workspace["id"])
    with pytest.raises(MktError) as refused:
        series.create_series(conn, workspace["id"], draft["id"], {"rrule": WEEKLY})
    assert refused.value.message == email_schedule.NO_SENDER
    with pytest.raises(MktError) as missing:
        series.get_series(conn, workspace["id"], 99)
    assert (missing.value.status, missing.value.message) == (404, series.NOT_FOUND)


# --- feeds -------------------------------------------------------------------------------------

FEED_HTML = ('<p>{{feed.title}}: {{feed.item_count}} new</p>{{#feed.items}}<div class="item"><h2><a href="{{item.url}}">'
             '{{item.title}}</a></h2><p>{{item.summary}}</p><small>{{item.date}}</small></div>{{/feed.items}}'
             '<p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>')


OLD = ("post-1", "First post", "Mon, 23 Nov 2026 10:00:00 GMT")


@pytest.fixture
def feed_server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")  # the local server is on 127.0.0.1
    pages: dict[str, tuple[int, dict[str, str], bytes]] = {
        "/feed.xml": (200, {"Content-Type": "application/rss+xml"}, rss([OLD]))}
    with factories.PageServer(pages) as server:
        server.pages = pages
        yield server


@pytest.fixture
def feed_campaign(conn: sqlite3.Connection, workspace: dict, ready: dict, fixed: FixedClock) -> dict[str, Any]:
    ws = workspace["id"]
    variant_html.set_variant_html(conn, ws, ready["id"], "A", {"html": FEED_HTML})
    campaigns.configure_campaign(conn, ws, ready["id"], {"variants": [
        {"type": "A", "subject": "New on {{feed.title}}: {{feed.latest_title}}"}]})
    return ready


def test_a_feed_with_no_new_item_sends_nothing_and_records_one_skipped_occurrence(
        conn: sqlite3.Connection, workspace: dict, feed_campaign: dict, feed_server: Any, fixed: FixedClock,
        tmp_path: Path) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, feed_campaign["id"], {"rrule": WEEKLY,
                                                                "feed_url": feed_server.url("/feed.xml")})
    assert made["feed_url"] == feed_server.url("/feed.xml")
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    jobs.run_due(conn)
    assert _copies(conn, ws, feed_campaign["id"]) == [] and _outbox(tmp_path) == []
    listed = series.list_series(conn, ws)["series"][0]
    assert listed["counts"] == {"SENT": 0, "MISSED": 0, "SKIPPED": 1, "FAILED": 0}
    assert listed["last_occurrence"]["status"] == "SKIPPED"
    assert listed["last_occurrence"]["reason"] == occurrences.NOTHING_NEW


def test_a_feed_with_two_new_items_sends_one_campaign_with_both(
        conn: sqlite3.Connection, workspace: dict, feed_campaign: dict, feed_server: Any, fixed: FixedClock,
        tmp_path: Path) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, feed_campaign["id"], {"rrule": WEEKLY,
                                                                "feed_url": feed_server.url("/feed.xml")})
    feed_server.pages["/feed.xml"] = (200, {}, rss([
        ("post-3", "Third {{unsubscribe_url}} &amp; more", "Sun, 29 Nov 2026 10:00:00 GMT"),
        ("post-2", "Second post", "Sat, 28 Nov 2026 10:00:00 GMT"), OLD]))
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    jobs.run_due(conn)
    copies = _copies(conn, ws, feed_campaign["id"])
    assert [c["status"] for c in copies] == ["SENT"]
    html = variant_html.get_variant_html(conn, ws, copies[0]["id"], "A")["body_html"]
    assert html.count('class="item"') == 2
    assert html.index("Third") < html.index("Second post") and "First post" not in html
    assert "Third &#123;&#123;unsubscribe_url&#125;&#125; &amp; more" in html  # no merge tag out of a feed
    assert "<script" not in html and "About Second post" in html
    assert 'href="https://blog.example.org/post-2"' in html and "The Blog: 2 new" in html
    assert copies[0]["variants"][0]["subject"] == "New on The Blog: Third ((unsubscribe_url)) & more"
    messages = _outbox(tmp_path)
    assert len(messages) == 2
    body = messages[0].read_text()
    assert "Second post" in body
    shown = series.get_series(conn, ws, made["id"])
    assert shown["occurrences"][0]["item_count"] == 2

    # the next week: the same feed has nothing new
    fixed.set(datetime(2026, 12, 7, 9, 0, 5, tzinfo=timezone.utc))
    jobs.run_due(conn)
    assert len(_copies(conn, ws, feed_campaign["id"])) == 1
    assert series.get_series(conn, ws, made["id"])["counts"] == {"SENT": 1, "MISSED": 0, "SKIPPED": 1, "FAILED": 0}


def test_a_failed_fetch_is_recorded_retried_and_never_sends_stale_content(
        conn: sqlite3.Connection, workspace: dict, feed_campaign: dict, feed_server: Any, fixed: FixedClock) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, feed_campaign["id"], {"rrule": WEEKLY,
                                                                "feed_url": feed_server.url("/feed.xml")})
    feed_server.pages["/feed.xml"] = (500, {}, b"down")
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    assert jobs.run_due(conn)["failed"] == 1
    shown = series.get_series(conn, ws, made["id"])
    assert shown["last_occurrence"]["status"] == "FAILED"
    assert shown["last_occurrence"]["reason"] == ("The feed could not be fetched: We could not fetch the url: "
                                                  "the server answered 500.")
    job = conn.execute("SELECT * FROM jobs WHERE type = ? ORDER BY id DESC", (series.JOB,)).fetchone()
    assert job["status"] == "queued"  # retried with the queue's backoff

    feed_server.pages["/feed.xml"] = (200, {}, rss([("post-2", "Second post", "Sun, 29 Nov 2026 10:00:00 GMT"), OLD]))
    fixed.advance(seconds=30)
    jobs.run_due(conn)
    shown = series.get_series(conn, ws, made["id"])
    assert shown["counts"] == {"SENT": 1, "MISSED": 0, "SKIPPED": 0, "FAILED": 0}
    assert len(_copies(conn, ws, feed_campaign["id"])) == 1


def test_a_fetch_that_fails_for_good_moves_the_series_on(
        conn: sqlite3.Connection, workspace: dict, feed_campaign: dict, feed_server: Any, fixed: FixedClock) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, feed_campaign["id"], {"rrule": WEEKLY,
                                                                "feed_url": feed_server.url("/feed.xml")})
    feed_server.pages["/feed.xml"] = (404, {}, b"gone")
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    for _ in range(6):
        jobs.run_due(conn)
        fixed.advance(minutes=10)
    shown = series.get_series(conn, ws, made["id"])
    assert shown["counts"]["FAILED"] == 1 and shown["counts"]["SENT"] == 0
    assert shown["last_occurrence"]["reason"].startswith("The occurrence was given up after its job failed for good")
    assert shown["next_occurrence"]["at"] == "2026-12-07T09:00:00.000Z" and shown["status"] == "ACTIVE"
    assert _copies(conn, ws, feed_campaign["id"]) == []


def test_a_feed_series_needs_a_feed_and_a_block(conn: sqlite3.Connection, workspace: dict, ready: dict,
                                                feed_server: Any, fixed: FixedClock) -> None:
    ws = workspace["id"]
    with pytest.raises(MktError) as no_block:
        series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY, "feed_url": feed_server.url("/feed.xml")})
    assert no_block.value.message == series.feeds.NO_BLOCK
    feed_server.pages["/page.html"] = (200, {"Content-Type": "text/html"}, b"<html><body>hello</body></html>")
    with pytest.raises(MktError) as not_feed:
        series.create_series(conn, ws, ready["id"], {"rrule": WEEKLY, "feed_url": feed_server.url("/page.html")})
    assert not_feed.value.message == "The url did not return an RSS or Atom feed."
    assert conn.execute("SELECT count(*) FROM campaign_series").fetchone()[0] == 0


def test_a_feed_on_a_private_address_is_refused(conn: sqlite3.Connection, workspace: dict, feed_campaign: dict,
                                                fixed: FixedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    with pytest.raises(MktError) as refused:
        series.create_series(conn, workspace["id"], feed_campaign["id"],
                             {"rrule": WEEKLY, "feed_url": "http://127.0.0.1:9/feed.xml"})
    assert refused.value.message == ("The url points to a private, loopback or reserved network address, "
                                     "which is not allowed.")


def test_an_atom_feed_is_read(feed_server: Any) -> None:
    from marketing_cli.services.email import feeds

    atom = (b'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>Atom</title>'
            b'<link href="https://a.example.org/"/><id>urn:a</id><updated>2026-11-29T10:00:00Z</updated>'
            b'<entry><id>urn:a:1</id><title>One</title><link href="https://a.example.org/1"/>'
            b'<updated>2026-11-29T10:00:00Z</updated><summary>S</summary></entry></feed>')
    parsed = feeds.parse_feed(atom.decode())
    assert parsed.title == "Atom" and [(i.guid, i.title, i.url) for i in parsed.items] == [
        ("urn:a:1", "One", "https://a.example.org/1")]
    assert parsed.items[0].published == datetime(2026, 11, 29, 10, tzinfo=timezone.utc)

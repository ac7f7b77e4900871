"""Local-time delivery of an email campaign through the real send path, on a fixed clock:
Paris, New York and Sydney each get the message at 09:00 their time, across a DST change."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.contacts import zone_columns
from marketing_cli.services.email import campaigns, schedule, stats
from tests import factories as f


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def at(self, text: str) -> None:
        self.now = clock.parse_ts(text)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(datetime(2027, 3, 27, 12, 0, tzinfo=timezone.utc))  # Saturday before Europe's change
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


def _world(conn: sqlite3.Connection, ws: int) -> dict[str, Any]:
    f.field(conn, ws, "timezone")
    f.field(conn, ws, "phone_number")
    made = f.sendable_campaign(conn, ws, [])
    paris = f.contact(conn, ws, "paris@example.com", timezone="europe/paris")       # field (any case)
    newyork = f.contact(conn, ws, "ny@example.com", phone_number="+12125550100")     # phone
    sydney = f.contact(conn, ws, "syd@example.com")                                   # location
    zone_columns.remember_location(conn, sydney["id"], "Australia/Sydney")
    return {"campaign": made["id"], "paris": paris["id"], "ny": newyork["id"], "sydney": sydney["id"]}


def _delivered(conn: sqlite3.Connection, campaign_id: str) -> dict[str, str]:
    return {r["email"]: r["delivered_at"] for r in conn.execute(
        "SELECT email, delivered_at FROM email_messages WHERE campaign_id = ? AND delivered_at IS NOT NULL",
        (campaign_id,))}


def test_paris_new_york_and_sydney_get_it_at_nine_their_time_across_dst(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock) -> None:
    ws = workspace["id"]
    world = _world(conn, ws)
    answer = schedule.schedule_campaign(conn, ws, world["campaign"], {
        "schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"})
    assert answer["local_time"] == {"time": "09:00", "date": "2027-03-28", "missed": "next_day",
                                    "starts_at": "2027-03-27T19:00:00.000Z"}  # 09:00 at UTC+14
    jobs.run_due(conn)
    assert campaigns.get_campaign(conn, ws, world["campaign"])["status"] == "QUEUED"  # not before 19:00Z
    fake.at("2027-03-27T19:00:00Z")
    jobs.run_due(conn)
    rows = {r["email"]: (r["zone"], r["zone_source"], r["due_at"]) for r in conn.execute(
        "SELECT email, zone, zone_source, due_at FROM email_messages WHERE campaign_id = ?", (world["campaign"],))}
    assert rows == {
        "syd@example.com": ("Australia/Sydney", "location", "2027-03-27T22:00:00.000Z"),  # AEDT, UTC+11
        "paris@example.com": ("Europe/Paris", "field", "2027-03-28T07:00:00.000Z"),       # CEST since 01:00Z
        "ny@example.com": ("America/New_York", "phone", "2027-03-28T13:00:00.000Z"),      # EDT, UTC-4
    }
    assert _delivered(conn, world["campaign"]) == {}
    view = campaigns.get_campaign(conn, ws, world["campaign"])
    assert view["status"] == "SENDING" and view["local_time"]["waiting"] == 3
    assert view["progress"]["waiting_for_local_time"] == 3
    assert stats.get_campaign_statistics(conn, ws, world["campaign"])["waiting_for_local_time"] == 3
    for moment, expected in (("2027-03-27T22:00:00Z", {"syd@example.com"}),
                             ("2027-03-28T07:00:00Z", {"syd@example.com", "paris@example.com"}),
                             ("2027-03-28T13:00:00Z", {"syd@example.com", "paris@example.com", "ny@example.com"})):
        fake.at(moment)
        jobs.run_due(conn)
        delivered = _delivered(conn, world["campaign"])
        assert set(delivered) == expected
        assert max(delivered.values()) == clock.format_ts(fake.now)
    assert campaigns.get_campaign(conn, ws, world["campaign"])["status"] == "SENT"


def test_a_cancelled_local_time_campaign_sends_nothing_more(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock) -> None:
    ws = workspace["id"]
    world = _world(conn, ws)
    schedule.schedule_campaign(conn, ws, world["campaign"], {
        "schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"})
    fake.at("2027-03-27T22:00:00Z")
    jobs.run_due(conn)
    assert set(_delivered(conn, world["campaign"])) == {"syd@example.com"}
    schedule.cancel_campaign(conn, ws, world["campaign"])
    for moment in ("2027-03-28T07:00:00Z", "2027-03-28T13:00:00Z", "2027-03-29T13:00:00Z"):
        fake.at(moment)
        jobs.run_due(conn)
    assert set(_delivered(conn, world["campaign"])) == {"syd@example.com"}
    statuses = sorted(r[0] for r in conn.execute("SELECT status FROM email_messages WHERE campaign_id = ?",
                                                 (world["campaign"],)))
    assert statuses == ["cancelled", "cancelled", "delivered"]


@pytest.mark.parametrize(("missed", "expected"), [
    ("next_day", {"paris@example.com": "2027-03-29T07:00:00.000Z"}),
    ("send_now", {"paris@example.com": "2027-03-28T10:00:00.000Z"}),
    ("skip", {}),
])
def test_a_zone_whose_time_passed(conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock,
                                  missed: str, expected: dict[str, str]) -> None:
    ws = workspace["id"]
    world = _world(conn, ws)
    fake.at("2027-03-28T10:00:00Z")  # Paris and Sydney are past 09:00, New York is not
    answer = schedule.schedule_campaign(conn, ws, world["campaign"], {
        "schedule_type": "NOW", "local_time": "09:00", "local_time_missed": missed})
    assert answer["local_time"]["starts_at"] == "2027-03-28T10:00:00.000Z"
    jobs.run_due(conn)
    dues = {r["email"]: r["due_at"] for r in conn.execute(
        "SELECT email, due_at FROM email_messages WHERE campaign_id = ? AND email = 'paris@example.com'",
        (world["campaign"],))}
    assert dues == expected
    view = campaigns.get_campaign(conn, ws, world["campaign"])
    assert view["local_time"]["skipped"] == (2 if missed == "skip" else 0)


def test_bad_local_time_members_are_refused_and_nothing_is_written(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock) -> None:
    ws = workspace["id"]
    world = _world(conn, ws)
    for body, message in (
            ({"local_time": "25:00"}, "The local time must be HH:MM on a 24-hour clock (for example 09:00), not '25:00'."),
            ({"local_time": "09:00", "local_time_missed": "later"},
             "local_time_missed must be one of next_day, send_now or skip, not 'later'."),
            ({"local_time_missed": "skip"}, "local_time_missed needs local_time.")):
        with pytest.raises(MktError) as err:
            schedule.schedule_campaign(conn, ws, world["campaign"], {"schedule_type": "NOW", **body})
        assert (err.value.status, err.value.message) == (400, message)
    assert campaigns.get_campaign(conn, ws, world["campaign"])["status"] == "DRAFT"
    assert conn.execute("SELECT count(*) FROM jobs WHERE type = 'email.preprocess'").fetchone()[0] == 0


def test_the_preview_counts_recipients_per_zone(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                fake: FakeClock) -> None:
    ws = workspace["id"]
    world = _world(conn, ws)
    preview = schedule.preview_schedule(conn, ws, world["campaign"], {
        "schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"})
    assert preview["recipients"] == 3
    assert preview["zones"] == [
        {"zone": "Australia/Sydney", "recipients": 1, "send_at": "2027-03-27T22:00:00.000Z"},
        {"zone": "Europe/Paris", "recipients": 1, "send_at": "2027-03-28T07:00:00.000Z"},
        {"zone": "America/New_York", "recipients": 1, "send_at": "2027-03-28T13:00:00.000Z"},
    ]
    assert campaigns.get_campaign(conn, ws, world["campaign"])["status"] == "DRAFT"


def test_a_human_open_or_click_records_the_citys_zone(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.kernel.tokens import make_token
    from marketing_cli.services.delivery import tracking
    from marketing_cli.storage.db import instance_secret

    ws = workspace["id"]
    made = f.sendable_campaign(conn, ws, ["ann@example.com"])
    f.send_now(conn, ws, made["id"])
    message_id = conn.execute("SELECT id FROM email_messages WHERE campaign_id = ?", (made["id"],)).fetchone()[0]
    token = make_token(instance_secret(conn), "open", message_id)  # the pixel's kind (path_tokens.OPEN)
    zone_of = {"81.2.69.160": "Europe/London", "1.2.3.4": None}
    monkeypatch.setattr(tracking, "time_zone_of", zone_of.get)
    located = "SELECT located_timezone FROM contacts WHERE email = 'ann@example.com'"
    bot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
    tracking.track_open(conn, token, bot, "81.2.69.160")  # a machine: not where the person is
    assert conn.execute(located).fetchone()[0] is None
    tracking.track_open(conn, token, "Mozilla/5.0 (Windows NT 10.0; Win64; x64)", "81.2.69.160")
    assert conn.execute(located).fetchone()[0] == "Europe/London"
    tracking.track_open(conn, token, "Mozilla/5.0 (Windows NT 10.0; Win64; x64)", "1.2.3.4")  # no city: kept
    assert conn.execute(located).fetchone()[0] == "Europe/London"


def test_a_runner_that_starts_late_sends_what_came_due_meanwhile_at_once(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock) -> None:
    ws = workspace["id"]
    world = _world(conn, ws)
    schedule.schedule_campaign(conn, ws, world["campaign"], {
        "schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"})
    fake.at("2027-03-27T22:30:00Z")  # no runner from 19:00 to 22:30: Sydney's 09:00 came meanwhile
    jobs.run_due(conn)
    assert _delivered(conn, world["campaign"]) == {"syd@example.com": "2027-03-27T22:30:00.000Z"}
    due = conn.execute("SELECT due_at FROM email_messages WHERE email = 'syd@example.com'").fetchone()[0]
    assert due == "2027-03-27T22:00:00.000Z"  # its own day, not the next


def test_a_retry_due_before_the_next_zone_brings_the_send_back_at_the_retry(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock) -> None:
    from marketing_cli.services.delivery import claim, finish

    ws = workspace["id"]
    world = _world(conn, ws)
    schedule.schedule_campaign(conn, ws, world["campaign"], {
        "schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"})
    fake.at("2027-03-27T22:00:00Z")
    jobs.run_due(conn)
    row = conn.execute("SELECT * FROM campaigns WHERE id = ?", (world["campaign"],)).fetchone()
    assert finish._next_instant(conn, row) == "2027-03-28T07:00:00.000Z"  # Paris, the next zone
    # Sydney's message failed for now and is tried again at 23:00, before Paris's zone.
    conn.execute("UPDATE email_messages SET status = 'queued', retry_at = '2027-03-27T23:00:00.000Z'"
                 " WHERE email = 'syd@example.com'")
    assert finish._next_instant(conn, row) == "2027-03-27T23:00:00.000Z"
    assert claim._claim(conn, world["campaign"], 10, local=True) == []  # nothing due at 22:00
    fake.at("2027-03-27T23:00:00Z")
    assert [m["email"] for m in claim._claim(conn, world["campaign"], 10, local=True)] == ["syd@example.com"]
    # A retry due after the next zone does not hide the zone.
    conn.execute("UPDATE email_messages SET status = 'queued', retry_at = '2027-03-28T12:00:00.000Z'"
                 " WHERE email = 'syd@example.com'")
    assert finish._next_instant(conn, row) == "2027-03-28T07:00:00.000Z"


@pytest.mark.sqlite_only  # SQLite's query plan of the claim (EXPLAIN QUERY PLAN)
def test_releasing_a_zone_reads_the_due_index_not_the_zones_behind_it(conn: sqlite3.Connection) -> None:
    from marketing_cli.services.delivery import claim

    params = {"campaign": "c", "now": "2027-03-28T07:00:00.000Z", "size": 10}
    plans = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + claim._CLAIM_LOCAL, params)]
    assert any("email_messages_due (campaign_id=? AND due_at>? AND due_at<?)" in p for p in plans), plans
    plans = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN SELECT due_at FROM email_messages"
                                        " WHERE campaign_id = ? AND status = 'queued'"
                                        " AND due_at IS NOT NULL AND retry_at IS NULL ORDER BY due_at LIMIT 1",
                                        ("c",))]
    assert any("email_messages_due" in p for p in plans) and not any("TEMP B-TREE" in p for p in plans), plans

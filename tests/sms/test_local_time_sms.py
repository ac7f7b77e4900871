"""Local-time delivery of an SMS campaign on a fixed clock: Paris, New York and Sydney get
the text at 09:00 their time, across a DST change; a cancel stops every zone not yet sent."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns, schedule, stats
from tests import factories as f

PARIS, NEW_YORK, SYDNEY, BOISE = "+33612345678", "+12125550100", "+61412345678", "+12085550100"


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def at(self, text: str) -> None:
        self.now = clock.parse_ts(text)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(datetime(2027, 3, 27, 12, 0, tzinfo=timezone.utc))
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


@pytest.fixture
def world(conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock) -> dict[str, Any]:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    f.field(conn, ws, "timezone")
    f.sms_contacts(conn, ws, [PARIS, NEW_YORK])                # by phone
    f.sms_contacts(conn, ws, [SYDNEY], timezone="Australia/Sydney")  # +61 4 has 8 zones: by field
    campaign = f.sms_campaign(conn, ws)
    return {"ws": ws, "campaign": campaign["id"]}


def _handed(conn: sqlite3.Connection, campaign_id: str) -> dict[str, str]:
    return {r["phone"]: r["handed_at"] for r in conn.execute(
        "SELECT phone, handed_at FROM sms_messages WHERE campaign_id = ? AND handed_at IS NOT NULL", (campaign_id,))}


def _schedule(conn: sqlite3.Connection, world: dict[str, Any]) -> dict[str, Any]:
    return schedule.schedule_campaign(conn, world["ws"], world["campaign"], {
        "schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"})


def test_paris_new_york_and_sydney_get_the_text_at_nine_their_time(
        conn: sqlite3.Connection, world: dict[str, Any], fake: FakeClock) -> None:
    answer = _schedule(conn, world)
    assert answer["local_time"]["starts_at"] == "2027-03-27T19:00:00.000Z"
    fake.at("2027-03-27T19:00:00Z")
    jobs.run_due(conn)
    rows = {r["phone"]: (r["zone"], r["zone_source"], r["due_at"], r["status"]) for r in conn.execute(
        "SELECT phone, zone, zone_source, due_at, status FROM sms_messages WHERE campaign_id = ?", (world["campaign"],))}
    assert rows == {
        SYDNEY: ("Australia/Sydney", "field", "2027-03-27T22:00:00.000Z", "pending"),
        PARIS: ("Europe/Paris", "phone", "2027-03-28T07:00:00.000Z", "pending"),
        NEW_YORK: ("America/New_York", "phone", "2027-03-28T13:00:00.000Z", "pending"),
    }
    view = campaigns.get_campaign(conn, world["ws"], world["campaign"])
    assert view["status"] == "QUEUED" and view["local_time"]["waiting"] == 3
    assert stats.campaign_statistics(conn, world["ws"], world["campaign"])["waiting_for_local_time"] == 3
    for moment, expected in (("2027-03-27T22:00:00Z", {SYDNEY}), ("2027-03-28T07:00:00Z", {SYDNEY, PARIS}),
                             ("2027-03-28T13:00:00Z", {SYDNEY, PARIS, NEW_YORK})):
        fake.at(moment)
        jobs.run_due(conn)
        handed = _handed(conn, world["campaign"])
        assert set(handed) == expected
        assert max(handed.values()) == clock.format_ts(fake.now)
    assert campaigns.get_campaign(conn, world["ws"], world["campaign"])["status"] == "COMPLETED"


def test_a_cancelled_local_time_campaign_sends_nothing_more_and_refunds_the_waiting(
        conn: sqlite3.Connection, world: dict[str, Any], fake: FakeClock) -> None:
    _schedule(conn, world)
    fake.at("2027-03-27T22:00:00Z")
    jobs.run_due(conn)
    assert set(_handed(conn, world["campaign"])) == {SYDNEY}
    cancelled = campaigns.cancel_campaign(conn, world["ws"], world["campaign"])
    assert cancelled["refunded_messages"] == 2
    for moment in ("2027-03-28T07:00:00Z", "2027-03-28T13:00:00Z", "2027-03-29T13:00:00Z"):
        fake.at(moment)
        jobs.run_due(conn)
    assert set(_handed(conn, world["campaign"])) == {SYDNEY}
    assert conn.execute("SELECT count(*) FROM sms_outbox WHERE campaign_id = ?", (world["campaign"],)).fetchone()[0] == 1


def test_a_number_whose_zones_disagree_gets_the_workspace_zone(
        conn: sqlite3.Connection, world: dict[str, Any], fake: FakeClock) -> None:
    from marketing_cli.services.account import workspaces

    workspaces.update_workspace(conn, world["ws"], {"name": "Test workspace", "conversion_tracking": False,
                                                    "timezone": "America/Chicago"})
    f.sms_contacts(conn, world["ws"], [BOISE])  # Boise and Los Angeles: no answer by phone
    preview = schedule.preview_schedule(conn, world["ws"], world["campaign"], {
        "schedule_type": "LATER", "scheduled_at": "2027-03-28T12:00:00Z", "local_time": "09:00"})
    assert {z["zone"]: z["recipients"] for z in preview["zones"]} == {
        "Australia/Sydney": 1, "Europe/Paris": 1, "America/New_York": 1, "America/Chicago": 1}
    assert preview["local_time"]["date"] == "2027-03-28"  # read in the workspace's zone

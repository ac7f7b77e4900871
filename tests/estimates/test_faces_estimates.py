"""Issue 41 item 1: one estimate of a campaign's future, read by every face (CONTRACT section 12).

Each finding of the issue is a test here, on a fixed clock, on both engines:
- a local-time email send one zone in: the waiting messages in `watch`'s line, its ETA and its
  next release, `scheduled` = the next zone, and `stats` naming them;
- an SMS scheduled at 10:00 local time on a Sunday: France held by quiet hours until Monday
  08:00, Tokyo skipped (no rate), one count of recipients on every screen and in the cost;
- a weekly series and a local-time campaign listed as scheduled with their next occurrence
  (API, CLI and dashboard);
- the same campaign scheduled through every face: the same numbers everywhere.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime, timezone
from html import unescape
from typing import Any

import pytest
from starlette.testclient import TestClient

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.kernel.money import cents
from marketing_cli.services.contacts import zone_columns
from marketing_cli.services.email import schedule
from marketing_cli.services.sms import quiet_hours
from tests import factories as f

SATURDAY = datetime(2027, 3, 27, 12, 0, tzinfo=timezone.utc)   # the Saturday before Europe's DST change


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def at(self, text: str) -> None:
        self.now = clock.parse_ts(text)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(SATURDAY)
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


@pytest.fixture
def real_quiet_hours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(quiet_hours.TABLE_ENV, raising=False)  # the shipped table: France closed on Sundays


def _email_world(conn: sqlite3.Connection, ws: int) -> str:
    f.field(conn, ws, "timezone")
    f.field(conn, ws, "phone_number")
    made = f.sendable_campaign(conn, ws, [])
    f.contact(conn, ws, "paris@example.com", timezone="Europe/Paris")
    f.contact(conn, ws, "ny@example.com", phone_number="+12125550100")
    f.contact(conn, ws, "ny2@example.com", phone_number="+12125550101")
    sydney = f.contact(conn, ws, "syd@example.com")
    zone_columns.remember_location(conn, sydney["id"], "Australia/Sydney")
    return made["id"]


LOCAL_NINE = {"schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"}


# --- finding 1: a local-time email send, one zone in -----------------------------------------------

def test_a_local_time_send_shows_its_waiting_messages_next_zone_and_eta(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock, cli: Any, cli_json: Any,
        client: Any, auth: dict[str, str]) -> None:
    ws = workspace["id"]
    campaign = _email_world(conn, ws)
    schedule.schedule_campaign(conn, ws, campaign, LOCAL_NINE)
    fake.at("2027-03-27T22:00:00Z")   # Sydney's 09:00: the first zone goes
    jobs.run_due(conn)
    fake.at("2027-03-27T22:01:00Z")   # one minute in
    view = client.get(f"/v1/campaigns/{campaign}", headers=auth).json()["data"]
    assert view["status"] == "SENDING" and view["progress"]["sent"] == 1
    assert view["estimate"] == {"recipients": 3, "cost": None, "groups": [
        {"state": "waiting", "recipients": 1, "until": "2027-03-28T07:00:00.000Z",
         "reason": "09:00 local time in Europe/Paris", "cost": None},
        {"state": "waiting", "recipients": 2, "until": "2027-03-28T13:00:00.000Z",
         "reason": "09:00 local time in America/New_York", "cost": None}]}
    # the ETA counts the messages waiting for their zone: the last goes at 13:00Z, 14 h 59 min from now
    assert view["progress"]["eta_seconds"] >= 14 * 3600 + 59 * 60
    assert view["scheduled_at"] == "2027-03-28T07:00:00.000Z"   # the next zone, not "not scheduled"
    listed = client.get("/v1/campaigns", headers=auth).json()["data"]["campaigns"]
    assert [(c["scheduled_at"], c["estimate"]) for c in listed] == [(view["scheduled_at"], view["estimate"])]
    watched = cli("campaigns", "watch", campaign, "--once").stdout
    assert "3 will get the message: 3 waiting for local time." in watched
    assert "next: 09:00 local time in Europe/Paris at 2027-03-28 07:00" in watched and "UTC, 1 recipient" in watched
    assert re.search(r"about (\d[\d,]*) s left", watched) and \
        int(re.search(r"about (\d[\d,]*) s left", watched).group(1).replace(",", "")) >= 14 * 3600
    shown = cli("campaigns", "show", campaign).stdout
    assert "not scheduled" not in shown and "2027-03-28 07:00" in shown
    stats = cli("campaigns", "stats", campaign).stdout
    assert "Still to come: 3 will get the message: 3 waiting for local time." in stats
    assert cli_json("campaigns", "stats", campaign)["estimate"] == view["estimate"]
    assert cli_json("campaigns", "show", campaign)["estimate"] == view["estimate"]


# --- finding 2: an SMS at 10:00 local time on a Sunday -----------------------------------------------

def _sms_world(conn: sqlite3.Connection, ws: int) -> str:
    f.sms_ready(conn, ws)
    f.sms_contacts(conn, ws, ["+33612345678", "+33612345679", "+12125550100", "+81312345678"])
    return f.sms_campaign(conn, ws)["id"]


SUNDAY_TEN = {"schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "10:00"}


def test_an_sms_on_a_sunday_holds_france_until_monday_and_skips_tokyo(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock, real_quiet_hours: None,
        client: Any, auth: dict[str, str], cli: Any) -> None:
    ws = workspace["id"]
    campaign = _sms_world(conn, ws)
    preview = client.post(f"/v1/sms-campaigns/{campaign}/schedule/preview", json=SUNDAY_TEN,
                          headers=auth).json()["data"]
    groups = preview["estimate"]["groups"]
    assert [(g["state"], g["recipients"], g["until"]) for g in groups] == [
        ("waiting", 1, "2027-03-28T14:00:00.000Z"),   # New York at 10:00 EDT
        ("held", 2, "2027-03-30T06:00:00.000Z"),      # Paris: closed on Sunday and Easter Monday: Tuesday 08:00
        ("skipped", 1, None)]                         # Tokyo: no published rate
    assert groups[1]["reason"] == "quiet hours: FR closed on Sunday Europe/Paris"
    assert groups[2]["reason"] == "no published rate for their country (JP)"
    # one number of recipients: the preview's, its estimate's, the reach's and the cost's
    reach = client.get(f"/v1/sms-campaigns/{campaign}/reach", headers=auth).json()["data"]
    assert preview["recipients"] == preview["estimate"]["recipients"] == reach["recipients"] == 3
    from marketing_cli.services.sms.schedule import estimate_cost

    cost, counted = estimate_cost(conn, ws, f.SMS_TEXT, [{"type": "ENTIRE_AUDIENCE"}])
    assert counted == 3 and f"{cost:.5f}".rstrip("0").rstrip(".") == \
        preview["estimate"]["cost"].rstrip("0").rstrip(".")
    refused = cli("sms", "schedule", campaign, "--at", "2027-03-28 00:00", "--local-time", "10:00", input="n\n")
    assert refused.exit_code == 1
    assert "3 will get the message ($" in refused.stderr and "held by quiet hours" in refused.stderr
    assert "FR closed on Sunday" in refused.stderr and "(JP)" in refused.stderr
    assert "3 will get the message" in refused.stdout   # the reach line agrees


# --- finding 3: a weekly series and a local-time campaign are scheduled ------------------------------

def test_a_series_and_a_local_time_campaign_list_as_scheduled(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock, client: Any, auth: dict[str, str],
        cli: Any, app: Any) -> None:
    from marketing_cli.services.email import campaigns, series

    ws = workspace["id"]
    local = _email_world(conn, ws)
    weekly = campaigns.duplicate_campaign(conn, ws, local)["id"]
    made = series.create_series(conn, ws, weekly, {"rrule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0"})
    next_run = made["next_occurrence"]["at"]
    client.post(f"/v1/campaigns/{local}/schedule", json={"schedule_type": "NOW", "local_time": "23:00"},
                headers=auth)
    listed = {c["id"]: c for c in client.get("/v1/campaigns", headers=auth).json()["data"]["campaigns"]}
    assert listed[weekly]["status"] == "DRAFT" and listed[weekly]["scheduled_at"] == next_run
    assert listed[weekly]["estimate"]["groups"] == [
        {"state": "now", "recipients": 4, "until": next_run, "reason": None, "cost": None}]
    assert listed[local]["status"] == "QUEUED" and listed[local]["scheduled_at"] is not None
    table = cli("campaigns", "list").stdout
    assert "DRAFT (series)" in table and table.count("not scheduled") == 0
    with TestClient(app, follow_redirects=False) as browser:
        browser.post("/dashboard/sign-in", data={"api_key": workspace["api_key"]},
                     headers={"Origin": "http://testserver"})
        page = unescape(browser.get("/dashboard/").text)
    assert "DRAFT (series)" in page and next_run in page and listed[local]["scheduled_at"] in page


# --- the same campaign through every face ---------------------------------------------------------

def _numbers(est: dict[str, Any]) -> list[tuple[str, int, str | None]]:
    return [(g["state"], g["recipients"], g["until"]) for g in est["groups"]]


def test_every_face_shows_the_same_numbers(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock, real_quiet_hours: None,
        client: Any, auth: dict[str, str], cli: Any, cli_json: Any, app: Any) -> None:
    ws = workspace["id"]
    campaign = _sms_world(conn, ws)
    preview = client.post(f"/v1/sms-campaigns/{campaign}/schedule/preview", json=SUNDAY_TEN,
                          headers=auth).json()["data"]["estimate"]
    cli_preview = cli("sms", "schedule", campaign, "--at", "2027-03-28 00:00", "--local-time", "10:00", "--yes")
    assert cli_preview.exit_code == 0, cli_preview.stderr
    line = f"3 will get the message (${cents(preview['cost'])}): 1 waiting for local time, 2 held by quiet hours; 1 skipped"
    assert line + "." in " ".join(cli_preview.stderr.split())   # the preview (its title wraps)
    assert line in " ".join(cli_preview.stdout.split())   # the schedule's confirmation
    shown = client.get(f"/v1/sms-campaigns/{campaign}", headers=auth).json()["data"]
    listed = client.get("/v1/sms-campaigns", headers=auth).json()["data"]["campaigns"][0]
    statistics = client.get(f"/v1/sms-campaigns/{campaign}/statistics", headers=auth).json()["data"]
    for est in (shown["estimate"], listed["estimate"], statistics["estimate"],
                cli_json("sms", "show", campaign)["estimate"], cli_json("sms", "stats", campaign)["estimate"],
                cli_json("sms", "list")["campaigns"][0]["estimate"]):
        assert est == preview
    assert line in " ".join(cli("sms", "show", campaign).stdout.split())
    assert line in " ".join(cli("sms", "stats", campaign).stdout.split())
    assert listed["scheduled_at"] == "2027-03-28T14:00:00.000Z"   # the next release: New York's 10:00
    with TestClient(app, follow_redirects=False) as browser:
        browser.post("/dashboard/sign-in", data={"api_key": workspace["api_key"]},
                     headers={"Origin": "http://testserver"})
        page = unescape(browser.get("/dashboard/").text)
    assert "1 waiting, 2 held, 1 skipped; next 2027-03-28T14:00:00.000Z" in page


def test_a_frozen_email_campaign_keeps_its_numbers_through_the_send(
        conn: sqlite3.Connection, workspace: dict[str, Any], fake: FakeClock, client: Any,
        auth: dict[str, str]) -> None:
    """Before the freeze the estimate reads the audience, after it the queued messages: the same groups."""
    ws = workspace["id"]
    campaign = _email_world(conn, ws)
    assert client.post(f"/v1/campaigns/{campaign}/schedule", json=LOCAL_NINE, headers=auth).status_code == 200
    before = client.get(f"/v1/campaigns/{campaign}", headers=auth).json()["data"]["estimate"]
    assert _numbers(before) == [("waiting", 1, "2027-03-27T22:00:00.000Z"), ("waiting", 1, "2027-03-28T07:00:00.000Z"),
                                ("waiting", 2, "2027-03-28T13:00:00.000Z")]
    fake.at("2027-03-27T19:00:00Z")
    jobs.run_due(conn)   # frozen: the messages are written, none due yet
    after = client.get(f"/v1/campaigns/{campaign}", headers=auth).json()["data"]["estimate"]
    assert after == before
    assert json.loads(json.dumps(after)) == client.get(f"/v1/campaigns/{campaign}/statistics",
                                                       headers=auth).json()["data"]["estimate"]

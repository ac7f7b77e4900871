"""Local time on both faces: the schedule call's local_time members and its preview over
HTTP, `mkt campaigns schedule --local-time` (count per zone, then confirm), `--at` as a
person types it, the workspace's time zone, and a bad `timezone` value refused with 400."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.contacts import zone_columns
from tests import factories as f

START = datetime(2027, 3, 27, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "utcnow", lambda: START)


@pytest.fixture
def campaign(conn: sqlite3.Connection, workspace: dict[str, Any]) -> str:
    ws = workspace["id"]
    f.field(conn, ws, "timezone")
    f.field(conn, ws, "phone_number")
    made = f.sendable_campaign(conn, ws, [])
    f.contact(conn, ws, "paris@example.com", timezone="Europe/Paris")
    f.contact(conn, ws, "ny@example.com", phone_number="+12125550100")
    sydney = f.contact(conn, ws, "syd@example.com")
    zone_columns.remember_location(conn, sydney["id"], "Australia/Sydney")
    return made["id"]


BODY = {"schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"}
ZONES = [{"zone": "Australia/Sydney", "recipients": 1, "send_at": "2027-03-27T22:00:00.000Z"},
         {"zone": "Europe/Paris", "recipients": 1, "send_at": "2027-03-28T07:00:00.000Z"},
         {"zone": "America/New_York", "recipients": 1, "send_at": "2027-03-28T13:00:00.000Z"}]


def test_http_preview_then_schedule(client: Any, auth: dict[str, str], campaign: str) -> None:
    preview = client.post(f"/v1/campaigns/{campaign}/schedule/preview", json=BODY, headers=auth)
    assert preview.status_code == 200
    assert preview.json()["data"]["zones"] == ZONES
    assert client.get(f"/v1/campaigns/{campaign}", headers=auth).json()["data"]["status"] == "DRAFT"
    answer = client.post(f"/v1/campaigns/{campaign}/schedule", json=BODY, headers=auth).json()
    assert answer == {"error": None, "data": {
        "id": campaign, "status": "QUEUED", "scheduled_at": "2027-03-28T00:00:00.000Z",
        "local_time": {"time": "09:00", "date": "2027-03-28", "missed": "next_day",
                       "starts_at": "2027-03-27T19:00:00.000Z"}}}
    view = client.get(f"/v1/campaigns/{campaign}", headers=auth).json()["data"]
    assert view["local_time"] == {"time": "09:00", "date": "2027-03-28", "missed": "next_day",
                                  "waiting": None, "skipped": 0}


def test_http_bad_members_are_400_and_write_nothing(client: Any, auth: dict[str, str], campaign: str) -> None:
    answer = client.post(f"/v1/campaigns/{campaign}/schedule", json={**BODY, "local_time": "9am"}, headers=auth)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == \
        "The local time must be HH:MM on a 24-hour clock (for example 09:00), not '9am'."
    assert client.get(f"/v1/campaigns/{campaign}", headers=auth).json()["data"]["status"] == "DRAFT"


def test_cli_shows_the_count_per_zone_and_asks(cli: Any, client: Any, auth: dict[str, str], campaign: str) -> None:
    refused = cli("campaigns", "schedule", campaign, "--at", "2027-03-28 00:00", "--local-time", "09:00",
                  input="n\n")
    assert refused.exit_code == 1
    for zone in ("Australia/Sydney", "Europe/Paris", "America/New_York", "2027-03-27 22:00 UTC"):
        assert zone in refused.stderr
    assert client.get(f"/v1/campaigns/{campaign}", headers=auth).json()["data"]["status"] == "DRAFT"
    done = cli("campaigns", "schedule", campaign, "--at", "2027-03-28 00:00", "--local-time", "09:00",
               input="y\n")
    assert done.exit_code == 0, done.stderr
    assert "queued for 2027-03-28T00:00:00.000Z (UTC)" in done.stdout
    assert "sending starts 2027-03-27T19:00:00.000Z" in done.stdout


def test_cli_json_is_the_api_data(cli_json: Any, campaign: str) -> None:
    answer = cli_json("campaigns", "schedule", campaign, "--at", "2027-03-28T01:00+01:00", "--local-time", "9:00",
                      "--missed", "skip", "--yes")
    assert answer == {"id": campaign, "status": "QUEUED", "scheduled_at": "2027-03-28T00:00:00.000Z",
                      "local_time": {"time": "09:00", "date": "2027-03-28", "missed": "skip",
                                     "starts_at": "2027-03-27T19:00:00.000Z"}}


def test_at_is_read_in_the_workspace_zone_and_echoed_in_utc(cli: Any, cli_json: Any, campaign: str) -> None:
    updated = cli_json("workspace", "update", "--timezone", "europe/paris")
    assert updated["timezone"] == "Europe/Paris"
    result = cli("campaigns", "schedule", campaign, "--at", "2027-04-01 09:00")
    assert result.exit_code == 0, result.stderr
    assert "queued for 2027-04-01T07:00:00.000Z (UTC)" in result.stdout  # CEST


def test_at_in_a_dst_gap_is_moved_forward(cli_json: Any, campaign: str) -> None:
    cli_json("workspace", "update", "--timezone", "America/New_York")
    answer = cli_json("campaigns", "schedule", campaign, "--at", "2028-03-12 02:30")
    assert answer["scheduled_at"] == "2028-03-12T07:30:00.000Z"  # 03:30 EDT


def test_a_bad_at_says_what_is_read(cli: Any, campaign: str) -> None:
    result = cli("campaigns", "schedule", campaign, "--at", "next tuesday")
    assert result.exit_code == 1
    assert "write it as YYYY-MM-DD HH:MM (in the workspace's time zone, UTC)" in result.stderr


def test_the_workspace_zone_on_both_faces(client: Any, auth: dict[str, str], cli_json: Any) -> None:
    answer = client.patch("/v1/workspace", json={"name": "Test workspace", "conversion_tracking": False,
                                                  "timezone": "Asia/Tokyo"}, headers=auth)
    assert answer.status_code == 200 and answer.json()["data"]["timezone"] == "Asia/Tokyo"
    assert client.get("/v1/workspace", headers=auth).json()["data"]["workspace"]["timezone"] == "Asia/Tokyo"
    assert cli_json("workspace", "show")["workspace"]["timezone"] == "Asia/Tokyo"
    bad = client.patch("/v1/workspace", json={"name": "Test workspace", "conversion_tracking": False,
                                              "timezone": "Mars/Base"}, headers=auth)
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == ("The member 'timezone' must be an IANA time zone name "
                                              "(for example Europe/Paris or UTC), not 'Mars/Base'.")
    assert client.get("/v1/workspace", headers=auth).json()["data"]["workspace"]["timezone"] == "Asia/Tokyo"


def test_a_bad_timezone_value_is_400_on_both_faces(client: Any, auth: dict[str, str], cli: Any,
                                                   conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    f.field(conn, workspace["id"], "timezone")
    answer = client.post("/v1/contacts", json={"status": "SUBSCRIBED", "fields": {"email_address": "a@example.com", "timezone": "Nowhere"}},
                         headers=auth)
    assert answer.status_code == 400
    assert "must be an IANA time zone name" in str(answer.json()["error"])
    result = cli("contacts", "create", "--status", "SUBSCRIBED", "--field", "email_address=a@example.com",
                 "--field", "timezone=Nowhere")
    assert result.exit_code == 1
    assert answer.json()["error"]["message"] in result.stderr
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0

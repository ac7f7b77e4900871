"""SMS local-time delivery on both faces: POST /v1/sms-campaigns/:id/schedule with
local_time and its preview; `mkt sms schedule --local-time` (count per zone, confirm, --json)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli.kernel import clock
from tests import factories as f

START = datetime(2027, 3, 27, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "utcnow", lambda: START)


@pytest.fixture
def campaign(conn: sqlite3.Connection, workspace: dict[str, Any]) -> str:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    f.sms_contacts(conn, ws, ["+33612345678", "+12125550100", "+12125550101"])
    return f.sms_campaign(conn, ws)["id"]


BODY = {"schedule_type": "LATER", "scheduled_at": "2027-03-28T00:00:00Z", "local_time": "09:00"}


def test_http_preview_schedule_and_statistics(client: Any, auth: dict[str, str], campaign: str) -> None:
    preview = client.post(f"/v1/sms-campaigns/{campaign}/schedule/preview", json=BODY, headers=auth).json()["data"]
    assert preview["recipients"] == 3
    assert preview["zones"] == [{"zone": "Europe/Paris", "recipients": 1, "send_at": "2027-03-28T07:00:00.000Z"},
                                {"zone": "America/New_York", "recipients": 2, "send_at": "2027-03-28T13:00:00.000Z"}]
    answer = client.post(f"/v1/sms-campaigns/{campaign}/schedule", json=BODY, headers=auth)
    assert answer.status_code == 200
    assert answer.json()["data"]["local_time"]["starts_at"] == "2027-03-27T19:00:00.000Z"
    view = client.get(f"/v1/sms-campaigns/{campaign}", headers=auth).json()["data"]
    assert view["local_time"]["time"] == "09:00" and view["status"] == "QUEUED"
    stats = client.get(f"/v1/sms-campaigns/{campaign}/statistics", headers=auth).json()["data"]
    assert stats["waiting_for_local_time"] == 0  # nothing written before the first zone


def test_http_bad_missed_is_400(client: Any, auth: dict[str, str], campaign: str) -> None:
    answer = client.post(f"/v1/sms-campaigns/{campaign}/schedule",
                         json={**BODY, "local_time_missed": "tomorrow"}, headers=auth)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == \
        "local_time_missed must be one of next_day, send_now or skip, not 'tomorrow'."
    assert client.get(f"/v1/sms-campaigns/{campaign}", headers=auth).json()["data"]["status"] == "DRAFT"


def test_cli_counts_per_zone_then_schedules(cli: Any, cli_json: Any, client: Any, auth: dict[str, str],
                                            campaign: str) -> None:
    refused = cli("sms", "schedule", campaign, "--at", "2027-03-28 00:00", "--local-time", "09:00", input="n\n")
    assert refused.exit_code == 1
    assert "Europe/Paris" in refused.stderr and "America/New_York" in refused.stderr
    answer = cli_json("sms", "schedule", campaign, "--at", "2027-03-28 00:00", "--local-time", "09:00",
                      "--missed", "now", "--yes")
    assert answer == {"id": campaign, "status": "QUEUED", "scheduled_at": "2027-03-28T00:00:00.000Z",
                      "local_time": {"time": "09:00", "date": "2027-03-28", "missed": "send_now",
                                     "starts_at": "2027-03-27T19:00:00.000Z"}}
    view = cli_json("sms", "show", campaign)
    assert view == client.get(f"/v1/sms-campaigns/{campaign}", headers=auth).json()["data"]

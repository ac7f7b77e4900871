"""SMS scheduling you can undo: unschedule (before expansion), duplicate, cancel that leaves no
queued job, the scheduled time in UTC and the terminal's zone (service, HTTP and CLI)."""

from __future__ import annotations

import sqlite3
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns, ledger, recipients, schedule
from tests import factories as f

LATER = clock.format_ts(clock.utcnow().replace(microsecond=0) + timedelta(days=2))
US = ["+14155550101", "+14155550102"]


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    f.sms_contacts(conn, workspace["id"], US, first_name="Ann")
    return workspace["id"]


def _queued(conn: sqlite3.Connection, ws: int, when: str | None = LATER) -> dict[str, Any]:
    campaign = f.sms_campaign(conn, ws)
    body = {"schedule_type": "LATER", "scheduled_at": when} if when else {"schedule_type": "NOW"}
    schedule.schedule_campaign(conn, ws, campaign["id"], body)
    return campaign


def _queued_jobs(conn: sqlite3.Connection, campaign_id: str) -> int:
    return conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND json_extract(payload, '$.campaign_id') = ?",
                        (campaign_id,)).fetchone()[0]


def test_unschedule_returns_to_draft_and_frees_the_reservation(conn: sqlite3.Connection, ws: int) -> None:
    campaign = _queued(conn, ws)
    assert ledger.reserved(conn, ws) > 0 and _queued_jobs(conn, campaign["id"]) == 1
    view = campaigns.unschedule_campaign(conn, ws, campaign["id"])
    assert view["status"] == "DRAFT" and view["scheduled_at"] is None
    assert ledger.reserved(conn, ws) == Decimal(0)
    assert _queued_jobs(conn, campaign["id"]) == 0
    campaigns.update_campaign(conn, ws, campaign["id"], {"message": "Hello again, reply STOP to opt out."})
    assert schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})["status"] == "QUEUED"


def test_unschedule_refuses_once_expansion_began(conn: sqlite3.Connection, ws: int) -> None:
    campaign = _queued(conn, ws, None)
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (campaign["id"],)).fetchone()
    recipients.expand_recipients(conn, row)
    with pytest.raises(MktError) as caught:
        campaigns.unschedule_campaign(conn, ws, campaign["id"])
    assert caught.value.status == 400 and f"mkt sms cancel {campaign['id']}" in caught.value.message


@pytest.mark.parametrize("status", ["DRAFT", "COMPLETED", "CANCELLED", "ARCHIVED"])
def test_unschedule_refuses_what_is_not_queued(conn: sqlite3.Connection, ws: int, status: str) -> None:
    campaign = f.sms_campaign(conn, ws)
    conn.execute("UPDATE sms_campaigns SET status = ? WHERE id = ?", (status, campaign["id"]))
    with pytest.raises(MktError) as caught:
        campaigns.unschedule_campaign(conn, ws, campaign["id"])
    assert caught.value.message == campaigns.NOT_UNSCHEDULABLE.format(status=status)


def test_cancel_leaves_no_queued_job(conn: sqlite3.Connection, ws: int) -> None:
    campaign = _queued(conn, ws)
    campaigns.cancel_campaign(conn, ws, campaign["id"])
    assert _queued_jobs(conn, campaign["id"]) == 0


def test_duplicate_copies_message_and_audience_not_statistics(conn: sqlite3.Connection, ws: int) -> None:
    campaign = _queued(conn, ws, None)
    from marketing_cli import jobs

    jobs.run_due(conn)
    assert campaigns.get_campaign(conn, ws, campaign["id"])["statistics"]["sent"] == 2
    copy = campaigns.duplicate_campaign(conn, ws, campaign["id"])
    assert copy["id"] != campaign["id"] and copy["name"] == "Copy of Autumn sale"
    assert copy["status"] == "DRAFT" and copy["scheduled_at"] is None and copy["status_detail"] is None
    assert copy["message"] == campaign["message"] and copy["audience"] == campaign["audience"]
    assert set(copy["statistics"].values()) == {0}


def test_duplicate_keeps_the_name_within_its_limit(conn: sqlite3.Connection, ws: int) -> None:
    campaign = f.sms_campaign(conn, ws, "x" * 255)
    assert len(campaigns.duplicate_campaign(conn, ws, campaign["id"])["name"]) == 255


def test_http_unschedule_duplicate(client: Any, auth: dict[str, str], conn: sqlite3.Connection, ws: int) -> None:
    campaign = _queued(conn, ws)
    answer = client.post(f"/v1/sms-campaigns/{campaign['id']}/unschedule", headers=auth)
    assert answer.status_code == 200 and answer.json()["error"] is None
    assert answer.json()["data"]["status"] == "DRAFT"
    assert f.error_of(client.post(f"/v1/sms-campaigns/{campaign['id']}/unschedule", headers=auth)) == \
        (400, campaigns.NOT_UNSCHEDULABLE.format(status="DRAFT"))
    copy = client.post(f"/v1/sms-campaigns/{campaign['id']}/duplicate", headers=auth)
    assert copy.status_code == 201 and copy.json()["data"]["name"] == "Copy of Autumn sale"
    assert f.error_of(client.post("/v1/sms-campaigns/zz/duplicate", headers=auth)) == (400, campaigns.NOT_FOUND)
    paths = client.get("/v1/openapi.json").json()["paths"]
    assert {"/v1/sms-campaigns/{campaign_id}/unschedule", "/v1/sms-campaigns/{campaign_id}/duplicate"} <= set(paths)


def test_cli_unschedule_duplicate_and_times(cli: Any, cli_json: Any, client: Any, auth: dict[str, str],
                                            conn: sqlite3.Connection, ws: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    campaign = _queued(conn, ws)
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        local = clock.parse_ts(LATER).astimezone()
        shown = cli("sms", "show", campaign["id"]).stdout
        assert LATER in shown and f"{local:%Y-%m-%d %H:%M} JST" in shown
        listed = cli("sms", "list").stdout
        assert f"{clock.parse_ts(LATER):%Y-%m-%d %H:%M} UTC" in listed and f"{local:%Y-%m-%d %H:%M} JST" in listed
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    data = cli_json("sms", "unschedule", campaign["id"])
    assert data == client.get(f"/v1/sms-campaigns/{campaign['id']}", headers=auth).json()["data"]
    refused = cli("sms", "unschedule", campaign["id"])
    assert refused.exit_code == 1 and campaigns.NOT_UNSCHEDULABLE.format(status="DRAFT") in refused.stderr
    copy = cli_json("sms", "duplicate", campaign["id"])
    assert copy["name"] == "Copy of Autumn sale" and copy["status"] == "DRAFT"

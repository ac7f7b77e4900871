"""Per-recipient SMS message states: GET /v1/sms-campaigns/{id}/messages and `mkt sms messages`."""

from __future__ import annotations

import sqlite3
from typing import Any, Callable

import pytest

from marketing_cli import jobs
from marketing_cli.services.sms import providers as sms_providers
from marketing_cli.services.sms import schedule
from tests import factories as f

US = ["+14155550101", "+14155550102", "+14155550103"]


@pytest.fixture
def campaign(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(sms_providers, "BACKOFF_SECONDS", 0.01)
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    f.sms_contacts(conn, ws, US)
    with f.TwilioStandIn({US[2]: [(400, 21610)]}) as server:
        sms_providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                                   base_url=server.base_url)
        created = f.sms_campaign(conn, ws)
        schedule.schedule_campaign(conn, ws, created["id"], {"schedule_type": "NOW"})
        assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    return created


def test_the_api_lists_each_recipients_state(client: Any, auth: dict[str, str], campaign: dict[str, Any]) -> None:
    response = client.get(f"/v1/sms-campaigns/{campaign['id']}/messages", headers=auth)
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["pagination"]["total_count"] == 3
    by_phone = {m["phone"]: m for m in data["messages"]}
    assert by_phone[US[0]]["status"] == "sent" and by_phone[US[0]]["provider_ref"].startswith("SM")
    assert (by_phone[US[2]]["status"], by_phone[US[2]]["error_code"]) == ("failed", "21610")
    failed = client.get(f"/v1/sms-campaigns/{campaign['id']}/messages?status=FAILED&limit=1", headers=auth).json()
    assert [m["phone"] for m in failed["data"]["messages"]] == [US[2]]


def test_the_api_refuses_a_bad_status_an_unknown_campaign_and_no_key(client: Any, auth: dict[str, str],
                                                                    campaign: dict[str, Any]) -> None:
    bad = client.get(f"/v1/sms-campaigns/{campaign['id']}/messages?status=lost", headers=auth)
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == ("Invalid message status 'lost'. Valid statuses are: pending, held, sending,"
                                              " sent, delivered, undelivered, failed, suppressed.")
    unknown = client.get("/v1/sms-campaigns/" + "0" * 24 + "/messages", headers=auth)
    assert unknown.json()["error"] == {"status": 400, "message": "We could not find the campaign you are looking for."}
    assert client.get(f"/v1/sms-campaigns/{campaign['id']}/messages").status_code == 401


def test_the_cli_lists_messages(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                campaign: dict[str, Any]) -> None:
    data = cli_json("sms", "messages", campaign["id"], "--status", "sent")
    assert sorted(m["phone"] for m in data["messages"]) == US[:2]
    human = cli("sms", "messages", campaign["id"])
    assert human.exit_code == 0 and "21610" in human.stdout
    assert cli("sms", "messages", campaign["id"], "--status", "lost").exit_code == 1

"""Scheduling you can see and undo: unschedule, duplicate, cancel that leaves no queued job,
and the scheduled time in UTC and the terminal's zone (service, HTTP and CLI)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.email import campaigns, schedule
from tests import factories

LATER = clock.format_ts(clock.utcnow().replace(microsecond=0) + timedelta(days=3))


def _queued(conn: Any, ws: int) -> str:
    made = factories.sendable_campaign(conn, ws, ["a@example.com", "b@example.com"])
    schedule.schedule_campaign(conn, ws, made["id"], {"schedule_type": "LATER", "scheduled_at": LATER})
    return made["id"]


def _jobs(conn: Any, campaign_id: str) -> list[Any]:
    return conn.execute("SELECT type, status FROM jobs WHERE status = 'queued' AND dedupe_key LIKE ?",
                        (f"email.%:{campaign_id}",)).fetchall()


@pytest.fixture
def local_zone(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.delenv("TZ")
    time.tzset()


# --- service ----------------------------------------------------------------------------------

def test_unschedule_returns_to_draft_and_removes_the_queued_job(conn: Any, workspace: dict[str, Any]) -> None:
    cid = _queued(conn, workspace["id"])
    assert _jobs(conn, cid)
    assert schedule.unschedule_campaign(conn, workspace["id"], cid) == {"id": cid, "status": "DRAFT"}
    view = campaigns.get_campaign(conn, workspace["id"], cid)
    assert view["status"] == "DRAFT" and view["scheduled_at"] is None
    assert _jobs(conn, cid) == []
    schedule.schedule_campaign(conn, workspace["id"], cid, {"schedule_type": "NOW"})  # and it can go again


@pytest.mark.parametrize("status", ["DRAFT", "SENDING", "SENT", "CANCELLED"])
def test_unschedule_refuses_what_is_not_queued(conn: Any, workspace: dict[str, Any], status: str) -> None:
    cid = _queued(conn, workspace["id"])
    conn.execute("UPDATE campaigns SET status = ? WHERE id = ?", (status, cid))
    conn.commit()
    with pytest.raises(MktError) as caught:
        schedule.unschedule_campaign(conn, workspace["id"], cid)
    assert caught.value.status == 400
    assert f"this one is {status}" in caught.value.message
    if status in ("SENDING", "SENT", "CANCELLED"):
        assert "mkt campaigns" in caught.value.message  # says what to do instead


def test_cancel_leaves_no_queued_job(conn: Any, workspace: dict[str, Any]) -> None:
    cid = _queued(conn, workspace["id"])
    schedule.cancel_campaign(conn, workspace["id"], cid)
    assert _jobs(conn, cid) == []
    assert conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND payload LIKE ?",
                        (f'%{cid}%',)).fetchone()[0] == 0


def test_duplicate_copies_settings_and_content_not_statistics(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    made = factories.campaign(conn, ws, "Autumn sale", "AB_TESTING")
    sender = factories.campaign_sender(conn, ws)
    campaigns.configure_campaign(conn, ws, made["id"], {
        "sender": {"sender_identity_id": sender, "reply_to": {"display_name": "Desk", "local_part": "desk",
                                                             "domain_name": "example.com"}},
        "audience": {"type": "ENTIRE_AUDIENCE"},
        "variants": [{"type": "A", "subject": "Subject A", "preview_text": "pa"}, {"type": "B", "subject": "Subject B"}]})
    from marketing_cli.services.email import variant_html

    for kind in "AB":
        variant_html.set_variant_html(conn, ws, made["id"], kind, {"html": f"<p>Variant {kind}</p>"})
    conn.execute("UPDATE campaigns SET status = 'SENT', ab_test = ? WHERE id = ?", (json.dumps(
        {"test_percentage": 30, "winner_criterion": "CLICKS", "wait_minutes": 60, "winner": "B",
         "rates": {"A": 0.1, "B": 0.2}, "decided_at": LATER}), made["id"]))
    conn.commit()
    copy = campaigns.duplicate_campaign(conn, ws, made["id"])
    original = campaigns.get_campaign(conn, ws, made["id"])
    assert copy["id"] != made["id"] and copy["name"] == "Copy of Autumn sale"
    assert copy["status"] == "DRAFT" and copy["scheduled_at"] is None and "progress" not in copy
    assert copy["type"] == "AB_TESTING"
    for key in ("sender_identity", "reply_to", "audience"):
        assert copy[key] == original[key]
    assert copy["ab_test"] == {"test_percentage": 30, "winner_criterion": "CLICKS", "wait_minutes": 60}
    assert [(v["type"], v["subject"], v["preview_text"]) for v in copy["variants"]] == \
        [(v["type"], v["subject"], v["preview_text"]) for v in original["variants"]]
    assert not {v["id"] for v in copy["variants"]} & {v["id"] for v in original["variants"]}
    for kind in "AB":
        assert variant_html.get_variant_html(conn, ws, copy["id"], kind)["body_html"] == \
            variant_html.get_variant_html(conn, ws, made["id"], kind)["body_html"]
    assert conn.execute("SELECT COUNT(*) FROM email_messages WHERE campaign_id = ?", (copy["id"],)).fetchone()[0] == 0


def test_duplicate_of_an_unknown_campaign_is_not_found(conn: Any, workspace: dict[str, Any]) -> None:
    with pytest.raises(MktError) as caught:
        campaigns.duplicate_campaign(conn, workspace["id"], "0" * 24)
    assert caught.value.message == campaigns.NOT_FOUND


# --- HTTP ------------------------------------------------------------------------------------

def test_http_unschedule_and_duplicate(client: Any, auth: dict[str, str], conn: Any,
                                       workspace: dict[str, Any]) -> None:
    cid = _queued(conn, workspace["id"])
    answer = client.post(f"/v1/campaigns/{cid}/unschedule", headers=auth)
    assert answer.status_code == 200 and answer.json() == {"error": None, "data": {"id": cid, "status": "DRAFT"}}
    again = client.post(f"/v1/campaigns/{cid}/unschedule", headers=auth)
    assert factories.error_of(again)[0] == 400
    copy = client.post(f"/v1/campaigns/{cid}/duplicate", headers=auth)
    assert copy.status_code == 201
    assert copy.json()["data"]["name"] == "Copy of Spring sale" and copy.json()["data"]["status"] == "DRAFT"
    assert factories.error_of(client.post("/v1/campaigns/nothex/duplicate", headers=auth)) == \
        (400, campaigns.NOT_FOUND)
    paths = client.get("/v1/openapi.json").json()["paths"]
    assert "post" in paths["/v1/campaigns/{campaign_id}/unschedule"]
    assert "post" in paths["/v1/campaigns/{campaign_id}/duplicate"]


def test_http_cancel_removes_queued_jobs(client: Any, auth: dict[str, str], conn: Any,
                                         workspace: dict[str, Any]) -> None:
    cid = _queued(conn, workspace["id"])
    assert client.post(f"/v1/campaigns/{cid}/cancel", headers=auth).status_code == 200
    assert _jobs(conn, cid) == []


# --- CLI ---------------------------------------------------------------------------------------

def test_cli_unschedule_duplicate_json_equals_the_api(cli: Any, cli_json: Any, conn: Any,
                                                      workspace: dict[str, Any]) -> None:
    cid = _queued(conn, workspace["id"])
    assert cli_json("campaigns", "unschedule", cid) == {"id": cid, "status": "DRAFT"}
    refused = cli("campaigns", "unschedule", cid)
    assert refused.exit_code == 1 and "this one is DRAFT" in refused.stderr
    copy = cli_json("campaigns", "duplicate", cid)
    assert copy["name"] == "Copy of Spring sale"
    human = cli("campaigns", "duplicate", cid)
    assert human.exit_code == 0 and "Copy of Spring sale" in human.stdout


def test_cli_scheduled_time_in_utc_and_local(cli: Any, conn: Any, workspace: dict[str, Any],
                                             local_zone: None) -> None:
    cid = _queued(conn, workspace["id"])
    moment = clock.parse_ts(LATER)
    local = moment.astimezone()
    utc_text = f"{moment:%Y-%m-%d %H:%M} UTC"
    local_text = f"{local:%Y-%m-%d %H:%M} {local.tzname()}"
    assert local.tzname() in ("EST", "EDT")
    listed = cli("campaigns", "list").stdout
    assert utc_text in listed and local_text in listed
    shown = cli("campaigns", "show", cid).stdout
    assert LATER in shown and local_text in shown


def test_cli_scheduled_time_once_when_the_terminal_is_utc(cli: Any, conn: Any, workspace: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        cid = _queued(conn, workspace["id"])
        shown = cli("campaigns", "show", cid).stdout
        assert LATER in shown and "local time" not in shown
        listed = cli("campaigns", "list").stdout
        assert f"{clock.parse_ts(LATER):%Y-%m-%d %H:%M} UTC" in listed
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()

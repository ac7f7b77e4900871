"""/v1/sms-campaigns and /v1/sms/quote: shapes, envelopes and every message of the spec."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns, schedule
from tests import factories as f
from tests.conftest import error_of

STATS_KEYS = {"sent", "delivered", "clicked", "failed", "unsubscribed", "suppressed"}
MISSING = "00000000000000000000abcd"


@pytest.fixture
def ready(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    f.sms_contacts(conn, workspace["id"], ["+14155550101", "+14155550102"], first_name="Ann")
    return workspace["id"]


def create(client: Any, auth: dict[str, str], name: str = "Autumn sale") -> dict[str, Any]:
    response = client.post("/v1/sms-campaigns", json={"name": name}, headers=auth)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["error"] is None
    return body["data"]


def configured(client: Any, auth: dict[str, str], message: str = f.SMS_TEXT) -> dict[str, Any]:
    campaign = create(client, auth)
    response = client.patch(f"/v1/sms-campaigns/{campaign['id']}", headers=auth,
                            json={"message": message, "audience": [{"type": "ENTIRE_AUDIENCE"}]})
    assert response.status_code == 200, response.text
    return response.json()["data"]


def future(hours: int = 2) -> str:
    return clock.format_ts(clock.utcnow() + timedelta(hours=hours))


# --- create -----------------------------------------------------------------------------

def test_create_answers_a_draft_in_envelope_a(client: Any, auth: dict[str, str], workspace: dict[str, Any]) -> None:
    data = create(client, auth, "  Spring  ")
    assert set(data) == {"id", "workspace_id", "name", "message", "audience", "status", "status_detail", "scheduled_at",
                         "statistics", "quiet_hours", "created_at", "updated_at", "estimate"}
    assert data["status_detail"] is None
    assert data["quiet_hours"] == {"held": 0, "next_release_at": None}
    assert (data["name"], data["message"], data["audience"], data["status"]) == ("Spring", "", [], "DRAFT")
    assert data["workspace_id"] == workspace["id"] and len(data["id"]) == 24
    assert data["statistics"] == dict.fromkeys(STATS_KEYS, 0)


@pytest.mark.parametrize(("body", "message"), [
    (b"{not json", "Please provide a valid request body."),
    (b"[1]", "Please provide a valid request body."),
    (b"", "Please provide a valid request body."),
    (b'{"name": "  "}', "Please provide a name for this campaign."),
    (b"{}", "Please provide a name for this campaign."),
    (b'{"name": "' + b"x" * 256 + b'"}', "The campaign name must be 255 characters or less."),
    (b'{"name": 5}', "The member 'name' must be a string."),
])
def test_create_errors(client: Any, auth: dict[str, str], body: bytes, message: str) -> None:
    response = client.post("/v1/sms-campaigns", content=body, headers={**auth, "Content-Type": "application/json"})
    assert error_of(response) == (400, message)


def test_a_name_of_255_characters_is_accepted(client: Any, auth: dict[str, str]) -> None:
    assert create(client, auth, "x" * 255)["name"] == "x" * 255


def test_sms_endpoints_need_a_key(client: Any) -> None:
    assert error_of(client.get("/v1/sms-campaigns")) == (401, "Please provide an API key.")
    assert error_of(client.post("/v1/sms/quote", json={"message": "x"}))[0] == 401


# --- list -------------------------------------------------------------------------------

def test_list_pages_newest_first_without_workspace_id(client: Any, auth: dict[str, str]) -> None:
    ids = [create(client, auth, f"C{i}")["id"] for i in range(3)]
    body = client.get("/v1/sms-campaigns?limit=2", headers=auth).json()
    assert body["error"] is None
    data = body["data"]
    assert [c["id"] for c in data["campaigns"]] == ids[::-1][:2]
    assert "workspace_id" not in data["campaigns"][0] and data["campaigns"][0]["scheduled_at"] is None
    assert data["pagination"] == {"current_page": 1, "per_page": 2, "total_pages": 2, "total_count": 3}
    page2 = client.get("/v1/sms-campaigns?limit=2&page=2", headers=auth).json()["data"]
    assert [c["id"] for c in page2["campaigns"]] == [ids[0]]


@pytest.mark.parametrize(("query", "per_page", "page"), [
    ("", 50, 1), ("?limit=500", 100, 1), ("?limit=0", 1, 1), ("?limit=-3", 1, 1), ("?limit=abc", 50, 1),
    ("?page=0", 50, 1), ("?page=x", 50, 1), ("?page=3", 50, 3),
])
def test_list_sanitises_page_and_limit(client: Any, auth: dict[str, str], query: str, per_page: int,
                                       page: int) -> None:
    create(client, auth)
    data = client.get(f"/v1/sms-campaigns{query}", headers=auth).json()["data"]
    assert (data["pagination"]["per_page"], data["pagination"]["current_page"]) == (per_page, page)


def test_list_filters_by_status(client: Any, auth: dict[str, str], conn: sqlite3.Connection) -> None:
    a = create(client, auth, "A")
    create(client, auth, "B")
    client.post(f"/v1/sms-campaigns/{a['id']}/archive", headers=auth)
    data = client.get("/v1/sms-campaigns?status=ARCHIVED", headers=auth).json()["data"]
    assert [c["id"] for c in data["campaigns"]] == [a["id"]] and data["pagination"]["total_count"] == 1
    assert client.get("/v1/sms-campaigns?status=draft", headers=auth).json()["data"]["pagination"]["total_count"] == 1
    assert error_of(client.get("/v1/sms-campaigns?status=SENT", headers=auth)) == (400, "Invalid status 'SENT'.")


# --- get, update, archive -----------------------------------------------------------------

def test_get_one_and_its_malformed_or_missing_ids(client: Any, auth: dict[str, str]) -> None:
    c = create(client, auth)
    body = client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()
    assert body == {"error": None, "data": c}
    for bad in ("nothex", MISSING, c["id"].upper()):
        assert error_of(client.get(f"/v1/sms-campaigns/{bad}", headers=auth)) == (400, campaigns.NOT_FOUND)


def test_another_workspaces_campaign_is_not_found(client: Any, auth: dict[str, str], conn: sqlite3.Connection) -> None:
    other = f.workspace(conn, "Other")
    theirs = campaigns.create_campaign(conn, other["id"], {"name": "Theirs"})
    assert error_of(client.get(f"/v1/sms-campaigns/{theirs['id']}", headers=auth)) == (400, campaigns.NOT_FOUND)
    assert error_of(client.post(f"/v1/sms-campaigns/{theirs['id']}/schedule", json={"schedule_type": "NOW"},
                                headers=auth)) == (400, campaigns.NOT_FOUND)


def test_update_sets_name_message_and_audience(client: Any, auth: dict[str, str], ready: int,
                                               conn: sqlite3.Connection) -> None:
    tag = f.tag(conn, ready, "vip")
    c = create(client, auth)
    response = client.patch(f"/v1/sms-campaigns/{c['id']}", headers=auth, json={
        "name": "Renamed", "message": "Hi {{contact.first_name}}", "audience": [{"type": "TAGS", "include_tag_ids": [tag]}]})
    data = response.json()["data"]
    assert (data["name"], data["message"]) == ("Renamed", "Hi {{contact.first_name}}")
    assert data["audience"] == [{"type": "TAGS", "include_tag_ids": [tag], "include_segment_ids": None,
                                 "exclude_tag_ids": None, "exclude_segment_ids": None}]
    assert client.patch(f"/v1/sms-campaigns/{c['id']}", headers=auth, json={"name": "Again"}).json()["data"][
        "message"] == "Hi {{contact.first_name}}"


@pytest.mark.parametrize(("body", "message"), [
    ({"name": ""}, "Please provide a name for this campaign."),
    ({"message": 5}, "The member 'message' must be a string."),
    ({"message": "x" * 1601}, "The message must be 1600 characters or less."),
    ({"message": "Hi {{contact.nickname}}"}, "The merge tag {{contact.nickname}} is not a contact field of this workspace."),
    ({"audience": [{"type": "NOPE"}]}, "Invalid audience type. Must be 'ENTIRE_AUDIENCE', 'TAGS', or 'SEGMENTS'."),
    ({"audience": [{"type": "TAGS", "include_tag_ids": [999]}]}, "One or more tags could not be found."),
])
def test_update_errors_write_nothing(client: Any, auth: dict[str, str], body: dict[str, Any], message: str) -> None:
    c = create(client, auth)
    assert error_of(client.patch(f"/v1/sms-campaigns/{c['id']}", json=body, headers=auth)) == (400, message)
    assert client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()["data"] == c
    assert error_of(client.patch(f"/v1/sms-campaigns/{c['id']}", content=b"{", headers=auth)) == (400, campaigns.INVALID_BODY)


@pytest.mark.parametrize(("message", "expected"), [
    ("Hi {{first_name}}", "The merge tag {{first_name}} is not a merge tag of this workspace."
                          " Did you mean {{contact.first_name}}?"),
    ("Bye {{ unsubscribe_url }}", "The merge tag {{unsubscribe_url}} cannot be used in an SMS: an SMS has no"
                                  " unsubscribe, view online or preferences link (recipients reply STOP to opt out)."),
])
def test_tags_sms_cannot_send_are_refused_at_update_and_at_schedule(
        client: Any, auth: dict[str, str], ready: int, conn: sqlite3.Connection, message: str, expected: str) -> None:
    c = configured(client, auth)
    assert error_of(client.patch(f"/v1/sms-campaigns/{c['id']}", json={"message": message}, headers=auth)) == (
        400, expected)
    assert client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()["data"] == c
    conn.execute("UPDATE sms_campaigns SET message = ? WHERE id = ?", (message, c["id"]))  # stored before the check
    assert error_of(client.post(f"/v1/sms-campaigns/{c['id']}/schedule", json={"schedule_type": "NOW"},
                                headers=auth)) == (400, expected)
    assert client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()["data"]["status"] == "DRAFT"


def test_a_fallback_is_sent_and_priced_as_rendered(client: Any, auth: dict[str, str], ready: int,
                                                   conn: sqlite3.Connection) -> None:
    f.sms_contacts(conn, ready, ["+14155550103"])  # no first name
    c = configured(client, auth, "Hi {{contact.first_name|there}}, sale today. Reply STOP to opt out.")
    assert client.post(f"/v1/sms-campaigns/{c['id']}/schedule", json={"schedule_type": "NOW"},
                       headers=auth).json()["data"]["status"] == "QUEUED"
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    messages = client.get(f"/v1/sms-campaigns/{c['id']}/messages", headers=auth).json()["data"]["messages"]
    assert len(messages) == 3 and {m["price"] for m in messages} == {"0.00830"}
    assert sorted(r[0] for r in conn.execute("SELECT body FROM sms_outbox")) == [
        "Hi Ann, sale today. Reply STOP to opt out.", "Hi Ann, sale today. Reply STOP to opt out.",
        "Hi there, sale today. Reply STOP to opt out."]


def test_only_drafts_can_be_updated_and_archive_rules(client: Any, auth: dict[str, str]) -> None:
    c = create(client, auth)
    assert client.post(f"/v1/sms-campaigns/{c['id']}/archive", headers=auth).json() == {
        "error": None, "data": {"id": c["id"], "status": "ARCHIVED"}}
    assert error_of(client.patch(f"/v1/sms-campaigns/{c['id']}", json={"name": "x"}, headers=auth)) == (
        400, "Only draft campaigns can be updated.")
    assert error_of(client.post(f"/v1/sms-campaigns/{c['id']}/archive", headers=auth)) == (
        400, "Only draft, completed or cancelled campaigns can be archived.")
    assert error_of(client.post(f"/v1/sms-campaigns/{c['id']}/cancel", headers=auth)) == (
        400, "Only queued campaigns can be cancelled.")


# --- schedule -----------------------------------------------------------------------------

def test_schedule_now_and_later(client: Any, auth: dict[str, str], ready: int) -> None:
    c = configured(client, auth)
    body = client.post(f"/v1/sms-campaigns/{c['id']}/schedule", json={"schedule_type": "NOW"}, headers=auth).json()
    assert body == {"error": None, "data": {"id": c["id"], "status": "QUEUED"}}
    d = configured(client, auth)
    when = future()
    body = client.post(f"/v1/sms-campaigns/{d['id']}/schedule", json={"schedule_type": "LATER", "scheduled_at": when},
                       headers=auth).json()
    assert body["data"] == {"id": d["id"], "status": "QUEUED", "scheduled_at": when}
    assert client.get(f"/v1/sms-campaigns/{d['id']}", headers=auth).json()["data"]["scheduled_at"] == when
    assert error_of(client.post(f"/v1/sms-campaigns/{d['id']}/schedule", json={"schedule_type": "NOW"},
                                headers=auth)) == (400, "Only draft campaigns can be scheduled.")
    assert error_of(client.patch(f"/v1/sms-campaigns/{d['id']}", json={"name": "x"}, headers=auth))[1] == (
        "Only draft campaigns can be updated.")
    assert client.post(f"/v1/sms-campaigns/{d['id']}/cancel", headers=auth).json()["data"]["status"] == "CANCELLED"


def schedule_error(client: Any, auth: dict[str, str], campaign_id: str, body: Any) -> tuple[int, str]:
    if isinstance(body, bytes):
        return error_of(client.post(f"/v1/sms-campaigns/{campaign_id}/schedule", content=body, headers=auth))
    return error_of(client.post(f"/v1/sms-campaigns/{campaign_id}/schedule", json=body, headers=auth))


@pytest.mark.parametrize(("body", "message"), [
    (b"{oops", "Invalid request body."),
    (b"[]", "Invalid request body."),
    ({}, "Invalid schedule type. Must be 'NOW' or 'LATER'."),
    ({"schedule_type": "SOON"}, "Invalid schedule type. Must be 'NOW' or 'LATER'."),
    ({"schedule_type": 1}, "Invalid schedule type. Must be 'NOW' or 'LATER'."),
    ({"schedule_type": "LATER"}, "Scheduled date and time is required when schedule type is 'LATER'."),
    ({"schedule_type": "LATER", "scheduled_at": ""}, "Scheduled date and time is required when schedule type is 'LATER'."),
    ({"schedule_type": "LATER", "scheduled_at": "tomorrow"},
     "Invalid scheduled date format. Please provide a valid ISO 8601 UTC timestamp."),
    ({"schedule_type": "LATER", "scheduled_at": "2030-02-30T10:00:00Z"},
     "Invalid scheduled date format. Please provide a valid ISO 8601 UTC timestamp."),
    ({"schedule_type": "LATER", "scheduled_at": "2030-01-01T10:00:00"},
     "Invalid scheduled date format. Please provide a valid ISO 8601 UTC timestamp."),
    ({"schedule_type": "LATER", "scheduled_at": "2020-01-01T10:00:00Z"}, "Scheduled date must be in the future."),
    ({"schedule_type": "LATER", "scheduled_at": "9999-12-31T23:59:59-05:00"}, "Please enter a valid date and time."),
])
def test_schedule_request_errors(client: Any, auth: dict[str, str], ready: int, body: Any, message: str) -> None:
    c = configured(client, auth)
    assert schedule_error(client, auth, c["id"], body) == (400, message)
    assert client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()["data"]["status"] == "DRAFT"


def test_schedule_id_errors(client: Any, auth: dict[str, str], ready: int) -> None:
    now = {"schedule_type": "NOW"}
    assert schedule_error(client, auth, "", now) == (400, "Please provide a campaign ID.")
    assert schedule_error(client, auth, "%20", now) == (400, "Please provide a campaign ID.")
    assert schedule_error(client, auth, "xyz", now) == (400, campaigns.NOT_FOUND)
    assert schedule_error(client, auth, MISSING, now) == (400, campaigns.NOT_FOUND)


def test_schedule_readiness_errors_one_defect_at_a_time(client: Any, auth: dict[str, str], conn: sqlite3.Connection,
                                                        workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws, balance=None, sender=None)
    f.sms_contacts(conn, ws, ["+14155550101"], first_name="Ann")
    now = {"schedule_type": "NOW"}
    c = create(client, auth)
    conn.execute("UPDATE sms_campaigns SET name = ' ' WHERE id = ?", (c["id"],))
    assert schedule_error(client, auth, c["id"], now) == (400, "Please provide a name for this campaign before scheduling.")
    conn.execute("UPDATE sms_campaigns SET name = 'Sale' WHERE id = ?", (c["id"],))
    assert schedule_error(client, auth, c["id"], now) == (400, "Please provide a message for this campaign before scheduling.")
    client.patch(f"/v1/sms-campaigns/{c['id']}", json={"message": f.SMS_TEXT}, headers=auth)
    assert schedule_error(client, auth, c["id"], now) == (400, "Please configure an audience for this campaign before scheduling.")
    client.patch(f"/v1/sms-campaigns/{c['id']}", json={"audience": [{"type": "ENTIRE_AUDIENCE"}]}, headers=auth)
    assert schedule_error(client, auth, c["id"], now) == (
        400, "Please add an SMS sender ID under SMS Marketing before scheduling this campaign.")
    f.sms_ready(conn, ws, balance="4.5")
    assert schedule_error(client, auth, c["id"], now) == (
        400, "Your available SMS balance is $4.50, but at least $5.00 is required to start a campaign. "
             "Please visit Billing to top up your SMS balance.")
    low = client.post(f"/v1/sms-campaigns/{c['id']}/schedule", json=now, headers=auth)
    assert "mkt sms balance add" in low.headers["x-error-detail"]  # there is no billing page to visit
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "4.25")
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "oops")
    assert schedule_error(client, auth, c["id"], now) == (400, "We could not check your SMS balance. Please try again later.")
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "0.001")
    conn.execute("UPDATE sms_rates SET price = '100.00000' WHERE country_code = 'US'")
    assert schedule_error(client, auth, c["id"], now) == (
        400, "Your available SMS balance is $4.50, but this campaign is estimated to cost $100.00 (1 recipient). "
             "Add to the balance with `mkt sms balance add AMOUNT`.")
    conn.execute("UPDATE sms_rates SET price = '0.00830' WHERE country_code = 'US'")
    client.patch(f"/v1/sms-campaigns/{c['id']}", json={"message": "FREE CASH FOR EVERYONE TODAY!!! bit.ly/x"}, headers=auth)
    assert schedule_error(client, auth, c["id"], now) == (
        400, "This campaign was flagged by automated review. Please contact support if you believe this is a mistake.")
    client.patch(f"/v1/sms-campaigns/{c['id']}", json={"message": f.SMS_TEXT}, headers=auth)

    def broken_review(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("classifier unavailable")

    monkeypatch.setattr(schedule, "review_campaign", broken_review)
    assert schedule_error(client, auth, c["id"], now) == (
        400, "We couldn't complete the automated review of this campaign. Please try again in a few minutes.")
    monkeypatch.undo()
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "0.001")

    def broken_enqueue(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(schedule.jobs, "enqueue", broken_enqueue)
    assert schedule_error(client, auth, c["id"], now) == (400, "Failed to queue SMS campaign for processing.")
    assert client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()["data"]["status"] == "DRAFT"
    monkeypatch.undo()
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "0.001")
    assert client.post(f"/v1/sms-campaigns/{c['id']}/schedule", json=now, headers=auth).json()["data"]["status"] == "QUEUED"


# --- statistics and quote -------------------------------------------------------------------

def test_statistics_in_envelope_a(client: Any, auth: dict[str, str], ready: int, conn: sqlite3.Connection) -> None:
    from marketing_cli import jobs

    c = configured(client, auth)
    client.post(f"/v1/sms-campaigns/{c['id']}/schedule", json={"schedule_type": "NOW"}, headers=auth)
    jobs.run_due(conn)
    body = client.get(f"/v1/sms-campaigns/{c['id']}/statistics", headers=auth).json()
    assert body["error"] is None
    assert body["data"] == {"aggregate": {**dict.fromkeys(STATS_KEYS, 0), "sent": 2}, "clicks_by_country": [],
                            "clicks_by_device_type": [], "clicks_by_os": [], "link_activity": [],
                            "total_cost": "0.0166", "quiet_hours": {"held": 0, "next_release_at": None},
                            "estimate": {"recipients": 0, "cost": "0.00", "groups": []}}  # nothing more to come
    assert client.get(f"/v1/sms-campaigns/{c['id']}", headers=auth).json()["data"]["status"] == "COMPLETED"
    assert error_of(client.get("/v1/sms-campaigns//statistics", headers=auth)) == (400, "Please provide a campaign ID.")
    assert error_of(client.get("/v1/sms-campaigns/zz/statistics", headers=auth)) == (400, campaigns.NOT_FOUND)
    assert error_of(client.get(f"/v1/sms-campaigns/{MISSING}/statistics", headers=auth)) == (400, campaigns.NOT_FOUND)


def test_quote(client: Any, auth: dict[str, str]) -> None:
    body = client.post("/v1/sms/quote", json={"message": "ça va? " + "x" * 70, "to": "+14155550100"}, headers=auth).json()
    assert body["error"] is None
    q = body["data"]
    assert (q["encoding"], q["segments"], q["ucs2_characters"], q["country"], q["price"]) == (
        "UCS-2", 2, ["ç"], "US", "0.01660")
    assert error_of(client.post("/v1/sms/quote", json={"message": ""}, headers=auth)) == (
        400, "Please provide a message to quote.")
    assert error_of(client.post("/v1/sms/quote", content=b"nope", headers=auth)) == (400, campaigns.INVALID_BODY)

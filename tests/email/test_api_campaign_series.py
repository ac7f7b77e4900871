"""Recurring and feed campaigns through the HTTP face (an extension, docs/api.md): make a
campaign recur, preview, list, show, pause, resume, stop; errors in the contract's body; a
weekly series sent through a real SMTP server by the job runner on a fixed clock."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.kernel import clock
from tests import factories
from tests.smtp_server import SmtpServer

WEEKLY = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> factories.FixedClock:
    fake = factories.FixedClock(datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc))
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


@pytest.fixture
def ready(conn: sqlite3.Connection, workspace: dict[str, Any], fixed: factories.FixedClock) -> dict[str, Any]:
    return factories.sendable_campaign(conn, workspace["id"], ["ann@example.org", "bob@example.org"])


def _error(response: Any) -> tuple[int, str]:
    body = response.json()
    assert body["data"] is None and set(body) == {"data", "error"}
    return body["error"]["status"], body["error"]["message"]


def test_make_recur_show_list_pause_resume_stop(client: Any, auth: dict, ready: dict) -> None:
    made = client.post(f"/v1/campaigns/{ready['id']}/series", headers=auth, json={"rrule": WEEKLY})
    assert made.status_code == 201, made.text
    data = made.json()["data"]
    assert made.json()["error"] is None
    assert (data["campaign_id"], data["status"], data["timezone"]) == (ready["id"], "ACTIVE", "UTC")
    assert data["next_occurrence"] == {"at": "2026-11-30T09:00:00.000Z", "local": "2026-11-30T09:00:00+00:00"}
    sid = data["id"]

    shown = client.get(f"/v1/campaign-series/{sid}", headers=auth).json()["data"]
    assert shown == data
    listed = client.get("/v1/campaign-series", headers=auth).json()["data"]
    assert [s["id"] for s in listed["series"]] == [sid] and "occurrences" not in listed["series"][0]
    assert client.get("/v1/campaign-series?status=paused", headers=auth).json()["data"] == {"series": []}

    paused = client.post(f"/v1/campaign-series/{sid}/pause", headers=auth)
    assert paused.status_code == 200 and paused.json()["data"]["status"] == "PAUSED"
    assert _error(client.post(f"/v1/campaign-series/{sid}/pause", headers=auth)) == (
        400, "Only active series can be paused.")
    assert client.post(f"/v1/campaign-series/{sid}/resume", headers=auth).json()["data"]["status"] == "ACTIVE"
    stopped = client.post(f"/v1/campaign-series/{sid}/stop", headers=auth).json()["data"]
    assert stopped["status"] == "STOPPED" and stopped["next_occurrence"] is None
    assert _error(client.post(f"/v1/campaign-series/{sid}/resume", headers=auth)) == (
        400, "This series has already ended (STOPPED).")


def test_preview(client: Any, auth: dict, ready: dict) -> None:
    answer = client.post(f"/v1/campaigns/{ready['id']}/series/preview", headers=auth,
                         json={"rrule": "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=9", "count": 3})
    assert answer.status_code == 200
    assert answer.json()["data"] == {
        "rrule": "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=9;BYMINUTE=0;BYSECOND=0", "timezone": "UTC",
        "occurrences": [{"at": "2026-11-30T09:00:00.000Z", "local": "2026-11-30T09:00:00+00:00"},
                        {"at": "2026-12-31T09:00:00.000Z", "local": "2026-12-31T09:00:00+00:00"},
                        {"at": "2027-01-31T09:00:00.000Z", "local": "2027-01-31T09:00:00+00:00"}]}
    assert _error(client.post(f"/v1/campaigns/{ready['id']}/series/preview", headers=auth,
                              json={"rrule": WEEKLY, "count": 0})) == (
        400, "The preview count must be an integer from 1 to 100.")


@pytest.mark.parametrize(("path", "body", "expected"), [
    ("/v1/campaigns/{cid}/series", {"rrule": "FREQ=SOMETIMES"},
     (400, "Invalid recurrence rule: invalid 'FREQ': SOMETIMES. Write an RFC 5545 RRULE such as "
           "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9.")),
    ("/v1/campaigns/{cid}/series", {"rrule": "FREQ=DAILY;UNTIL=20270101T000000"},
     (400, "UNTIL must be a UTC time ending in Z (for example UNTIL=20261231T235959Z).")),
    ("/v1/campaigns/{cid}/series", {"rrule": ["FREQ=DAILY"]}, (400, "The member 'rrule' must be a string.")),
    ("/v1/campaigns/{cid}/series", {"rrule": WEEKLY, "feed": "x"},
     (400, "Unknown member 'feed'")),
    ("/v1/campaigns/{cid}/series", "not json", (400, "Invalid request body.")),
    ("/v1/campaigns/0123456789abcdef01234567/series", {"rrule": WEEKLY},
     (400, "We could not find the campaign you are looking for.")),
])
def test_errors_have_the_contract_body_and_write_nothing(client: Any, auth: dict, ready: dict, conn: sqlite3.Connection,
                                                        path: str, body: Any, expected: tuple[int, str]) -> None:
    url = path.format(cid=ready["id"])
    answer = client.post(url, headers=auth, content=body) if isinstance(body, str) else \
        client.post(url, headers=auth, json=body)
    assert _error(answer) == expected
    assert conn.execute("SELECT count(*) FROM campaign_series").fetchone()[0] == 0


def test_unknown_series_and_other_workspaces(client: Any, auth: dict, conn: sqlite3.Connection, ready: dict) -> None:
    from marketing_cli.services.account import workspaces

    assert _error(client.get("/v1/campaign-series/42", headers=auth)) == (
        404, "We could not find the series you are looking for.")
    assert _error(client.get("/v1/campaign-series/abc", headers=auth)) == (
        404, "We could not find the series you are looking for.")
    assert _error(client.get("/v1/campaign-series?status=DONE", headers=auth)) == (
        400, "Invalid status 'DONE'. Use ACTIVE, PAUSED, STOPPED or FINISHED.")
    sid = client.post(f"/v1/campaigns/{ready['id']}/series", headers=auth, json={"rrule": WEEKLY}).json()["data"]["id"]
    other = workspaces.create_workspace(conn, "Other")["api_key"]
    other_auth = {"Authorization": f"Bearer {other}"}
    assert client.get(f"/v1/campaign-series/{sid}", headers=other_auth).status_code == 404
    assert client.post(f"/v1/campaign-series/{sid}/stop", headers=other_auth).status_code == 404
    assert client.get("/v1/campaign-series", headers=other_auth).json()["data"] == {"series": []}
    assert client.get("/v1/campaign-series").status_code == 401


def test_a_weekly_series_sends_through_smtp_once_a_week_and_once_after_an_outage(
        client: Any, auth: dict, ready: dict, conn: sqlite3.Connection, fixed: factories.FixedClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sid = client.post(f"/v1/campaigns/{ready['id']}/series", headers=auth, json={"rrule": WEEKLY}).json()["data"]["id"]
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        fixed.set(datetime(2026, 11, 30, 9, 0, 3, tzinfo=timezone.utc))
        jobs.run_due(conn)
        assert sorted(m.rcpt_tos[0] for m in server.messages) == ["ann@example.org", "bob@example.org"]
        fixed.set(datetime(2026, 12, 28, 10, 0, tzinfo=timezone.utc))  # the runner was down 4 Mondays
        jobs.run_due(conn)
        jobs.run_due(conn)
        assert len(server.messages) == 4
    shown = client.get(f"/v1/campaign-series/{sid}", headers=auth).json()["data"]
    assert shown["counts"] == {"SENT": 2, "MISSED": 3, "SKIPPED": 0, "FAILED": 0}
    copy = shown["occurrences"][0]["campaign_id"]
    stats = client.get(f"/v1/campaigns/{copy}/statistics", headers=auth).json()["data"]
    assert stats["aggregate"]["delivered"] == 2  # each copy has its own statistics

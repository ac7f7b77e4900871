"""services/estimates below the faces: the caps (allowances, a warm-up's hook), the ETA, and
the estimates a list keeps per campaign and state."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.estimates import caps, views
from marketing_cli.services.estimates.groups import Part, estimate, eta_seconds, next_release
from tests import factories as f

NOW = datetime(2027, 3, 27, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "utcnow", lambda: NOW)


def test_the_monthly_allowance_moves_the_latest_recipients_over_the_cap(
        conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    campaign = f.sendable_campaign(conn, ws, ["a@example.com", "b@example.com", "c@example.com"])["id"]
    billing.set_allowance(conn, ws, "monthly_emails", 2)
    est = views.email_campaign(conn, ws, campaign)["estimate"]
    assert est == {"recipients": 3, "cost": None, "groups": [
        {"state": "now", "recipients": 2, "until": None, "reason": None, "cost": None},
        {"state": "over_cap", "recipients": 1, "until": "2027-04-01T00:00:00.000Z",
         "reason": "the monthly_emails allowance: 2 left this month", "cost": None}]}


def test_a_warm_up_cap_plugs_in_through_register(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign = f.sendable_campaign(conn, ws, ["a@example.com", "b@example.com"])["id"]
    tomorrow = NOW.replace(hour=0) + timedelta(days=1)
    monkeypatch.setattr(caps, "SOURCES", list(caps.SOURCES))

    @caps.register
    def warm_up(conn: Any, workspace_id: int, channel: str) -> list[caps.Cap]:
        return [caps.Cap("warm-up:gmail", 1, tomorrow, tomorrow, "warm-up: gmail.com lane, 1 a day")]

    groups = views.email_campaign(conn, ws, campaign)["estimate"]["groups"]
    assert [(g["state"], g["recipients"], g["reason"]) for g in groups] == [
        ("now", 1, None), ("over_cap", 1, "warm-up: gmail.com lane, 1 a day")]


def test_the_eta_counts_the_waiting_and_held_groups() -> None:
    later = NOW + timedelta(hours=2)
    est = estimate([Part("now", 100), Part("waiting", 50, later, "09:00 local time in Europe/Paris"),
                    Part("held", 10, later + timedelta(hours=1), "quiet hours"), Part("skipped", 5, reason="x")])
    assert est["recipients"] == 160
    assert eta_seconds(est, 10.0, NOW) == 3 * 3600 + 1  # the held group goes last: 10 messages at 10/s
    assert eta_seconds(est, 0.0, NOW) == 3 * 3600       # no rate yet: the last group's instant
    assert next_release(est, NOW)["recipients"] == 50


def test_a_list_reads_the_kept_estimate_until_the_state_changes(
        conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    f.sms_contacts(conn, ws, ["+12125550100", "+12125550101"])
    campaign = f.sms_campaign(conn, ws)["id"]
    first = views.sms_campaigns(conn, ws)["campaigns"][0]["estimate"]
    assert first["recipients"] == 2
    kept = json.loads(conn.execute("SELECT estimate_cache FROM sms_campaigns WHERE id = ?", (campaign,)).fetchone()[0])
    conn.execute("UPDATE sms_campaigns SET estimate_cache = ? WHERE id = ?",  # the list reads what was kept
                 (json.dumps({**kept, "parts": [["now", 7, None, None, 0]]}), campaign))
    assert views.sms_campaigns(conn, ws)["campaigns"][0]["estimate"]["recipients"] == 7
    f.sms_contacts(conn, ws, ["+12125550102"])  # the contacts changed: computed again
    assert views.sms_campaigns(conn, ws)["campaigns"][0]["estimate"]["recipients"] == 3
    assert views.sms_campaign(conn, ws, campaign)["estimate"]["recipients"] == 3  # one campaign: always afresh

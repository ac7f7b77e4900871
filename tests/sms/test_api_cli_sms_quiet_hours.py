"""SMS quiet hours on both faces, on a fixed clock: held messages, their reason and the campaign's
count over HTTP (checked against the OpenAPI document) and in the CLI (whose --json is the API's
data); the operator's switch and table exist only in the CLI."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.sms import quiet_hours
from tests import factories as f

FLORIDA, SYDNEY = "+13055550100", "+61291234567"  # Sydney: open when Miami is closed
HELD_UNTIL = "2026-12-02T13:00:00.000Z"
REASON = "quiet hours: US-FL 08:00-20:00 America/New_York"


@pytest.fixture(autouse=True)
def _night_in_miami(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(quiet_hours.TABLE_ENV, raising=False)  # the built-in table
    night = datetime(2026, 12, 2, 1, 30, tzinfo=UTC)  # Tuesday 20:30 in Miami
    monkeypatch.setattr(clock, "utcnow", lambda: night)


@pytest.fixture
def held(conn: sqlite3.Connection, workspace: dict[str, Any]) -> str:
    """A campaign to Miami and Sydney, sent at 20:30 Miami time: Miami held, Sydney sent."""
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    f.sms_contacts(conn, ws, [FLORIDA, SYDNEY])
    campaign = f.sms_campaign(conn, ws, message="Our autumn sale starts today. Reply STOP to opt out.")
    from marketing_cli.services.sms import schedule

    schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    return campaign["id"]


def validator(client: Any, path: str) -> Draft202012Validator:
    document = client.get("/v1/openapi.json").json()
    schema = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return Draft202012Validator({**schema, "components": document["components"]})


def test_the_api_lists_held_messages_with_until_and_why(client: Any, auth: dict[str, str], held: str) -> None:
    response = client.get(f"/v1/sms-campaigns/{held}/messages?status=held", headers=auth)
    assert response.status_code == 200
    validator(client, "/v1/sms-campaigns/{campaign_id}/messages").validate(response.json())
    [m] = response.json()["data"]["messages"]
    assert (m["phone"], m["status"], m["held_until"], m["held_reason"]) == (FLORIDA, "held", HELD_UNTIL, REASON)
    every = client.get(f"/v1/sms-campaigns/{held}/messages", headers=auth).json()["data"]["messages"]
    assert {x["phone"]: x["status"] for x in every} == {FLORIDA: "held", SYDNEY: "sent"}


def test_the_api_shows_how_many_are_held(client: Any, auth: dict[str, str], held: str) -> None:
    expected = {"held": 1, "next_release_at": HELD_UNTIL}
    campaign = client.get(f"/v1/sms-campaigns/{held}", headers=auth).json()["data"]
    assert campaign["status"] == "QUEUED" and campaign["quiet_hours"] == expected
    assert set(campaign["statistics"]) == {"sent", "delivered", "clicked", "failed", "unsubscribed", "suppressed"}
    statistics = client.get(f"/v1/sms-campaigns/{held}/statistics", headers=auth)
    validator(client, "/v1/sms-campaigns/{campaign_id}/statistics").validate(statistics.json())
    assert statistics.json()["data"]["quiet_hours"] == expected
    assert statistics.json()["data"]["aggregate"]["sent"] == 1
    listed = client.get("/v1/sms-campaigns", headers=auth).json()["data"]["campaigns"]
    assert [c["quiet_hours"] for c in listed] == [expected]


def test_no_api_key_can_turn_quiet_hours_off(client: Any, auth: dict[str, str], conn: sqlite3.Connection,
                                             workspace: dict[str, Any]) -> None:
    response = client.patch("/v1/workspace", json={"name": "Test workspace", "conversion_tracking": False,
                                                          "sms_quiet_hours": False},
                            headers=auth)
    assert (response.status_code, response.json()["error"]["message"]) == (400, "Unknown member 'sms_quiet_hours'")
    from marketing_cli.services.sms import gate

    assert gate.enabled(conn, workspace["id"])
    assert not any("quiet" in path for path in client.get("/v1/openapi.json").json()["paths"])


def test_cli_messages_json_is_the_api_data(cli_json: Callable[..., Any], cli: Callable[..., Any], client: Any,
                                          auth: dict[str, str], held: str) -> None:
    api = client.get(f"/v1/sms-campaigns/{held}/messages?status=held", headers=auth).json()["data"]
    assert cli_json("sms", "messages", held, "--status", "held") == api
    shown = cli("sms", "messages", held)
    assert shown.exit_code == 0 and "held" in shown.stdout and "US-FL 08:00-20:00" in shown.stdout
    assert cli_json("sms", "show", held)["quiet_hours"] == {"held": 1, "next_release_at": HELD_UNTIL}
    assert cli_json("sms", "stats", held)["quiet_hours"]["held"] == 1


def test_cli_show_lists_the_rules_and_the_switch(cli_json: Callable[..., Any], cli: Callable[..., Any],
                                                workspace: dict[str, Any]) -> None:
    shown = cli_json("sms", "quiet-hours", "show")
    assert shown["enabled"] is True and shown["off_since"] is None and shown["table"] == "built-in"
    assert {"region": "US-CT", "days": "Mon-Sun", "hours": "09:00-20:00"}.items() <= next(
        r for r in shown["rules"] if r["region"] == "US-CT").items()
    text = cli("sms", "quiet-hours", "show", "--csv")
    assert text.exit_code == 0 and text.stdout.startswith("# SMS quiet hours") and "US-TX,Sun,12:00-21:00" in text.stdout
    human = cli("sms", "quiet-hours", "show")
    assert human.exit_code == 0 and "SMS quiet hours: on" in human.stdout and "47 CFR 64.1200(c)(1)" in human.stdout


def test_cli_off_needs_the_flag_and_is_logged(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                             conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    refused = cli("sms", "quiet-hours", "off")
    assert refused.exit_code == 1 and "--override-quiet-hours" in refused.stderr
    assert cli_json("sms", "quiet-hours", "show")["enabled"] is True
    done = cli("sms", "quiet-hours", "off", "--override-quiet-hours", "--json")
    assert done.exit_code == 0
    assert json.loads(done.stdout)["enabled"] is False
    assert "SMS quiet hours are OFF" in done.stderr
    logged = conn.execute("SELECT action, actor, detail FROM operator_log WHERE workspace_id = ?",
                          (workspace["id"],)).fetchall()
    assert [r[0] for r in logged] == ["sms.quiet_hours.off"] and logged[0][1]
    shown = cli("sms", "quiet-hours", "show")
    assert "SMS quiet hours: OFF since" in shown.stdout and "turned OFF with --override-quiet-hours" in shown.stdout
    back = cli_json("sms", "quiet-hours", "on")
    assert back["enabled"] is True
    assert [c["action"] for c in back["changes"]] == ["sms.quiet_hours.on", "sms.quiet_hours.off"]


def test_cli_check_reads_an_operators_table(cli: Callable[..., Any], tmp_path: Path) -> None:
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("region,days,hours,source\nUS,Mon-Fri,09:00-18:00,counsel\nUS-FL,Sat,closed,\n", encoding="utf-8")
    bad.write_text("region,days,hours\nUS,Mon,25:00-26:00\n", encoding="utf-8")
    checked = cli("sms", "quiet-hours", "check", str(good), "--json")
    assert checked.exit_code == 0 and json.loads(checked.stdout) == {"rules": 2, "regions": ["US", "US-FL"]}
    refused = cli("sms", "quiet-hours", "check", str(bad))
    assert refused.exit_code == 1 and "line 2" in refused.stderr


def test_jobs_run_refuses_to_start_on_an_unreadable_table(cli: Callable[..., Any], workspace: dict[str, Any],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken.csv"
    broken.write_text("region,days,hours\nUS,Mon,9-5\n", encoding="utf-8")
    monkeypatch.setenv(quiet_hours.TABLE_ENV, str(broken))
    result = cli("jobs", "run")
    assert result.exit_code == 1 and f"{broken} line 2" in result.stderr
    monkeypatch.setenv(quiet_hours.TABLE_ENV, str(tmp_path / "missing.csv"))
    result = cli("jobs", "run")
    assert result.exit_code == 1 and "MKT_SMS_QUIET_HOURS" in result.stderr

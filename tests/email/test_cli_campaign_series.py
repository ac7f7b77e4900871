"""`mkt campaigns schedule --every / --feed / --preview` and `mkt campaigns series ...`: the CLI
twin of the recurring-campaign endpoints (--json prints exactly the API's data)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli.kernel import clock
from tests import factories

WEEKLY = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> factories.FixedClock:
    fake = factories.FixedClock(datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc))
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


@pytest.fixture
def ready(conn: sqlite3.Connection, workspace: dict[str, Any], fixed: factories.FixedClock) -> dict[str, Any]:
    return factories.sendable_campaign(conn, workspace["id"], ["ann@example.org", "bob@example.org"])


def test_every_makes_a_series_and_json_is_the_api_data(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                                       client: Any, auth: dict, ready: dict) -> None:
    made = cli_json("campaigns", "schedule", ready["id"], "--every", WEEKLY)
    assert made["status"] == "ACTIVE" and made["next_occurrence"]["at"] == "2026-11-30T09:00:00.000Z"
    sid = str(made["id"])
    assert cli_json("campaigns", "series", "show", sid) == client.get(f"/v1/campaign-series/{sid}",
                                                                      headers=auth).json()["data"]
    assert cli_json("campaigns", "series", "list") == client.get("/v1/campaign-series", headers=auth).json()["data"]
    human = cli("campaigns", "series", "show", sid)
    assert human.exit_code == 0 and "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9" in human.stdout
    assert "2026-12-07T09:00:00.000Z" in human.stdout  # the next occurrences
    assert cli_json("campaigns", "series", "pause", sid)["status"] == "PAUSED"
    assert cli_json("campaigns", "series", "resume", sid)["status"] == "ACTIVE"
    assert cli("campaigns", "series", "stop", sid).stdout.strip() == f"Series {sid} stopped."
    refused = cli("campaigns", "series", "stop", sid)
    assert refused.exit_code == 1 and refused.stderr.strip() == "This series has already ended (STOPPED)."


def test_preview_lists_utc_and_local_and_changes_nothing(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                                         client: Any, auth: dict, ready: dict,
                                                         conn: sqlite3.Connection) -> None:
    shown = cli_json("campaigns", "schedule", ready["id"], "--every", WEEKLY, "--preview", "10")
    assert len(shown["occurrences"]) == 10 and shown["occurrences"][9]["at"] == "2027-02-01T09:00:00.000Z"
    assert shown == client.post(f"/v1/campaigns/{ready['id']}/series/preview", headers=auth,
                                json={"rrule": WEEKLY, "count": 10}).json()["data"]
    human = cli("campaigns", "schedule", ready["id"], "--every", WEEKLY, "--preview", "2")
    assert "2026-11-30T09:00:00+00:00" in human.stdout and "local (UTC)" in human.stdout
    assert conn.execute("SELECT count(*) FROM campaign_series").fetchone()[0] == 0


def test_the_series_list_shows_a_skipped_feed_occurrence(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                                         ready: dict, conn: sqlite3.Connection,
                                                         workspace: dict, fixed: factories.FixedClock,
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from marketing_cli.services.email import variant_html

    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")
    variant_html.set_variant_html(conn, workspace["id"], ready["id"], "A", {"html": (
        "{{#feed.items}}<p>{{item.title}}</p>{{/feed.items}}<a href=\"{{unsubscribe_url}}\">Unsubscribe</a>")})
    pages = {"/rss": (200, {}, factories.rss([("p1", "Old", "Mon, 23 Nov 2026 10:00:00 GMT")]))}
    with factories.PageServer(pages) as server:
        made = cli_json("campaigns", "schedule", ready["id"], "--every", WEEKLY, "--feed", server.url("/rss"))
        fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
        ran = cli_json("jobs", "run")  # the cron face of the runner
        assert ran["failed"] == 0 and ran["processed"] >= 1
    listed = cli("campaigns", "series", "list", "--wide")
    assert listed.exit_code == 0
    assert "SKIPPED: The feed has no item newer than the last send: nothing was sent." in listed.stdout
    assert cli_json("campaigns", "series", "list")["series"][0]["counts"]["SKIPPED"] == 1
    assert made["feed_url"] == server.url("/rss")


@pytest.mark.parametrize(("args", "message"), [
    (("--now", "--every", WEEKLY),
     "Give exactly one of --now or --at TIME (or --every RRULE for a recurring campaign)."),
    (("--now", "--preview", "3"), "--feed and --preview go with --every RRULE."),
    (("--every", WEEKLY, "--test-percentage", "10"),
     "The A/B options go with --now or --at: the copies of a series use the default test."),
])
def test_usage_errors(cli: Callable[..., Any], ready: dict, args: tuple[str, ...], message: str) -> None:
    result = cli("campaigns", "schedule", ready["id"], *args)
    assert result.exit_code == 2 and result.stderr.strip() == message


def test_an_invalid_rule_is_the_api_message_and_exit_1(cli: Callable[..., Any], ready: dict,
                                                       conn: sqlite3.Connection) -> None:
    result = cli("campaigns", "schedule", ready["id"], "--every", "FREQ=WEEKLY;BYDAY=FUNDAY")
    assert result.exit_code == 1 and result.stderr.startswith("Invalid recurrence rule: ")
    assert conn.execute("SELECT count(*) FROM campaign_series").fetchone()[0] == 0
    assert json.loads(cli("campaigns", "series", "list", "--json").stdout) == {"series": []}

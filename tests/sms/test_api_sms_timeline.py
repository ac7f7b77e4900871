"""GET /v1/sms-campaigns/:id/timeline and /report over HTTP, and the CLI's twins."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from marketing_cli.services.sms.timeline import campaign_timeline
from tests import factories
from tests.factories import error_of


def test_the_timeline_reads_the_same_through_both_faces(client: Any, auth: dict, conn: sqlite3.Connection,
                                                       workspace: dict, cli_json: Any) -> None:
    cid = factories.sms_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    r = client.get(f"/v1/sms-campaigns/{cid}/timeline", headers=auth)
    assert r.status_code == 200 and r.json()["error"] is None
    data = r.json()["data"]
    assert data == cli_json("sms", "timeline", cid) == campaign_timeline(conn, workspace["id"], cid)
    assert data["totals"]["cost"] == cli_json("sms", "stats", cid)["total_cost"]
    assert data["hours"][2] == {"start": data["hours"][2]["start"], "sent": 0, "delivered": 0, "failed": 0,
                                "unique_clicks": 2, "total_clicks": 3, "unsubscribed": 0, "cost": "0.00"}


def test_errors(client: Any, auth: dict) -> None:
    for path in ("timeline", "report"):
        assert error_of(client.get(f"/v1/sms-campaigns//{path}", headers=auth)) == (
            400, "Please provide a campaign ID.")
        assert error_of(client.get(f"/v1/sms-campaigns/nope/{path}", headers=auth)) == (
            400, "We could not find the campaign you are looking for.")


def test_the_report_through_both_faces(client: Any, auth: dict, conn: sqlite3.Connection, workspace: dict,
                                       cli: Any, tmp_path: Path) -> None:
    cid = factories.sms_timeline_world(conn, workspace["id"], factories.timeline_start(100), name="<script>x")
    r = client.get(f"/v1/sms-campaigns/{cid}/report", headers=auth)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "&lt;script&gt;x" in r.text and "<script" not in r.text
    out = tmp_path / "report.html"
    result = cli("sms", "report", cid, "--html", str(out))
    assert result.exit_code == 0, result.output
    assert str(out) in result.stdout
    page = out.read_text(encoding="utf-8")
    assert "Recipients by country" in page and "STOP replies" in page and "&lt;script&gt;x" in page


def test_the_stats_command_shows_the_hours_and_json_stays_the_statistics(
        cli: Any, cli_json: Any, client: Any, auth: dict, conn: sqlite3.Connection, workspace: dict) -> None:
    cid = factories.sms_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    assert cli_json("sms", "stats", cid) == client.get(f"/v1/sms-campaigns/{cid}/statistics", headers=auth).json()["data"]
    out = cli("sms", "stats", cid).stdout  # not a terminal: the chart's plain lines
    hours = campaign_timeline(conn, workspace["id"], cid)["hours"]
    assert "Deliveries and clicks per hour" in out and "total cost" in out
    assert f"{hours[0]['start']}  deliv. 2  clicks 0" in out and f"{hours[2]['start']}  deliv. 0  clicks 3" in out

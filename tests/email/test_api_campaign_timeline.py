"""GET /v1/campaigns/:id/timeline and /report over HTTP, and the CLI's `--json` twin."""

from __future__ import annotations

from typing import Any

from marketing_cli.services.email.timeline import get_campaign_timeline
from tests import factories
from tests.factories import error_of


def test_the_timeline_reads_the_same_through_both_faces(client: Any, auth: dict, conn: Any, workspace: dict,
                                                       cli_json: Any) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    r = client.get(f"/v1/campaigns/{world['id']}/timeline", headers=auth)
    assert r.status_code == 200 and r.json()["error"] is None
    data = r.json()["data"]
    assert data == cli_json("campaigns", "timeline", world["id"])
    assert data == get_campaign_timeline(conn, workspace["id"], world["id"])
    assert len(data["hours"]) == 72 and data["hours"][2]["total_clicks"] == 2
    assert all(b["start"].endswith(":00:00Z") for b in (*data["hours"], *data["days"]))


def test_errors(client: Any, auth: dict, conn: Any, workspace: dict) -> None:
    assert error_of(client.get("/v1/campaigns/%20/timeline", headers=auth)) == (400, "Please provide a campaign ID.")
    assert error_of(client.get("/v1/campaigns/nope/timeline", headers=auth)) == (
        400, "We could not find the campaign you are looking for.")
    assert error_of(client.get("/v1/campaigns/nope/report", headers=auth)) == (
        400, "We could not find the campaign you are looking for.")
    campaign = factories.email_campaign(conn, workspace["id"])
    assert error_of(client.get(f"/v1/campaigns/{campaign['id']}/timeline"))[0] == 401
    assert error_of(client.get(f"/v1/campaigns/{campaign['id']}/report"))[0] == 401


def test_another_workspaces_key_sees_nothing(client: Any, conn: Any, workspace: dict) -> None:
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(5))
    headers = {"Authorization": f"Bearer {other['api_key']}"}
    for path in ("timeline", "report"):
        assert error_of(client.get(f"/v1/campaigns/{world['id']}/{path}", headers=headers)) == (
            400, "We could not find the campaign you are looking for.")


def test_the_report_is_an_html_page_that_loads_nothing(client: Any, auth: dict, conn: Any, workspace: dict) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100), name="<b>Sale</b>")
    r = client.get(f"/v1/campaigns/{world['id']}/report", headers=auth)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "style-src 'sha256-" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "&lt;b&gt;Sale&lt;/b&gt;" in r.text and "<b>Sale</b>" not in r.text

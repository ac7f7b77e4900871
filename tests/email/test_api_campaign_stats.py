"""GET /v1/campaigns/:id/statistics over HTTP: envelope A, every error of the endpoint."""

from __future__ import annotations

from typing import Any

from marketing_cli.services.email import stats
from tests import factories
from tests.conftest import error_of


def test_statistics_in_envelope_a(client: Any, auth: dict, conn: Any, workspace: dict) -> None:
    ws = workspace["id"]
    campaign = factories.email_campaign(conn, ws, "Spring", "AB_TESTING")
    [m1, m2] = factories.email_recipients(conn, ws, campaign, ["a@gmail.com", "b@yahoo.com"])
    [m3] = factories.email_recipients(conn, ws, campaign, ["c@icloud.com"], "B")
    [link] = stats.register_links(conn, campaign["id"], campaign["variants"]["B"], ["https://x.example/"]).values()
    for message in (m1, m2, m3):
        stats.record_delivery(conn, message)
    stats.record_open(conn, m3)
    stats.record_click(conn, m3, link, "mobile", "iOS", "GB")
    stats.record_bounce(conn, m2, "hard")

    r = client.get(f"/v1/campaigns/{campaign['id']}/statistics", headers=auth)
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"error", "data"} and body["error"] is None
    assert body["data"] == {**stats.get_campaign_statistics(conn, ws, campaign["id"]),
                            "estimate": {"recipients": 0, "cost": None, "groups": []}}  # a DRAFT with no audience
    data = body["data"]
    assert data["aggregate"] == {"delivered": 3, "opened": 1, "clicked": 1, "bounced": 1, "unsubscribed": 0,
                                 "complained": 0}
    assert data["clicks_by_os"] == [{"operating_system": "iOS", "click_count": 1}]
    assert data["link_activity"] == [{"url": "https://x.example/", "total_clicks": 1, "unique_clicks": 1}]
    assert [v["variant_id"] for v in data["variant_stats"]] == [campaign["variants"]["A"], campaign["variants"]["B"]]
    assert [v["delivered"] for v in data["variant_stats"]] == [2, 1]


def test_errors(client: Any, auth: dict, conn: Any) -> None:
    assert error_of(client.get("/v1/campaigns/%20/statistics", headers=auth)) == (
        400, "Please provide a campaign ID.")
    for bad in ("nope", "0" * 24, "0" * 25):
        assert error_of(client.get(f"/v1/campaigns/{bad}/statistics", headers=auth)) == (
            400, "We could not find the campaign you are looking for.")
    other = factories.workspace(conn, "Other")
    theirs = factories.email_campaign(conn, other["id"])
    assert error_of(client.get(f"/v1/campaigns/{theirs['id']}/statistics", headers=auth)) == (
        400, "We could not find the campaign you are looking for.")
    assert error_of(client.get(f"/v1/campaigns/{theirs['id']}/statistics")) == (401, "Please provide an API key.")
    assert error_of(client.post(f"/v1/campaigns/{theirs['id']}/statistics", headers=auth)) == (
        405, "Method not allowed.")

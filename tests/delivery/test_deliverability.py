"""Deliverability at a glance (services/delivery/deliverability.py): the rows per sending domain
and lane, the same through GET /v1/deliverability and `mkt deliverability --json`, bad input
refused, and the compliance rows only when asked."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.delivery import deliverability
from marketing_cli.storage import db
from tests import factories

HTML = '<p>Hi {{contact.first_name|there}}, <a href="{{unsubscribe_url}}">unsubscribe</a></p>'


def _seed(conn: sqlite3.Connection, ws: int) -> str:
    emails = [f"g{i}@gmail.com" for i in range(10)] + [f"o{i}@shop.example" for i in range(5)]
    campaign_id = factories.sending_campaign(conn, ws, emails, html=HTML)
    now, old = clock.now(), clock.format_ts(clock.utcnow() - timedelta(days=30))
    ids = {r["email"]: r["id"] for r in conn.execute("SELECT id, email FROM email_messages WHERE campaign_id = ?",
                                                    (campaign_id,))}
    with db.transaction(conn):
        conn.execute("DELETE FROM jobs")
        conn.execute("UPDATE email_messages SET lane = 'gmail' WHERE email LIKE '%@gmail.com'")
        for i in range(6):  # gmail: 6 delivered (one complained), 2 unknown users, 1 block, 1 deferred
            conn.execute("UPDATE email_messages SET status = 'delivered', delivered_at = ? WHERE id = ?",
                         (now, ids[f"g{i}@gmail.com"]))
        conn.execute("UPDATE email_messages SET complained_at = ? WHERE id = ?", (now, ids["g0@gmail.com"]))
        for address, cls in (("g6@gmail.com", "unknown_user"), ("g7@gmail.com", "unknown_user"),
                             ("g8@gmail.com", "policy_block")):
            conn.execute("UPDATE email_messages SET status = 'failed', failed_at = ?, bounce_class = ? WHERE id = ?",
                         (now, cls, ids[address]))
        conn.execute("UPDATE email_messages SET deferred_since = ?, retry_at = ? WHERE id = ?",
                     (now, now, ids["g9@gmail.com"]))
        # other: one delivered then bounced by a report, one delivered, one long ago (outside), two never tried
        conn.execute("UPDATE email_messages SET status = 'bounced', delivered_at = ?, bounced_at = ?,"
                     " bounce_class = 'mailbox_full' WHERE id = ?", (now, now, ids["o0@shop.example"]))
        conn.execute("UPDATE email_messages SET status = 'delivered', delivered_at = ? WHERE id = ?",
                     (now, ids["o1@shop.example"]))
        conn.execute("UPDATE email_messages SET status = 'delivered', delivered_at = ? WHERE id = ?",
                     (old, ids["o2@shop.example"]))
        conn.execute("INSERT INTO lane_state (workspace_id, lane, rate, reason) VALUES (?, 'gmail', 2.5, '421')",
                     (ws,))
    return campaign_id


def test_rows_per_domain_and_lane(conn: sqlite3.Connection, workspace: dict[str, Any],
                                  verified_dns: None) -> None:
    _seed(conn, workspace["id"])
    report = deliverability.report(conn, workspace["id"])
    assert report["days"] == 7 and report["compliance"] is None
    rows = {r["lane"]: r for r in report["rows"]}
    assert set(rows) == {"gmail", "other"}
    gmail, other = rows["gmail"], rows["other"]
    assert {k: gmail[k] for k in ("sent", "delivered", "deferred", "bounced", "complained")} == {
        "sent": 10, "delivered": 6, "deferred": 1, "bounced": 3, "complained": 1}
    assert gmail["bounced_by_class"] == {"unknown_user": 2, "policy_block": 1}
    assert (gmail["delivered_rate"], gmail["deferred_rate"], gmail["bounce_rate"]) == (0.6, 0.1, 0.3)
    assert gmail["complaint_rate"] == round(1 / 6, 4)
    assert gmail["rate_now"] == 2.5 and gmail["warmup_day"] is None and gmail["warmup_cap"] is None
    assert {k: other[k] for k in ("sent", "delivered", "bounced", "complained")} == {
        "sent": 2, "delivered": 1, "bounced": 1, "complained": 0}
    assert other["bounced_by_class"] == {"mailbox_full": 1} and other["rate_now"] is None
    assert other["complaint_rate"] == 0.0
    assert deliverability.report(conn, workspace["id"], "60")["rows"][1]["sent"] == 3  # the old one too


def test_a_warming_domain_shows_its_day_and_each_lanes_cap(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                           verified_dns: None) -> None:
    from marketing_cli.services.delivery import warmup

    ws = workspace["id"]
    _seed(conn, ws)
    domain_id = conn.execute("SELECT d.id FROM domains d WHERE d.workspace_id = ?", (ws,)).fetchone()[0]
    warmup.start_warmup(conn, ws, domain_id, warmup.parse_schedule("day,lane,cap\n1,gmail,40\n2,gmail,80\n", "t"))
    rows = {r["lane"]: r for r in deliverability.report(conn, ws)["rows"]}
    assert (rows["gmail"]["warmup_day"], rows["gmail"]["warmup_cap"]) == (1, 40)
    assert (rows["other"]["warmup_day"], rows["other"]["warmup_cap"]) == (1, None)  # no cap for the lane today
    warmup.stop_warmup(conn, ws, domain_id)
    rows = {r["lane"]: r for r in deliverability.report(conn, ws)["rows"]}
    assert rows["gmail"]["warmup_day"] is None and rows["gmail"]["warmup_cap"] is None


@pytest.mark.parametrize("days", ["0", "91", "-1", "x", "1.5", "²", True, 0])
def test_bad_days_are_refused(conn: sqlite3.Connection, workspace: dict[str, Any], days: Any) -> None:
    with pytest.raises(MktError) as bad:
        deliverability.report(conn, workspace["id"], days)
    assert bad.value.status == 400 and bad.value.message == deliverability.DAYS_INVALID


def test_the_api_and_the_cli_answer_the_same(conn: sqlite3.Connection, workspace: dict[str, Any],
                                            verified_dns: None, client: Any, auth: dict[str, str],
                                            cli_json: Any, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.delivery import compliance

    _seed(conn, workspace["id"])
    answer = client.get("/v1/deliverability?days=30", headers=auth)
    assert answer.status_code == 200
    data = answer.json()["data"]
    via_cli = cli_json("deliverability", "--days", "30")
    assert {**via_cli, "since": None} == {**data, "since": None} and len(data["rows"]) == 2
    human = cli("deliverability", "--days", "30")
    assert human.exit_code == 0 and "gmail" in human.stdout and "Deliverability over the last 30 days" in human.stdout
    assert client.get("/v1/deliverability?days=abc", headers=auth).status_code == 400
    assert client.get("/v1/deliverability?compliance=maybe", headers=auth).status_code == 400
    assert cli("deliverability", "--days", "0").exit_code == 1
    asked = []
    monkeypatch.setattr(compliance, "check_domain", lambda conn, ws, domain_id: asked.append(domain_id) or [
        {"rule": "spf", "status": "pass", "found": "v=spf1", "fix": None}])
    data = client.get("/v1/deliverability?compliance=true", headers=auth).json()["data"]
    assert len(asked) == 1 and list(data["compliance"].values()) == [
        [{"rule": "spf", "status": "pass", "found": "v=spf1", "fix": None}]]
    assert "Compliance of" in cli("deliverability", "--compliance").stdout


def test_the_campaign_report_and_the_dashboard_have_the_section(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                                verified_dns: None, client: Any, auth: dict[str, str],
                                                                app: Any) -> None:
    from starlette.testclient import TestClient

    campaign_id = _seed(conn, workspace["id"])
    page = client.get(f"/v1/campaigns/{campaign_id}/report", headers=auth)
    assert page.status_code == 200
    section = page.text[page.text.index("<h2>Deliverability</h2>"):]
    assert "gmail" in section and "unknown_user 2, policy_block 1" in section and "2.5/s" in section
    assert "6 (60.0%)" in section
    with TestClient(app, follow_redirects=False) as browser:
        browser.post("/dashboard/sign-in", data={"api_key": workspace["api_key"]},
                     headers={"Origin": "http://testserver"})
        overview = browser.get("/dashboard/").text
        assert "Deliverability over the last 7 days" in overview and "unknown_user 2, policy_block 1" in overview
        campaign_page = browser.get(f"/dashboard/campaigns/{campaign_id}").text
        assert "<h2>Deliverability</h2>" in campaign_page


def test_the_campaign_rows_count_every_answer_of_the_campaign(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                              verified_dns: None) -> None:
    campaign_id = _seed(conn, workspace["id"])
    rows = {r["lane"]: r for r in deliverability.campaign_rows(conn, workspace["id"], campaign_id)}
    assert rows["other"]["sent"] == 3 and rows["gmail"]["sent"] == 10  # the old answer too


def test_a_campaign_sent_before_the_window_is_not_read(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                       verified_dns: None) -> None:
    campaign_id = _seed(conn, workspace["id"])
    old = clock.format_ts(clock.utcnow() - timedelta(days=30))
    conn.execute("UPDATE email_messages SET delivered_at = ?, failed_at = CASE WHEN failed_at IS NULL THEN NULL"
                 " ELSE ? END, deferred_since = NULL WHERE campaign_id = ?", (old, old, campaign_id))
    conn.execute("UPDATE campaigns SET status = 'SENT', sent_at = ? WHERE id = ?", (old, campaign_id))
    assert deliverability.report(conn, workspace["id"])["rows"] == []
    assert len(deliverability.report(conn, workspace["id"], 60)["rows"]) == 2

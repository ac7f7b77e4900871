"""Circuit breakers (services/delivery/breakers.py): a list seeded with unknown addresses sent
through a real SMTP server (aiosmtpd answering `550 5.1.1` for them) pauses itself after its
first 200 answers; a forced resume finishes it without tripping again on the same window;
complaints and blocks recorded later trip it too; the thresholds are the workspace's, set
from the CLI only."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import stats
from marketing_cli.services.delivery import bounces, breakers
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.storage import db
from tests import factories
from tests.smtp_server import SmtpServer

HTML = '<p>Hi {{contact.first_name|there}}, <a href="{{unsubscribe_url}}">unsubscribe</a></p>'


def _run(conn: sqlite3.Connection, campaign_id: str) -> sqlite3.Row:
    for _ in range(10):
        conn.execute("UPDATE jobs SET run_at = ? WHERE status = 'queued'", (clock.now(),))
        jobs.run_due(conn)
        row = conn.execute("SELECT status, status_detail FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
        if row["status"] != "SENDING":
            return row
    return row


def _statuses(conn: sqlite3.Connection, campaign_id: str) -> dict[str, int]:
    return dict(conn.execute("SELECT status, count(*) FROM email_messages WHERE campaign_id = ? GROUP BY status",
                             (campaign_id,)).fetchall())


def test_a_list_seeded_with_unknown_users_pauses_and_a_forced_resume_finishes_it(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    # 380, not 400: the trip comes at 200 answers or a few rounds past them, and the rest must be
    # under the 200-answer window, so that the resumed send cannot trip again (with 400, a trip at
    # exactly 200 answers left 200, and the resumed send paused again at its 200th)
    total = 380
    emails = [f"r{i:03}@shop.example" for i in range(total)]
    bad = tuple(e for i, e in enumerate(emails) if i % 12 == 5)  # 32 of 380: 8.4 %
    campaign_id = factories.sending_campaign(conn, ws, emails, html=HTML)
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "10")
    with SmtpServer(refuse=bad) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        row = _run(conn, campaign_id)
        assert row["status"] == "PAUSED"
        detail = row["status_detail"]
        assert detail.startswith("Paused by the circuit breaker: unknown users ") and "(threshold 5%)" in detail
        assert f"mkt campaigns resume {campaign_id} --force" in detail and "clean it" in detail
        counts = _statuses(conn, campaign_id)
        answered = counts.get("delivered", 0) + counts.get("failed", 0)
        # Stopped soon after its first 200 answers: the trip is read after a round with a refusal
        # (or every breakers.CHECK_EVERY answers), and each worker's rounds in flight then (10
        # between them) are answered; on PostgreSQL MKT_SEND_WORKERS (4) workers send at once.
        assert 200 <= answered < 240 + 10 * jobs.send_workers(conn) and counts["queued"] > total - 280
        assert len(server.messages) == counts["delivered"]

        with pytest.raises(MktError) as refused:  # not without --force
            email_schedule.resume_campaign(conn, ws, campaign_id)
        assert refused.value.status == 400 and "--force" in refused.value.message
        assert email_schedule.resume_campaign(conn, ws, campaign_id, {"force": True})["status"] == "SENDING"
        row = _run(conn, campaign_id)  # the rest (fewer than 200 answers since the resume): no trip
    assert row["status"] == "SENT"
    counts = _statuses(conn, campaign_id)
    assert counts == {"delivered": total - len(bad), "failed": len(bad)}
    classes = {r[0] for r in conn.execute("SELECT bounce_class FROM email_messages WHERE campaign_id = ?"
                                          " AND status = 'failed'", (campaign_id,))}
    assert classes == {"unknown_user"}


def _answered(conn: sqlite3.Connection, ws: int, n: int) -> tuple[str, list[str]]:
    """A SENDING campaign with `n` delivered messages (no send job): its id and the addresses."""
    emails = [f"d{i:03}@shop.example" for i in range(n)]
    campaign_id = factories.sending_campaign(conn, ws, emails, html=HTML)
    with db.transaction(conn):
        conn.execute("UPDATE email_messages SET status = 'delivered', delivered_at = ? WHERE campaign_id = ?",
                     (clock.now(), campaign_id))
        conn.execute("DELETE FROM jobs")
    return campaign_id, emails


def test_a_complaint_report_arriving_later_trips_it(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                    verified_dns: None) -> None:
    ws = workspace["id"]
    campaign_id, emails = _answered(conn, ws, 400)
    bounces.record_bounce(conn, ws, {"email_address": emails[0], "type": "complaint", "campaign_id": campaign_id})
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENDING"
    bounces.record_bounce(conn, ws, {"email_address": emails[1], "type": "complaint", "campaign_id": campaign_id})
    row = conn.execute("SELECT status, status_detail FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
    assert row["status"] == "PAUSED"  # 2 of 400 = 0.5 % >= 0.3 % (one was 0.25 %)
    assert "complaints 0.5% of the last 400 deliveries (threshold 0.3%)" in row["status_detail"]


def test_a_raised_threshold_lets_one_complaint_in_250_through(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None) -> None:
    ws = workspace["id"]
    assert breakers.configure(conn, ws, complaints="0.5")["complaints"] == "0.5"
    campaign_id, emails = _answered(conn, ws, 250)
    bounces.record_bounce(conn, ws, {"email_address": emails[0], "type": "complaint", "campaign_id": campaign_id})
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENDING"


def test_blocks_count_policy_reputation_and_authentication_refusals(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None) -> None:
    ws = workspace["id"]
    campaign_id, _ = _answered(conn, ws, 300)
    ids = [r[0] for r in conn.execute("SELECT id FROM email_messages WHERE campaign_id = ? ORDER BY id",
                                      (campaign_id,))]
    classes = ["policy_block", "reputation_block", "authentication_failure", "mailbox_full"] * 9
    with db.transaction(conn):
        for message_id, cls in zip(ids[:36], classes):
            conn.execute("UPDATE email_messages SET status = 'failed', delivered_at = NULL, failed_at = ?,"
                         " bounce_class = ? WHERE id = ?", (clock.now(), cls, message_id))
    assert breakers.window(conn, campaign_id, None) == {"n": 300, "complaints": 0, "unknown_users": 0, "blocks": 27}
    assert breakers.check(conn, campaign_id) is None  # 9 %
    breakers.configure(conn, ws, blocks="9")
    detail = breakers.check(conn, campaign_id)
    assert detail is not None and "blocks 9% of the last 300 deliveries (threshold 9%)" in detail
    assert "mkt domains check" in detail


def test_under_200_answers_nothing_trips_and_the_window_is_the_last_1000(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None) -> None:
    ws = workspace["id"]
    campaign_id, _ = _answered(conn, ws, 150)
    conn.execute("UPDATE email_messages SET status = 'failed', bounce_class = 'unknown_user' WHERE campaign_id = ?",
                 (campaign_id,))
    assert breakers.check(conn, campaign_id) is None
    assert breakers.window(conn, campaign_id, None)["n"] == 150
    last = conn.execute("SELECT max(id) FROM email_messages WHERE campaign_id = ?", (campaign_id,)).fetchone()[0]
    assert breakers.window(conn, campaign_id, last - 10)["n"] == 10


@pytest.mark.parametrize("value", ["0", "-1", "101", "abc", "nan"])
def test_a_bad_threshold_is_refused_and_writes_nothing(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                       value: str) -> None:
    with pytest.raises(MktError) as bad:
        breakers.configure(conn, workspace["id"], complaints="1", blocks=value)
    assert bad.value.status == 400 and "blocks threshold" in bad.value.message and value in bad.value.message
    assert breakers.thresholds(conn, workspace["id"])["complaints"] == breakers.DEFAULTS["complaints"]


def test_the_thresholds_are_set_from_the_cli_only(cli_json: Any, cli: Any, client: Any, auth: dict[str, str],
                                                  workspace: dict[str, Any]) -> None:
    shown = cli_json("workspace", "breakers", "--unknown-users", "8", "--complaints", "0.2%")
    assert shown == {"complaints": "0.2", "unknown_users": "8", "blocks": "10", "window": 1000,
                     "min_deliveries": 200}
    assert "unknown users" in cli("workspace", "breakers").stdout
    bad = cli("workspace", "breakers", "--blocks", "200")
    assert bad.exit_code == 1 and "blocks threshold" in bad.stderr
    assert client.patch("/v1/workspace", json={"breakers": {"blocks": 1}}, headers=auth).status_code == 400
    assert client.get("/v1/workspace/breakers", headers=auth).status_code == 404


def test_resume_force_over_http_and_the_cli(conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
                                           client: Any, auth: dict[str, str], cli: Any) -> None:
    ws = workspace["id"]
    campaign_id, _ = _answered(conn, ws, 200)
    conn.execute("UPDATE email_messages SET status = 'failed', bounce_class = 'unknown_user' WHERE id IN"
                 " (SELECT id FROM email_messages WHERE campaign_id = ? ORDER BY id LIMIT 20)", (campaign_id,))
    assert breakers.check(conn, campaign_id) is not None
    url = f"/v1/campaigns/{campaign_id}/resume"
    for body in ({"force": "yes"}, [1], {"force": True, "other": 1}):
        answer = client.post(url, json=body, headers=auth)
        assert answer.status_code == 400, body
    answer = client.post(url, headers=auth)
    assert answer.status_code == 400 and "--force" in answer.text
    assert cli("campaigns", "resume", campaign_id).exit_code == 1
    answer = client.post(url, json={"force": True}, headers=auth)
    assert answer.status_code == 200 and answer.json()["data"]["status"] == "SENDING"
    last = conn.execute("SELECT max(id) FROM email_messages WHERE campaign_id = ?", (campaign_id,)).fetchone()[0]
    assert conn.execute("SELECT breaker_after FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == last
    assert breakers.check(conn, campaign_id) is None  # the same window does not trip it again


def test_a_flow_email_step_pauses_its_campaign_and_its_messages_wait(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None) -> None:
    from marketing_cli.services.email import automated

    ws = workspace["id"]
    campaign_id, emails = _answered(conn, ws, 220)
    sender = conn.execute("SELECT sender_identity_id FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0]
    flow = factories.automation(conn, ws, {"name": "Welcome", "triggers": [{"type": "manual"}],
                                           "steps": [factories.email_step("welcome", sender)]})
    conn.execute("UPDATE campaigns SET automation_id = ? WHERE id = ?", (flow["id"], campaign_id))
    conn.execute("UPDATE email_messages SET status = 'failed', bounce_class = 'unknown_user' WHERE id IN"
                 " (SELECT id FROM email_messages WHERE campaign_id = ? ORDER BY id LIMIT 12)", (campaign_id,))
    version = conn.execute("SELECT id FROM automation_versions WHERE automation_id = ?", (flow["id"],)).fetchone()
    with db.transaction(conn):  # (the step's campaign, as steps.py lists it)
        conn.execute("INSERT INTO automation_campaigns (version_id, step_id, round, campaign_id) VALUES (?, 'welcome',"
                     " 0, ?)", (version[0], campaign_id))
    detail = breakers.check(conn, campaign_id)
    assert detail is not None
    steps = stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"]
    assert steps[0]["paused"] == [{"campaign_id": campaign_id, "status_detail": detail}]
    contact = conn.execute("SELECT id FROM contacts WHERE email = ?", (emails[0],)).fetchone()[0]
    with db.transaction(conn):
        conn.execute("DELETE FROM email_messages WHERE contact_id = ?", (contact,))
        automated.queue_automated_message(conn, campaign_id, contact, emails[0])
    assert conn.execute("SELECT count(*) FROM jobs WHERE type = 'email.send'").fetchone()[0] == 0

"""Sending through the HTTP face: schedule, progress, tracking (pixel, click, unsubscribe),
bounces, cancel; and the CLI twins (schedule, watch, bounces import)."""

from __future__ import annotations

import email
import json
import re
import sqlite3
from email import policy
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.email import domains
from marketing_cli.services.email import stats as campaign_stats
from tests import factories
from tests.smtp_server import SmtpServer

HTML = ('<p>Hi {{contact.first_name|there}}, <a href="https://shop.example.org/a?x=1&amp;y=2">shop</a>'
        ' <a href="{{unsubscribe_url}}">Unsubscribe</a></p>')
IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Version/17.4 Mobile/15E148 Safari/604.1")
WINDOWS = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
           "Chrome/124.0.0.0 Safari/537.36")


@pytest.fixture(autouse=True)
def _job_handlers() -> None:
    """The send jobs' handlers, as `mkt jobs run` loads them (run alone, this module imports none)."""
    from marketing_cli.services import load_job_handlers

    load_job_handlers()


@pytest.fixture
def sent(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
         client: Any, auth: dict[str, str]) -> dict[str, Any]:
    """A campaign sent through a real SMTP server to ann and bob; their parsed messages."""
    from marketing_cli.services.email import dns_check as domain_dns

    monkeypatch.setattr(domain_dns, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])
    ws = workspace["id"]
    factories.contact(conn, ws, "ann@gmail.com", first_name="Ann")
    factories.contact(conn, ws, "bob@yahoo.com", first_name="Bob")
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        answer = client.post(f"/v1/campaigns/{campaign['id']}/schedule", headers=auth, json={"schedule_type": "NOW"})
        assert answer.status_code == 200 and answer.json() == {"error": None, "data": {
            "id": campaign["id"], "status": "QUEUED"}}
        jobs.run_due(conn)
    messages = {m.rcpt_tos[0]: email.message_from_bytes(m.raw, policy=policy.default) for m in server.messages}
    html = {a: m.get_body(("html",)).get_content() for a, m in messages.items()}
    return {"campaign": campaign, "messages": messages, "html": html}


def _path(url: str) -> str:
    return re.sub(r"^https?://[^/]+", "", url)


def _urls(html: str) -> dict[str, str]:
    found = re.findall(r'(?:href|src)="([^"]+)"', html)
    return {"click": next(u for u in found if "/t/c/" in u), "open": next(u for u in found if "/t/o/" in u),
            "unsubscribe": next(u for u in found if "/t/u/" in u)}


def test_get_campaign_shows_progress_after_the_send(client: Any, auth: dict[str, str], sent: dict[str, Any]) -> None:
    data = client.get(f"/v1/campaigns/{sent['campaign']['id']}", headers=auth).json()["data"]
    assert data["status"] == "SENT"
    progress = data["progress"]
    assert (progress["total"], progress["sent"], progress["delivered"], progress["failed"], progress["remaining"]) == \
        (2, 2, 2, 0, 0)
    assert progress["eta_seconds"] is None


def test_pixel_click_and_unsubscribe_move_the_statistics(client: Any, auth: dict[str, str], sent: dict[str, Any],
                                                         conn: sqlite3.Connection) -> None:
    ann, bob = _urls(sent["html"]["ann@gmail.com"]), _urls(sent["html"]["bob@yahoo.com"])
    assert len({ann["click"], bob["click"]}) == 2 and ann["open"] != bob["open"]  # per recipient
    pixel = client.get(_path(ann["open"]), headers={"User-Agent": WINDOWS})
    assert pixel.status_code == 200 and pixel.headers["content-type"] == "image/gif"
    client.get(_path(ann["open"]), headers={"User-Agent": WINDOWS})  # a second open counts once
    click = client.get(_path(ann["click"]), headers={"User-Agent": IPHONE}, follow_redirects=False)
    assert click.status_code == 302 and click.headers["location"] == "https://shop.example.org/a?x=1&y=2"
    client.get(_path(ann["click"]), headers={"User-Agent": IPHONE}, follow_redirects=False)
    client.get(_path(bob["click"]), headers={"User-Agent": WINDOWS}, follow_redirects=False)
    page = client.get(_path(bob["unsubscribe"]))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html") and "<form" in page.text
    done = client.post(_path(bob["unsubscribe"]), content=b"List-Unsubscribe=One-Click",
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert done.status_code == 200 and "unsubscribed" in done.text
    stats = client.get(f"/v1/campaigns/{sent['campaign']['id']}/statistics", headers=auth).json()["data"]
    assert stats["aggregate"] == {"delivered": 2, "opened": 1, "clicked": 2, "bounced": 0, "unsubscribed": 1,
                                  "complained": 0}
    assert stats["link_activity"] == [{"url": "https://shop.example.org/a?x=1&y=2", "total_clicks": 3,
                                       "unique_clicks": 2}]
    assert sorted((d["device_type"], d["click_count"]) for d in stats["clicks_by_device_type"]) == \
        [("desktop", 1), ("mobile", 1)]
    assert sorted(o["operating_system"] for o in stats["clicks_by_os"]) == ["Windows", "iOS"]
    assert stats["clicks_by_country"] == [{"country": "Unknown", "click_count": 2}]
    status = conn.execute("SELECT status FROM contacts WHERE email = 'bob@yahoo.com'").fetchone()[0]
    assert status == "UNSUBSCRIBED"
    assert conn.execute("SELECT count(*) FROM contact_events WHERE type = 'CONTACT_UNSUBSCRIBED'").fetchone()[0] == 1


def test_one_click_unsubscribe_matches_the_header(client: Any, sent: dict[str, Any], conn: sqlite3.Connection) -> None:
    header = sent["messages"]["ann@gmail.com"]["List-Unsubscribe"].strip("<>")
    assert client.post(_path(header), content=b"List-Unsubscribe=One-Click").status_code == 200
    assert conn.execute("SELECT status FROM contacts WHERE email = 'ann@gmail.com'").fetchone()[0] == "UNSUBSCRIBED"


def test_machine_opens_do_not_count(client: Any, auth: dict[str, str], sent: dict[str, Any]) -> None:
    ann = _urls(sent["html"]["ann@gmail.com"])
    client.get(_path(ann["open"]), headers={"User-Agent": "Mozilla/5.0"})  # Apple Mail Privacy Protection
    stats = client.get(f"/v1/campaigns/{sent['campaign']['id']}/statistics", headers=auth).json()["data"]
    assert stats["aggregate"]["opened"] == 0


def test_forged_tokens_change_nothing(client: Any, auth: dict[str, str], sent: dict[str, Any]) -> None:
    ann = _urls(sent["html"]["ann@gmail.com"])
    token = _path(ann["open"]).rsplit("/", 1)[1]
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert client.get(f"/t/o/{forged}").status_code == 200  # a pixel is always answered
    assert client.get(f"/t/c/{forged}/1", follow_redirects=False).status_code == 404
    assert client.post(f"/t/u/{forged}").status_code == 404
    assert client.get(_path(ann["click"]).rsplit("/", 1)[0] + "/999", follow_redirects=False).status_code == 404
    stats = client.get(f"/v1/campaigns/{sent['campaign']['id']}/statistics", headers=auth).json()["data"]
    assert stats["aggregate"]["opened"] == 0 and stats["aggregate"]["unsubscribed"] == 0


def test_tracking_paths_below_a_base_path(client: Any, sent: dict[str, Any]) -> None:
    ann = _urls(sent["html"]["ann@gmail.com"])
    assert client.get("/mkt" + _path(ann["open"])).status_code == 200


def test_bounces_endpoint(client: Any, auth: dict[str, str], sent: dict[str, Any], conn: sqlite3.Connection) -> None:
    campaign_id = sent["campaign"]["id"]
    answer = client.post("/v1/bounces", headers=auth, json={"email_address": "ann@gmail.com", "type": "hard"})
    assert answer.status_code == 201
    assert answer.json()["data"] == {"contact_id": answer.json()["data"]["contact_id"], "type": "hard",
                                     "contact_status": "CLEANED", "campaign_id": campaign_id, "counted": True}
    complaint = client.post("/v1/bounces", headers=auth, json={"email_address": "BOB@yahoo.com", "type": "complaint",
                                                               "campaign_id": campaign_id})
    assert complaint.status_code == 201 and complaint.json()["data"]["contact_status"] == "COMPLAINED"
    stats = client.get(f"/v1/campaigns/{campaign_id}/statistics", headers=auth).json()["data"]
    assert (stats["aggregate"]["bounced"], stats["aggregate"]["complained"]) == (1, 1)
    assert stats["variant_stats"][0]["bounced"] == 1 and stats["variant_stats"][0]["complained"] == 1
    for body, status, message in [
        ({"type": "hard"}, 400, "Please provide the email_address that bounced."),
        ({"email_address": "ann@gmail.com", "type": "bad"}, 400, "The bounce type must be 'hard', 'soft' or 'complaint'."),
        ({"email_address": "nobody@x.org", "type": "hard"}, 404, "We couldn't find a contact with the email address 'nobody@x.org'."),
        ({"email_address": "ann@gmail.com", "type": "hard", "campaign_id": "nope"}, 400,
         "We could not find the campaign you are looking for."),
        ([], 400, "Invalid request body."),
    ]:
        answer = client.post("/v1/bounces", headers=auth, json=body)
        assert (answer.status_code, answer.json()["error"]["message"]) == (status, message)


def test_soft_bounces_clean_after_the_limit(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    from marketing_cli.services.delivery import bounces

    ws = workspace["id"]
    contact_id = factories.contact(conn, ws, "soft@example.org")["id"]
    for n in range(bounces.SOFT_BOUNCE_LIMIT):
        campaign = factories.email_campaign(conn, ws, name=f"c{n}")
        campaign_stats.add_messages(conn, campaign["id"], campaign["variants"]["A"], [(contact_id, "soft@example.org")])
        answer = bounces.record_bounce(conn, ws, {"email_address": "soft@example.org", "type": "soft"})
        expected = "CLEANED" if n == bounces.SOFT_BOUNCE_LIMIT - 1 else "SUBSCRIBED"
        assert answer["contact_status"] == expected and answer["counted"]


def test_cancel_through_the_api(client: Any, auth: dict[str, str], sent: dict[str, Any]) -> None:
    answer = client.post(f"/v1/campaigns/{sent['campaign']['id']}/cancel", headers=auth)
    assert (answer.status_code, answer.json()["error"]["message"]) == \
        (400, "Only queued or sending campaigns can be cancelled.")
    assert client.post("/v1/campaigns/nope/cancel", headers=auth).json()["error"]["message"] == \
        "We could not find the campaign you are looking for."
    assert client.post(f"/v1/campaigns/{sent['campaign']['id']}/schedule", headers=auth,
                       content=b"{nope").json()["error"]["message"] == "Invalid request body."


def test_another_workspace_cannot_touch_the_campaign(client: Any, sent: dict[str, Any], conn: sqlite3.Connection) -> None:
    other = factories.workspace(conn, "Other")
    headers = {"Authorization": f"Bearer {other['api_key']}"}
    for path, body in (("schedule", {"schedule_type": "NOW"}), ("cancel", None), ("resume", {"force": True})):
        answer = client.post(f"/v1/campaigns/{sent['campaign']['id']}/{path}", headers=headers, json=body)
        assert answer.json()["error"]["message"] == "We could not find the campaign you are looking for."
    assert client.post("/v1/bounces", headers=headers, json={"email_address": "ann@gmail.com", "type": "hard"}
                       ).status_code == 404


def test_cli_schedules_watches_and_imports_bounces(cli: Any, cli_json: Any, sent: dict[str, Any],
                                                   conn: sqlite3.Connection, tmp_path: Path) -> None:
    campaign_id = sent["campaign"]["id"]
    assert cli_json("campaigns", "watch", campaign_id)["delivered"] == 2
    assert "SENT: 2/2 sent (2 delivered, 0 failed)" in cli("campaigns", "watch", campaign_id).stdout
    bad = cli("campaigns", "schedule", campaign_id)
    assert bad.exit_code == 2 and "exactly one of --now or --at" in bad.stderr
    again = cli("campaigns", "schedule", campaign_id, "--now")
    assert again.exit_code == 1 and again.stderr.strip() == "Only draft campaigns can be scheduled."
    message_id = sent["messages"]["ann@gmail.com"]["Message-ID"]
    report = (Path(__file__).parent.parent / "data" / "reports" / "postfix_hard.eml").read_bytes()
    report = report.replace(b"<66f0c2a1e4b0a1b2c3d4e5f6.1@example.com>", message_id.encode())
    report = report.replace(b"nobody@example.org", b"someone-else@example.org")  # attributed by Message-ID alone
    report = report.replace(b"Nobody@Example.org", b"someone-else@example.org")
    path = tmp_path / "bounce.eml"
    path.write_bytes(report)
    result = cli_json("bounces", "import", str(path))
    assert (result["applied"], result["hard"]) == (1, 1), result
    assert conn.execute("SELECT status FROM contacts WHERE email = 'ann@gmail.com'").fetchone()[0] == "CLEANED"
    assert json.loads(cli("campaigns", "stats", campaign_id, "--json").stdout)["aggregate"]["bounced"] == 1


def test_cli_show_tells_the_progress(cli: Any, sent: dict[str, Any]) -> None:
    shown = cli("campaigns", "show", sent["campaign"]["id"]).stdout
    assert "SENT: 2/2 sent (2 delivered, 0 failed)" in shown


def test_failed_messages_and_a_send_that_gave_up_show_in_the_api_show_and_watch(
        conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch, client: Any,
        auth: dict[str, str], cli: Any, cli_json: Any) -> None:
    from marketing_cli.services.email import dns_check as domain_dns

    monkeypatch.setattr(domain_dns, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])
    ws = workspace["id"]
    for address in ("ann@gmail.com", "gül.kowalski.6@example.com", "refused@example.net"):
        factories.contact(conn, ws, address)
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    path = f"/v1/campaigns/{campaign['id']}"
    assert client.get(path, headers=auth).json()["data"]["status_detail"] is None
    with SmtpServer(smtputf8=False, refuse=("refused@example.net",)) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        client.post(f"{path}/schedule", headers=auth, json={"schedule_type": "NOW"})
        jobs.run_due(conn)
    assert [m.rcpt_tos for m in server.messages] == [["ann@gmail.com"]]
    data = client.get(path, headers=auth).json()["data"]
    detail = ("2 of 3 messages failed: the SMTP server does not offer SMTPUTF8 (RFC 6531), which an address with "
              "non-ASCII characters before the @ needs (1); the SMTP server refused the recipient: 550 5.1.1 No such "
              "user here (1).")
    assert (data["status"], data["status_detail"], data["progress"]["failed"]) == ("SENT", detail, 2)
    assert cli_json("campaigns", "show", campaign["id"])["status_detail"] == detail
    assert "status detail" in cli("campaigns", "show", campaign["id"]).stdout
    watched = cli("campaigns", "watch", campaign["id"]).stdout
    assert watched.startswith("SENT: 3/3 sent (1 delivered, 2 failed), ") and "/s.\n2 of 3 messages failed" in watched
    assert " ".join(watched.split()).endswith(detail)  # rich folds the long line at the terminal's width

    factories.allow_domains(conn, ws)
    again = factories.ready_campaign(conn, ws, html=HTML, domain="example.net")
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    client.post(f"/v1/campaigns/{again['id']}/schedule", headers=auth, json={"schedule_type": "NOW"})
    monkeypatch.setenv("MKT_SEND_RATE", "-1")
    jobs.run_due(conn)
    data = client.get(f"/v1/campaigns/{again['id']}", headers=auth).json()["data"]
    assert data["status"] == "PAUSED" and data["status_detail"].startswith(
        "Sending stopped: the send job failed for good (MKT_SEND_RATE must be a number")
    watched = cli("campaigns", "watch", again["id"]).stdout
    assert watched.startswith("PAUSED: ") and " ".join(watched.split()).endswith(data["status_detail"])

"""Sending email campaigns end to end through a real SMTP server (aiosmtpd): schedule,
freeze, review, send, DKIM, headers, statistics, failures, cancel, A/B winner, crash."""

from __future__ import annotations

import email
import json
import sqlite3
from email import policy
from typing import Any

import dkim
import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.delivery import ab_winner, handoff
from marketing_cli.services.delivery import sender as email_sender
from marketing_cli.services.email import domains, preparation
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.services.email import stats as campaign_stats
from tests import factories
from tests.smtp_server import SmtpServer

HTML = ('<html><head><style>p{color:#333}</style></head><body><p>Hi {{contact.first_name|there}},</p>'
        '<p><a href="https://shop.example.org/sale?a=1&amp;b=2">Sale</a> '
        '<a href="https://shop.example.org/sale?a=1&amp;b=2">again</a> '
        '<a href="mailto:help@example.org">mail us</a></p>'
        '<p><a href="{{unsubscribe_url}}">Unsubscribe</a></p></body></html>')


@pytest.fixture
def verified_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every DNS record is found (the domains tests check real lookups against a DNS server)."""
    from marketing_cli.services.email import dns_check as domain_dns

    monkeypatch.setattr(domain_dns, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])


@pytest.fixture
def smtp(monkeypatch: pytest.MonkeyPatch) -> Any:
    with SmtpServer(refuse=("refused@example.net",)) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        yield server


def _world(conn: sqlite3.Connection, ws: int, emails: list[str], **ready: Any) -> dict[str, Any]:
    for i, address in enumerate(emails):
        factories.contact(conn, ws, address, first_name=f"N{i}")
    campaign = factories.ready_campaign(conn, ws, html=ready.pop("html", HTML), **ready)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    return campaign


def _dkim_dns(conn: sqlite3.Connection, ws: int) -> Any:
    records = {r["host"]: r["value"] for d in domains.list_domains(conn, ws)
               for r in domains.get_domain(conn, ws, d["id"])["dns_records"] if r["type"] == "TXT"}

    def lookup(name: bytes, timeout: int = 5) -> bytes:
        return records.get(name.decode().rstrip("."), "").encode()
    return lookup


def test_a_campaign_goes_from_draft_to_sent_through_smtp(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                         verified_dns: None, smtp: SmtpServer) -> None:
    ws = workspace["id"]
    campaign = _world(conn, ws, ["ann@gmail.com", "bob@outlook.com", "refused@example.net"])
    assert email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"}) == \
        {"id": campaign["id"], "status": "QUEUED"}
    result = jobs.run_due(conn)
    assert result["failed"] == 0
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign["id"],)).fetchone()[0] == "SENT"
    received = {m.rcpt_tos[0]: m for m in smtp.messages}
    assert set(received) == {"ann@gmail.com", "bob@outlook.com"}
    lookup = _dkim_dns(conn, ws)
    for address, item in received.items():
        assert dkim.verify(item.raw, dnsfunc=lookup), address
        code = domains.list_domains(conn, ws)[0]["domain_code"]
        assert item.mail_from == f"bounces@{code}.example.com"  # the return-path host
        message = email.message_from_bytes(item.raw, policy=policy.default)
        assert message["From"] == "News Team <news@example.com>" and message["To"] == address
        assert message["Subject"].startswith("Hello N") and message["Date"] and message["Message-ID"]
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert message["List-Unsubscribe"].startswith("<http://127.0.0.1:8000/t/u/")
        assert message.get_content_type() == "multipart/alternative"
        text, html = (part.get_content() for part in message.iter_parts())
        assert "Hi N" in text and "Hi N" in html and "/t/o/" in html and "mailto:help@example.org" in html
        assert "https://shop.example.org/sale" not in html  # rewritten to the tracking URL
        assert message["List-Unsubscribe"].strip("<>") in html
        signature = message["DKIM-Signature"]
        assert "d=example.com" in signature and "a=rsa-sha256" in signature and "c=relaxed/relaxed" in signature
    stats = campaign_stats.get_campaign_statistics(conn, ws, campaign["id"])
    assert stats["aggregate"]["delivered"] == 2
    assert {p["service_provider"] for p in stats["delivered_by_provider"]} == {"Gmail", "Outlook"}
    failed = conn.execute("SELECT email, status, failure_reason FROM email_messages WHERE status = 'failed'").fetchall()
    assert [(r[0], r[1]) for r in failed] == [("refused@example.net", "failed")] and "550" in failed[0][2]
    usage = {r["name"]: r["used"] for r in __import__("marketing_cli.services.account.billing", fromlist=["x"]).resources(conn, ws)}
    assert usage["monthly_emails"] == 2 and usage["hourly_emails"] == 2


def test_links_are_tracked_once_per_url(conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
                                        smtp: SmtpServer) -> None:
    ws = workspace["id"]
    campaign = _world(conn, ws, ["ann@example.org"])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    links = conn.execute("SELECT url FROM email_links WHERE campaign_id = ?", (campaign["id"],)).fetchall()
    assert [r[0] for r in links] == ["https://shop.example.org/sale?a=1&b=2"]


@pytest.mark.parametrize(("change", "message"), [
    ({"schedule_type": "SOON"}, "Invalid schedule type. Must be 'NOW' or 'LATER'."),
    ({"schedule_type": "LATER"}, "Scheduled date and time is required when schedule type is 'LATER'."),
    ({"schedule_type": "LATER", "scheduled_at": "tomorrow"},
     "Invalid scheduled date format. Please provide a valid ISO 8601 UTC timestamp."),
    ({"schedule_type": "LATER", "scheduled_at": "2020-01-01T00:00:00Z"}, "Scheduled date must be in the future."),
    ({"schedule_type": "NOW", "ab_test": {"test_percentage": 50}}, "Only A/B testing campaigns take ab_test settings."),
])
def test_schedule_request_errors(conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
                                 change: dict[str, Any], message: str) -> None:
    campaign = _world(conn, workspace["id"], ["ann@example.org"])
    with pytest.raises(MktError) as err:
        email_schedule.schedule_campaign(conn, workspace["id"], campaign["id"], change)
    assert (err.value.status, err.value.message) == (400, message)
    assert conn.execute("SELECT status FROM campaigns").fetchone()[0] == "DRAFT"
    assert conn.execute("SELECT count(*) FROM jobs WHERE type LIKE 'email.%'").fetchone()[0] == 0


def test_schedule_readiness_errors(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    factories.contact(conn, ws, "ann@example.org")
    bare = factories.campaign(conn, ws)
    for bad in ("nope", "0" * 24):
        with pytest.raises(MktError, match="We could not find the campaign you are looking for."):
            email_schedule.schedule_campaign(conn, ws, bad, {"schedule_type": "NOW"})
    with pytest.raises(MktError, match="Please configure a sender identity before scheduling this campaign."):
        email_schedule.schedule_campaign(conn, ws, bare["id"], {"schedule_type": "NOW"})
    unverified = factories.ready_campaign(conn, ws, html=HTML)
    with pytest.raises(MktError, match="The sending domain example.com is not verified yet"):
        email_schedule.schedule_campaign(conn, ws, unverified["id"], {"schedule_type": "NOW"})


@pytest.mark.parametrize(("html", "message"), [
    ("<p>Hi {{contact.nickname}} <a href='{{unsubscribe_url}}'>u</a></p>",
     "Variant A uses merge tags this workspace does not define: {{contact.nickname}}."),
    ("<p>Hi there</p>", "Variant A has no unsubscribe link: add {{unsubscribe_url}} to its HTML."),
])
def test_content_checks_before_queueing(conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
                                        html: str, message: str) -> None:
    campaign = _world(conn, workspace["id"], ["ann@example.org"], html=html)
    with pytest.raises(MktError) as err:
        email_schedule.schedule_campaign(conn, workspace["id"], campaign["id"], {"schedule_type": "NOW"})
    assert err.value.message == message


def test_links_that_do_not_parse_are_a_content_problem(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    # The HTML cleaner already drops such hrefs; the review checks again whatever reached the variant.
    for url in ("https://exa mple.org/", "https://example.org:port/"):
        variant = {"type": "B", "subject": "Hello", "preview_text": None, "body_html": f'<a href="{url}">x</a> <a href="{{{{unsubscribe_url}}}}">u</a>'}
        assert email_schedule.content_problems(conn, workspace["id"], variant) == \
            [f"Variant B has a link that is not a valid URL: {url}"]


def test_no_recipients_and_monthly_allowance(conn: sqlite3.Connection, workspace: dict[str, Any],
                                             verified_dns: None) -> None:
    from marketing_cli.services.account import billing

    ws = workspace["id"]
    campaign = _world(conn, ws, [])
    with pytest.raises(MktError, match="no subscribed recipients"):
        email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    factories.contact(conn, ws, "a@example.org")
    factories.contact(conn, ws, "b@example.org")
    billing.set_allowance(conn, ws, "monthly_emails", 1)
    with pytest.raises(MktError) as err:
        email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert err.value.message.startswith("This campaign would send 2 emails, but your plan allows 1 more this month")


def test_later_waits_until_due_and_cancel_stops_it(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                   verified_dns: None, smtp: SmtpServer) -> None:
    ws = workspace["id"]
    campaign = _world(conn, ws, ["ann@example.org"])
    at = "2999-01-01T10:00:00.000Z"
    assert email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "LATER", "scheduled_at": at}) \
        == {"id": campaign["id"], "status": "QUEUED", "scheduled_at": at}
    jobs.run_due(conn)
    assert conn.execute("SELECT status FROM campaigns").fetchone()[0] == "QUEUED" and smtp.messages == []
    with pytest.raises(MktError, match="Only draft campaigns can be scheduled."):
        email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert email_schedule.cancel_campaign(conn, ws, campaign["id"]) == {"id": campaign["id"], "status": "CANCELLED"}
    with pytest.raises(MktError, match="Only queued or sending campaigns can be cancelled."):
        email_schedule.cancel_campaign(conn, ws, campaign["id"])
    conn.execute("UPDATE jobs SET run_at = ?", (clock.now(),))  # the due time comes: nothing is sent
    jobs.run_due(conn)
    assert smtp.messages == []


def test_cancel_mid_send_sends_nothing_more(conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
                                            smtp: SmtpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign = _world(conn, ws, [f"u{i}@example.org" for i in range(25)])
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "10")  # two rounds of 5 in flight
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    real_record, records = email_sender.record_round, []

    def record_then_cancel(*args: Any) -> int:
        temporary = real_record(*args)
        records.append(1)
        if len(records) == 2:  # the second round is recorded; the third was claimed before it
            email_schedule.cancel_campaign(conn, ws, campaign["id"])
        return temporary
    monkeypatch.setattr(email_sender, "record_round", record_then_cancel)
    real_deliver, calls = handoff.Send.deliver, []

    def deliver(run: Any, message: Any) -> Any:
        """The third round (already claimed while the second was in flight) reaches the
        transport only after the sender saw the cancel, or after 5 s if it never does."""
        calls.append(message["id"])
        if len(calls) > 10:
            run.halt.wait(5)
        return real_deliver(run, message)
    monkeypatch.setattr(handoff.Send, "deliver", deliver)
    jobs.run_due(conn)
    assert len(calls) == 15  # two rounds in flight: the third was handed to the pool, then given back
    assert len(smtp.messages) == 10
    counts = dict(conn.execute("SELECT status, count(*) FROM email_messages GROUP BY status").fetchall())
    assert counts == {"delivered": 10, "cancelled": 15}
    # The fourth round was claimed ahead with the first three (sender.CLAIM_AHEAD) and never
    # handed over: cancelled too, its reservations of the allowances given back.
    assert email_sender.CLAIM_AHEAD * 5 < 25
    assert conn.execute("SELECT count(*) FROM email_messages WHERE reserved_hour IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM email_messages WHERE status = 'cancelled' AND attempts = 0"
                        ).fetchone()[0] == 15


def test_a_runner_that_died_mid_round_resends_only_that_round(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                              verified_dns: None, smtp: SmtpServer) -> None:
    ws = workspace["id"]
    campaign = _world(conn, ws, [f"u{i}@example.org" for i in range(6)])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": campaign["id"]})  # frozen; the send job is queued
    rows = conn.execute("SELECT id, email FROM email_messages ORDER BY id").fetchall()
    campaign_stats.record_delivery(conn, rows[0][0])  # accepted by the server before the crash
    conn.execute("UPDATE email_messages SET status = 'sending' WHERE id IN (?, ?)", (rows[1][0], rows[2][0]))
    jobs.run_due(conn)
    assert sorted(m.rcpt_tos[0] for m in smtp.messages) == sorted(r[1] for r in rows[1:])
    assert conn.execute("SELECT status FROM campaigns").fetchone()[0] == "SENT"


def test_a_campaign_cancelled_while_its_dead_runner_held_a_round_ends_with_nothing_sending(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, smtp: SmtpServer) -> None:
    ws = workspace["id"]
    campaign = _world(conn, ws, [f"u{i}@example.org" for i in range(4)])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": campaign["id"]})
    ids = [r[0] for r in conn.execute("SELECT id FROM email_messages ORDER BY id")]
    conn.execute("UPDATE email_messages SET status = 'sending' WHERE id IN (?, ?)", ids[:2])  # the dead runner's
    email_schedule.cancel_campaign(conn, ws, campaign["id"])
    jobs.run_due(conn)  # the send job, taken over
    assert smtp.messages == []
    assert dict(conn.execute("SELECT status, count(*) FROM email_messages GROUP BY status").fetchall()) == {
        "cancelled": 4}


def test_ab_test_splits_the_test_share_and_sends_the_winner_to_the_rest(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, smtp: SmtpServer, cli: Any) -> None:

    ws = workspace["id"]
    for i in range(20):
        factories.contact(conn, ws, f"u{i:02}@example.org")
    created = {"id": factories.scheduled_ab_campaign(conn, ws, HTML, 40)}
    jobs.run_due(conn)
    subjects = [m.message["Subject"] for m in smtp.messages]
    assert len(subjects) == 20
    assert subjects[:8].count("Subject A") == 4 and subjects[:8].count("Subject B") == 4
    assert set(subjects[8:]) == {"Subject A"}  # no opens: a tie, A wins
    decision = json.loads(conn.execute("SELECT ab_test FROM campaigns").fetchone()[0])
    assert decision["winner"] == "A" and decision["rates"] == {"A": 0.0, "B": 0.0}
    shown = cli("campaigns", "show", created["id"]).stdout
    assert "40% test, winner by opens after 0 min" in shown and "A (A 0.0%, B 0.0%; decided" in shown
    assert conn.execute("SELECT status FROM campaigns").fetchone()[0] == "SENT"


def test_the_winner_is_the_higher_open_rate(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    created = factories.campaign(conn, ws, type_="AB_TESTING")
    ids = {v["type"]: v["id"] for v in created["variants"]}
    factories.contact(conn, ws, "a@example.org")
    factories.contact(conn, ws, "b@example.org")
    contacts = [r[0] for r in conn.execute("SELECT id FROM contacts ORDER BY email")]
    a = campaign_stats.add_messages(conn, created["id"], ids["A"], [(contacts[0], "a@example.org")])[0]
    b = campaign_stats.add_messages(conn, created["id"], ids["B"], [(contacts[1], "b@example.org")])[0]
    for message in (a, b):
        campaign_stats.record_delivery(conn, message)
    campaign_stats.record_open(conn, b)
    assert ab_winner.winner_rates(conn, created["id"], "OPENS") == {"A": 0.0, "B": 1.0}
    assert ab_winner.winner_rates(conn, created["id"], "CLICKS") == {"A": 0.0, "B": 0.0}


def test_transport_errors_pause_the_campaign_and_resume_sends_again(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.smtp_server import free_port

    ws = workspace["id"]
    campaign = _world(conn, ws, [f"u{i:02}@example.org" for i in range(25)])
    monkeypatch.setenv("MKT_SMTP_URL", f"smtp://127.0.0.1:{free_port()}?timeout=1")  # nothing listens there
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    row = conn.execute("SELECT status, status_detail FROM campaigns").fetchone()
    assert row[0] == "PAUSED" and row[1].startswith("Paused after 20 transport errors in a row")
    # rounds of 10, two in flight: the pause comes after the second round; the third (5) was
    # already handed to the pool, so it is tried and recorded before the pause (nothing left sending)
    assert conn.execute("SELECT count(*) FROM email_messages WHERE status = 'queued' AND retry_at IS NOT NULL"
                        ).fetchone()[0] == 25
    assert conn.execute("SELECT count(*) FROM email_messages WHERE status = 'sending'").fetchone()[0] == 0
    with pytest.raises(MktError, match="Only paused campaigns can be resumed."):
        email_schedule.resume_campaign(conn, ws, factories.campaign(conn, ws, name="other")["id"])
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        assert email_schedule.resume_campaign(conn, ws, campaign["id"]) == {"id": campaign["id"], "status": "SENDING"}
        conn.execute("UPDATE email_messages SET retry_at = NULL")  # the retry delay has passed
        jobs.run_due(conn)
    assert len(server.messages) == 25
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign["id"],)).fetchone()[0] == "SENT"


def test_without_an_smtp_url_messages_land_in_the_outbox(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                         verified_dns: None, tmp_path: Any) -> None:
    import os
    from pathlib import Path

    ws = workspace["id"]
    campaign = _world(conn, ws, ["ann@example.org", "bob@example.org"])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    files = sorted(Path(os.environ["MKT_OUTBOX"]).glob("*.eml"))
    assert len(files) == 2
    recipients = {email.message_from_bytes(f.read_bytes(), policy=policy.default)["To"] for f in files}
    assert recipients == {"ann@example.org", "bob@example.org"}
    assert campaign_stats.get_campaign_statistics(conn, ws, campaign["id"])["aggregate"]["delivered"] == 2


def test_the_freeze_numbers_recipients_in_the_campaigns_fixed_shuffle_with_their_providers(conn, workspace) -> None:
    """The message ids follow md5(campaign id || contact id) (first 60 bits), then the contact
    id: the same shuffle, hence the same ids and A/B split, on both engines; each message
    carries its mail domain's provider as stats.provider_of names it."""
    import hashlib

    ws = workspace["id"]
    emails = [f"r{i}@{domain}" for i, domain in enumerate(["gmail.com", "Hotmail.FR", "example.org", "ya.ru",
                                                           "me.com", "fastmail.fm", "zoho.eu", "aim.com"] * 3)]
    made = factories.sendable_campaign(conn, ws, emails)
    factories.send_now(conn, ws, made["id"])
    rows = conn.execute("SELECT contact_id, email, domain, provider FROM email_messages WHERE campaign_id = ?"
                        " ORDER BY id", (made["id"],)).fetchall()
    expected = sorted((r["contact_id"] for r in rows), key=lambda contact_id: (
        int(hashlib.md5((made["id"] + contact_id).encode()).hexdigest()[:15], 16), contact_id))
    assert [r["contact_id"] for r in rows] == expected and len(rows) == len(emails)
    assert {(r["domain"], r["provider"]) for r in rows} == {
        (campaign_stats.domain_of(e), campaign_stats.provider_of(campaign_stats.domain_of(e))) for e in emails}
    assert {r["provider"] for r in rows} == {"Gmail", "Outlook", "Other", "Yandex", "iCloud", "Fastmail", "Zoho",
                                             "Yahoo"}

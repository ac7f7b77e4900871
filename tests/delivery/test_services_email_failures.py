"""A failure stays with its message: a recipient whose message cannot be composed, one whose
SMTP conversation breaks, one the server refuses, one it defers, one with a non-ASCII
address; each in rounds with others, through a real SMTP server (aiosmtpd). Every other
recipient is mailed exactly once and the campaign ends SENT with the failure counted and
its reason recorded. Also: a job that fails records what it handed over before it is
retried (the crash rule for every failure), and a send job that fails for good leaves the
campaign PAUSED (or DRAFT) with the reason, never SENDING."""

from __future__ import annotations

import email
import smtplib
import sqlite3
from collections import Counter
from datetime import timedelta
from email import policy
from typing import Any

import dkim
import pytest

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.kernel.addresses import NO_SMTPUTF8
from marketing_cli.services.delivery import ab_winner, transport
from marketing_cli.services.delivery import sender as email_sender
from marketing_cli.services.email import campaigns, domains, preparation
from marketing_cli.services.email import schedule as email_schedule
from tests import factories
from tests.smtp_server import SmtpServer

HTML = '<p>Hi {{contact.first_name|there}}, <a href="{{unsubscribe_url}}">unsubscribe</a></p>'
OTHERS = [f"u{i}@example.org" for i in range(8)]  # with the one recipient under test: 3 full rounds of 3


@pytest.fixture(autouse=True)
def _rounds_of_three(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "3")


def _campaign(conn: sqlite3.Connection, ws: int, emails: list[str]) -> str:
    for i, address in enumerate(emails):
        factories.contact(conn, ws, address, first_name=f"N{i}")
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    return campaign["id"]


def _run_until_settled(conn: sqlite3.Connection, campaign_id: str, passes: int = 8) -> str:
    """Run the due jobs, letting every backoff (message retries, job retries) pass between passes,
    and a deferred message's 72 hours (MKT_SEND_GIVE_UP_HOURS) with them."""
    status = ""
    for _ in range(passes):
        gone = clock.format_ts(clock.utcnow() - timedelta(hours=73))
        conn.execute("UPDATE email_messages SET retry_at = NULL, deferred_since = ? WHERE retry_at IS NOT NULL",
                     (gone,))
        conn.execute("UPDATE jobs SET run_at = ? WHERE status = 'queued'", (clock.now(),))
        jobs.run_due(conn)
        status = conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0]
        if status in ("SENT", "PAUSED", "DRAFT", "CANCELLED"):
            break
    return status


def _mailed(server: SmtpServer) -> Counter[str]:
    return Counter(rcpt for m in server.messages for rcpt in m.rcpt_tos)


def _message(conn: sqlite3.Connection, address: str) -> sqlite3.Row:
    return conn.execute("SELECT status, attempts, failure_reason, bounce_class FROM email_messages WHERE email = ?",
                        (address,)).fetchone()


def _break_rcpt_of(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """smtplib raises something the transport does not expect, mid-conversation, for one address."""
    real = transport._Commands.rcpt  # (the transport's MAIL/RCPT/DATA over smtplib's)

    def rcpt(self: smtplib.SMTP, recip: str, options: Any = ()) -> Any:
        if recip == address:
            raise RuntimeError("the SMTP library broke on this recipient")
        return real(self, recip, options)
    monkeypatch.setattr(transport._Commands, "rcpt", rcpt)


# (recipient, server options, how it fails, attempts it takes, the recorded reason holds): a
# temporary failure is tried again until it has been deferred for 72 hours (here: one pass)
CASES = {
    # stored before addresses were validated as they are now: its domain has no IDNA form
    "compose": ("legacy@bü_cher.de", {}, None, 1, "the message could not be composed: ValueError: the domain"),
    "smtp": ("broken@example.org", {}, _break_rcpt_of, 2, "sending failed: RuntimeError: the SMTP library broke"),
    "refused": ("refused@example.net", {"refuse": ("refused@example.net",)}, None, 1,
                "the SMTP server refused the recipient: 550 5.1.1 No such user here"),
    "deferred": ("busy@example.net", {"defer": ("busy@example.net",)}, None, 2,
                 "the SMTP server refused the recipient: 451 4.3.0 Mailbox busy"),
}

# The class each failure is recorded with: a refusal by its reply, a failure without one by
# whether the transport gave up for good (compose) or after its retries (smtp).
BOUNCE_CLASSES = {"compose": "other_permanent", "smtp": "other_transient", "refused": "unknown_user",
                  "deferred": "other_transient"}


@pytest.mark.parametrize("case", list(CASES))
def test_one_failing_recipient_fails_alone_and_the_campaign_ends_sent(
        case: str, conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    address, options, breaker, attempts, reason = CASES[case]
    ws = workspace["id"]
    stored = "legacy@example.org" if case == "compose" else address
    campaign_id = _campaign(conn, ws, [*OTHERS[:4], stored, *OTHERS[4:]])
    if case == "compose":
        conn.execute("UPDATE contacts SET email = ? WHERE email = ?", (address, stored))
    if breaker is not None:
        breaker(monkeypatch, address)
    with SmtpServer(**options) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        assert _run_until_settled(conn, campaign_id) == "SENT"
    assert _mailed(server) == Counter(OTHERS)  # every other recipient exactly once, across every retry
    failed = _message(conn, address)
    assert (failed["status"], failed["attempts"]) == ("failed", attempts)
    assert failed["failure_reason"].startswith(reason), failed["failure_reason"]
    assert failed["bounce_class"] == BOUNCE_CLASSES[case]  # what the refusal says (bounce_classes.py)
    view = campaigns.get_campaign(conn, ws, campaign_id)
    assert (view["progress"]["delivered"], view["progress"]["failed"]) == (8, 1)
    assert view["status_detail"].startswith(f"1 of 9 messages failed: {reason}")
    assert [j["status"] for j in jobs.list_jobs(conn, job_type="email.send")].count("failed") == 0


def test_a_non_ascii_address_goes_out_with_smtputf8(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                    verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _campaign(conn, ws, [*OTHERS[:4], "gül.kowalski.6@example.com", *OTHERS[4:]])
    with SmtpServer(smtputf8=True) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        assert _run_until_settled(conn, campaign_id) == "SENT"
    assert _mailed(server) == Counter([*OTHERS, "gül.kowalski.6@example.com"])
    received = {m.rcpt_tos[0]: m for m in server.messages}
    utf8 = received["gül.kowalski.6@example.com"]
    assert utf8.smtputf8 and not received[OTHERS[0]].smtputf8  # SMTPUTF8 only where it is needed
    message = email.message_from_string(utf8.raw.decode("utf-8"), policy=policy.default)  # RFC 6532: UTF-8 headers
    assert message["To"].addresses[0].addr_spec == "gül.kowalski.6@example.com"
    records = {r["host"]: r["value"] for d in domains.list_domains(conn, ws)
               for r in domains.get_domain(conn, ws, d["id"])["dns_records"] if r["type"] == "TXT"}
    assert dkim.verify(utf8.raw, dnsfunc=lambda name, timeout=5: records.get(name.decode().rstrip("."), "").encode())
    assert campaigns.get_campaign(conn, ws, campaign_id)["status_detail"] is None


def test_without_smtputf8_the_non_ascii_address_alone_fails_with_its_reason(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _campaign(conn, ws, [*OTHERS[:4], "gül.kowalski.6@example.com", *OTHERS[4:]])
    with SmtpServer(smtputf8=False) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        assert _run_until_settled(conn, campaign_id, passes=1) == "SENT"  # failed at once: no retry needed
    assert _mailed(server) == Counter(OTHERS)
    failed = _message(conn, "gül.kowalski.6@example.com")
    assert (failed["status"], failed["attempts"], failed["failure_reason"]) == ("failed", 1, NO_SMTPUTF8)
    detail = campaigns.get_campaign(conn, ws, campaign_id)["status_detail"]
    assert detail == f"1 of 9 messages failed: {NO_SMTPUTF8} (1)."


def test_a_unicode_domain_goes_out_in_idna_form_without_smtputf8(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _campaign(conn, ws, ["ann@bücher.de", *OTHERS[:2]])
    assert conn.execute("SELECT email FROM contacts WHERE email LIKE 'ann@%'").fetchone()[0] == "ann@bücher.de"
    with SmtpServer(smtputf8=False) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        assert _run_until_settled(conn, campaign_id) == "SENT"
    received = {m.rcpt_tos[0]: m for m in server.messages}
    assert set(received) == {"ann@xn--bcher-kva.de", *OTHERS[:2]}
    assert received["ann@xn--bcher-kva.de"].raw.isascii()
    assert email.message_from_bytes(received["ann@xn--bcher-kva.de"].raw, policy=policy.default)["To"] == \
        "ann@xn--bcher-kva.de"


def _fail_once_at(monkeypatch: pytest.MonkeyPatch, target: Any, name: str, call: int) -> list[int]:
    """Make target.name raise on its `call`-th call only (an error of the database, a bug...)."""
    real, calls = getattr(target, name), []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == call:
            raise sqlite3.OperationalError("disk I/O error")
        return real(*args, **kwargs)
    monkeypatch.setattr(target, name, flaky)
    return calls


@pytest.mark.parametrize(("target", "name"), [(jobs, "heartbeat"), (email_sender, "record_round"),
                                              (email_sender, "claim_round")])
def test_a_job_that_fails_records_what_it_handed_over_so_its_retry_sends_none_of_it_again(
        target: Any, name: str, conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _campaign(conn, ws, [f"r{i}@example.org" for i in range(12)])
    preparation.preprocess(conn, {"campaign_id": campaign_id})
    # the second call: the job fails with a round (or two) in the pool's hands. Those the pool had
    # started are sent; those it had not are given back (how many depends on the threads' timing)
    calls = _fail_once_at(monkeypatch, target, name, 2)
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        first = jobs.run_due(conn)
        assert first["failed"] == 1  # the job failed mid-send...
        assert conn.execute("SELECT count(*) FROM email_messages WHERE status = 'sending'").fetchone()[0] == 0
        delivered = conn.execute("SELECT email FROM email_messages WHERE status = 'delivered'").fetchall()
        assert Counter(r[0] for r in delivered) == _mailed(server)  # ...with every message it handed over recorded
        if name != "claim_round":  # a failed claim may come before the pool started any of round one
            # (how far the pool got depends on its threads' timing: on a loaded machine the failure
            # came with 2 of round one handed over; it is mid-send as long as something was)
            assert len(server.messages) >= 1
        assert _run_until_settled(conn, campaign_id) == "SENT"  # ...and its retry finished it
    assert len(calls) > 2
    assert _mailed(server) == Counter(f"r{i}@example.org" for i in range(12))  # nobody twice


def test_a_bad_send_rate_pauses_the_campaign_with_the_reason_and_resume_finishes_it(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _campaign(conn, ws, OTHERS[:4])
    monkeypatch.setenv("MKT_SEND_RATE", "fast")  # set after the runner's start-up check, as a job sees it
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        jobs.run_due(conn)
        view = campaigns.get_campaign(conn, ws, campaign_id)
        assert view["status"] == "PAUSED" and server.messages == []
        assert view["status_detail"] == (
            "Sending stopped: the send job failed for good (MKT_SEND_RATE must be a number of messages per second "
            f"from 0 (unlimited) to 100,000, not 'fast'). Fix the cause, then resume the campaign (mkt campaigns "
            f"resume {campaign_id}).")
        monkeypatch.setenv("MKT_SEND_RATE", "0")
        email_schedule.resume_campaign(conn, ws, campaign_id)
        assert _run_until_settled(conn, campaign_id) == "SENT"
    assert _mailed(server) == Counter(OTHERS[:4])
    assert campaigns.get_campaign(conn, ws, campaign_id)["status_detail"] is None


def test_a_send_job_whose_worker_died_on_its_last_attempt_pauses_the_campaign(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None) -> None:
    ws = workspace["id"]
    campaign_id = _campaign(conn, ws, OTHERS[:2])
    preparation.preprocess(conn, {"campaign_id": campaign_id})
    conn.execute("UPDATE jobs SET status = 'running', attempts = max_attempts, lease_owner = 'dead',"
                 " lease_expires_at = '2000-01-01T00:00:00Z' WHERE type = 'email.send'")
    jobs.run_due(conn)
    view = campaigns.get_campaign(conn, ws, campaign_id)
    assert view["status"] == "PAUSED"
    assert view["status_detail"].startswith("Sending stopped: the send job failed for good (The worker running this "
                                            "job stopped before it finished (lease expired after attempt 5 of 5))")


def test_a_preparation_that_fails_for_good_goes_back_to_draft_with_the_reason(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _campaign(conn, ws, OTHERS[:3])
    real = preparation.freeze_audience

    def freeze_then_fail(*args: Any) -> int:
        real(*args)  # some messages written, then the job fails
        raise sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(preparation, "freeze_audience", freeze_then_fail)
    assert _run_until_settled(conn, campaign_id) == "DRAFT"
    view = campaigns.get_campaign(conn, ws, campaign_id)
    assert view["status_detail"] == ("The send could not be prepared: the job failed for good (OperationalError: "
                                     "disk I/O error). Nothing was sent; fix the cause and schedule the campaign again.")
    assert conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 0
    monkeypatch.setattr(preparation, "freeze_audience", real)
    email_schedule.schedule_campaign(conn, ws, campaign_id, {"schedule_type": "NOW"})  # a DRAFT again: schedulable
    assert campaigns.get_campaign(conn, ws, campaign_id)["status_detail"] is None


def test_an_ab_winner_job_that_fails_for_good_pauses_the_campaign_and_resume_sends_the_rest(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:

    ws = workspace["id"]
    for address in OTHERS:
        factories.contact(conn, ws, address)
    created = {"id": factories.scheduled_ab_campaign(conn, ws, HTML, 50)}
    real = ab_winner.winner_rates

    def broken(*args: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(ab_winner, "winner_rates", broken)
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        assert _run_until_settled(conn, created["id"]) == "PAUSED"
        assert len(server.messages) == 4  # the test share went out; the winner's send could not start
        assert campaigns.get_campaign(conn, ws, created["id"])["status_detail"].startswith(
            "Sending stopped: the send job failed for good (OperationalError: disk I/O error)")
        monkeypatch.setattr(ab_winner, "winner_rates", real)
        email_schedule.resume_campaign(conn, ws, created["id"])
        assert _run_until_settled(conn, created["id"]) == "SENT"
    assert _mailed(server) == Counter(OTHERS)

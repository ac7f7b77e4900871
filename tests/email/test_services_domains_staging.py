"""services/email/domains.py for a staging setup: reserved names (`news.example.test`) and the
operator's verification without DNS (`mark_domain_verified`, CLI only)."""

from __future__ import annotations

import logging

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.email import domains, schedule, senders
from tests import factories as f

RESERVED = ["news.example.test", "example.test", "mail.example", "x.invalid", "mail.localhost", "example.com",
            "news.example.org", "example.net", "printer.local", "home.arpa", "mail.corp.internal", "x.alt",
            "abc.onion", "NEWS.Example.TEST."]
NOT_RESERVED = ["example.co", "mytest.com", "test.com", "testing.io", "example.community", "notexample.com",
                "localhost.dev", "invalid.email", "local.news", "xn--bcher-kva.example.de"]


def error(fn, *args, **kwargs):
    with pytest.raises(MktError) as info:
        fn(*args, **kwargs)
    return info.value.status, info.value.message


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_names_are_accepted_and_said_so(conn, workspace, name):
    d = domains.add_domain(conn, workspace["id"], name)
    assert d["domain_name"] == name.lower().rstrip(".")
    assert (d["reserved_name"], d["verified"], d["verified_by"]) == (True, False, None)
    assert domains.get_domain(conn, workspace["id"], d["id"]) == d


@pytest.mark.parametrize("name", NOT_RESERVED)
def test_names_that_only_look_reserved_are_not(conn, workspace, name):
    assert domains.add_domain(conn, workspace["id"], name)["reserved_name"] is False


def test_single_reserved_labels_stay_refused(conn, workspace):
    for name in ("test", "localhost", "example", "invalid"):
        assert error(domains.add_domain, conn, workspace["id"], name) == (400, domains.INVALID_NAME)


def test_a_sender_and_a_campaign_on_a_test_domain_once_the_operator_marked_it(conn, workspace):
    """The reported defect: `domains add news.example.test` worked, `senders add ... news` did not."""
    ws = workspace["id"]
    f.contact(conn, ws, "ann@example.com")
    campaign = f.ready_campaign(conn, ws, domain="news.example.test",
                                html='<p>Hi</p><a href="{{unsubscribe_url}}">Unsubscribe</a>')
    assert campaign["sender_identity"]["domain_name"] == "news.example.test"
    domain_id = domains.list_domains(conn, ws)[0]["id"]
    assert error(schedule.schedule_campaign, conn, ws, campaign["id"], {"schedule_type": "NOW"}) == (
        400, schedule.UNVERIFIED.format(domain="news.example.test", domain_id=domain_id))
    marked = domains.mark_domain_verified(conn, ws, domain_id)
    assert (marked["verified"], marked["verified_by"]) == (True, "operator")
    assert [r["verified"] for r in marked["dns_records"]] == [False] * 4  # nothing was looked up
    assert senders.list_sender_identities(conn, ws)[0]["domain_verified"] is True
    queued = schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert queued["status"] == "QUEUED"


def test_the_mark_is_stored_logged_and_answered_like_get(conn, workspace, caplog):
    d = f.domain(conn, workspace["id"], "news.example.test")
    with caplog.at_level(logging.INFO, logger="mkt.domains"):
        marked = domains.mark_domain_verified(conn, workspace["id"], str(d["id"]))
    assert marked == domains.get_domain(conn, workspace["id"], d["id"])
    stored = conn.execute("SELECT verified, operator_verified_at FROM domains WHERE id = ?", (d["id"],)).fetchone()
    assert stored["verified"] == 1 and stored["operator_verified_at"].endswith("Z")
    [record] = [r for r in caplog.records if r.name == "mkt.domains"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (f"domain {d['id']} (news.example.test) of workspace {workspace['id']} marked "
                                   "verified by the operator, without a DNS check")


def test_the_mark_holds_whatever_dns_finds_until_undone(conn, workspace, dns_server, caplog):
    ws = workspace["id"]
    d = f.domain(conn, ws, "news.example.test")
    domains.mark_domain_verified(conn, ws, d["id"])
    checked = domains.verify_domain(conn, ws, d["id"])  # the DNS server publishes nothing
    assert (checked["verified"], checked["verified_by"]) == (True, "operator")
    dns_server.publish(d)
    checked = domains.verify_domain(conn, ws, d["id"])  # found in DNS too: DNS is what verifies it now
    assert (checked["verified"], checked["verified_by"]) == (True, "dns")
    dns_server.records.clear()
    checked = domains.verify_domain(conn, ws, d["id"])  # gone from DNS: the mark still holds
    assert (checked["verified"], checked["verified_by"]) == (True, "operator")
    with caplog.at_level(logging.INFO, logger="mkt.domains"):
        undone = domains.mark_domain_verified(conn, ws, d["id"], undo=True)
    assert (undone["verified"], undone["verified_by"]) == (False, None)
    assert caplog.records[-1].getMessage() == (f"domain {d['id']} (news.example.test) of workspace {ws}: the "
                                               "operator's verified mark was taken back; verified: no")
    assert conn.execute("SELECT operator_verified_at FROM domains").fetchone()[0] is None


def test_undo_leaves_a_domain_dns_verified_as_dns_found_it(conn, workspace, dns_server):
    ws = workspace["id"]
    d = f.verified_domain(conn, ws, dns_server)
    assert d["verified_by"] == "dns"
    assert domains.mark_domain_verified(conn, ws, d["id"])["verified_by"] == "dns"
    undone = domains.mark_domain_verified(conn, ws, d["id"], undo=True)
    assert (undone["verified"], undone["verified_by"]) == (True, "dns")
    again = domains.mark_domain_verified(conn, ws, d["id"], undo=True)  # nothing to take back: no change
    assert again == undone


def test_marking_needs_a_domain_of_the_workspace(conn, workspace):
    other = f.workspace(conn, "Other")
    theirs = f.domain(conn, other["id"], "their.example.test")
    for bad in ("abc", "0", None, True):
        assert error(domains.mark_domain_verified, conn, workspace["id"], bad) == (400, domains.INVALID_ID)
    assert error(domains.mark_domain_verified, conn, workspace["id"], theirs["id"]) == (404, domains.NOT_FOUND)
    assert error(domains.mark_domain_verified, conn, workspace["id"], 4242, undo=True) == (404, domains.NOT_FOUND)
    assert domains.get_domain(conn, other["id"], theirs["id"])["verified"] is False


def test_no_module_of_the_api_reaches_the_operators_mark():
    """CLI only: nothing in the HTTP face calls (or names) mark_domain_verified."""
    from pathlib import Path

    import marketing_cli.api

    api = Path(marketing_cli.api.__file__).parent
    assert [p.name for p in api.rglob("*.py") if "mark_domain_verified" in p.read_text(encoding="utf-8")] == []


def test_a_reply_to_and_a_test_address_on_the_workspaces_test_domain(conn, workspace, tmp_path, monkeypatch, cli):
    """The README's staging domain: a sender on `news.example.test` worked, but the same domain
    as a reply-to or a test address was refused with no reason. An address on one of the
    workspace's own sending domains is taken; any other special-use name is refused, and the
    error says which part is at fault (the detail: X-Error-Detail, the CLI's second line)."""
    from marketing_cli.services.delivery import test_emails
    from marketing_cli.services.email import campaigns

    ws = workspace["id"]
    reply_to = {"display_name": "Desk", "local_part": "desk", "domain_name": "news.example.test"}
    campaign = f.ready_campaign(conn, ws, domain="news.example.test", reply_to=reply_to)
    assert campaign["reply_to"] == reply_to
    monkeypatch.setenv("MKT_OUTBOX", str(tmp_path / "outbox"))
    sent = test_emails.send_test_email(conn, ws, campaign["id"], {"variant_type": "A",
                                                                  "recipient": "qa@news.example.test"})
    assert "qa@news.example.test" in sent
    sender_id = conn.execute("SELECT sender_identity_id FROM campaigns WHERE id = ?", (campaign["id"],)).fetchone()[0]
    elsewhere = {"sender": {"sender_identity_id": sender_id,
                            "reply_to": {"local_part": "desk", "domain_name": "other.example.test"}}}
    with pytest.raises(MktError) as refused:
        campaigns.configure_campaign(conn, ws, campaign["id"], elsewhere)
    assert (refused.value.status, refused.value.message) == (400, campaigns.REPLY_TO_INVALID)
    assert "special-use or reserved name" in refused.value.detail
    with pytest.raises(MktError) as bad_local:
        test_emails.send_test_email(conn, ws, campaign["id"], {"variant_type": "A",
                                                               "recipient": "q a@news.example.test"})
    assert (bad_local.value.status, bad_local.value.message) == (400, test_emails.RECIPIENT_INVALID)
    assert "before the @-sign" in bad_local.value.detail
    refused_cli = cli("campaigns", "test", campaign["id"], "--variant", "A", "--to", "qa@elsewhere.test")
    assert refused_cli.exit_code == 1
    assert refused_cli.stderr.splitlines()[:2] == [test_emails.RECIPIENT_INVALID, "'qa@elsewhere.test' is not a valid email "
                                           "address: The part after the @-sign is a special-use or reserved name "
                                           "that cannot be used with email."]

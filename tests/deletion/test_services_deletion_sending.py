"""Deleting templates, senders, domains, email and SMS campaigns and automations
(services/deletion/sending.py, campaigns.py): what goes, what stays in the workspace's totals,
what refuses (409 naming the user, nothing changed)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.deletion import campaigns as deletion
from marketing_cli.services.deletion import sending
from marketing_cli.services.email import campaigns, schedule
from marketing_cli.services.sms import campaigns as sms_campaigns
from marketing_cli.services.sms import ledger
from tests import factories as f


def refused(fn: Any, *args: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as err:
        fn(*args)
    return err.value.status, err.value.message


def count(conn: Any, table: str, where: str = "1 = 1", *params: Any) -> int:
    return conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]


@pytest.fixture
def ws(workspace: dict[str, Any]) -> int:
    return workspace["id"]


# --- templates, senders, domains ----------------------------------------------------------------

def test_a_template_goes_and_a_campaign_made_from_it_keeps_its_html(conn: Any, ws: int) -> None:
    template = f.code_template(conn, ws, "<p>Hi</p>", name="Plain")
    removal = sending.remove_template(conn, ws, template["id"])
    assert removal.data == {"id": template["id"], "deleted": True}
    assert removal.effects[0] == "Template Plain deleted."
    assert count(conn, "templates") == 0
    assert refused(sending.delete_template, conn, ws, template["id"]) == (404, "Not found.")
    assert refused(sending.delete_template, conn, ws, "x") == (404, "We could not find the template you are looking for.")


def test_a_sender_of_a_queued_campaign_is_refused_then_a_draft_loses_it(conn: Any, ws: int) -> None:
    campaign = f.queued_email_campaign(conn, ws)
    sender = conn.execute("SELECT sender_identity_id FROM campaigns WHERE id = ?", (campaign,)).fetchone()[0]
    assert refused(sending.delete_sender_identity, conn, ws, sender) == (
        409, f"This sender is used by campaign {campaign} (QUEUED): wait for it to finish or cancel it first.")
    domain = conn.execute("SELECT domain_id FROM sender_identities WHERE id = ?", (sender,)).fetchone()[0]
    assert refused(sending.delete_domain, conn, ws, domain) == (
        409, f"This domain is used by campaign {campaign} (QUEUED): wait for it to finish or cancel it first.")
    schedule.unschedule_campaign(conn, ws, campaign)
    removal = sending.remove_sender(conn, ws, sender)
    assert removal.effects == ["Sender news@example.com deleted.", "1 campaign that named it now show no sender."]
    assert campaigns.get_campaign(conn, ws, campaign)["sender_identity"] is None
    assert refused(sending.delete_sender_identity, conn, ws, sender) == (404, "Not found.")
    assert refused(sending.delete_sender_identity, conn, ws, "x") == (400, "Please provide a valid sender identity ID.")


def test_a_sender_an_active_flow_sends_from_is_refused(conn: Any, ws: int) -> None:
    sender = f.verified_sender(conn, ws)
    flow = f.step_flow(conn, ws, [f.email_step("hello", sender)])
    assert refused(sending.delete_sender_identity, conn, ws, sender) == (
        409, f"This sender is used by automation {flow['id']} (Flow, ACTIVE): archive the automation first.")


def test_a_domain_goes_with_its_records_and_senders(conn: Any, ws: int) -> None:
    domain = f.domain(conn, ws, "shop.example")
    f.sender(conn, ws, domain["id"], "news")
    f.sender(conn, ws, domain["id"], "hello")
    records = count(conn, "dns_records", "domain_id = ?", domain["id"])
    used = "SELECT used FROM usage_counters WHERE workspace_id = ? AND resource = 'domains'"
    assert conn.execute(used, (ws,)).fetchone()[0] == 1
    removal = sending.remove_domain(conn, ws, domain["id"])
    assert removal.effects == [f"Domain shop.example deleted with {records} DNS records and 2 senders."]
    assert count(conn, "dns_records") == count(conn, "sender_identities") == count(conn, "domains") == 0
    assert conn.execute(used, (ws,)).fetchone()[0] == 0
    assert refused(sending.delete_domain, conn, ws, domain["id"]) == (404, "Not found.")
    theirs = f.domain(conn, f.workspace(conn, "Other")["id"])
    assert refused(sending.delete_domain, conn, ws, theirs["id"]) == (404, "Not found.")


# --- email campaigns ---------------------------------------------------------------------------

def test_a_draft_campaign_goes_at_once(conn: Any, ws: int) -> None:
    draft = f.ready_campaign(conn, ws)
    assert deletion.delete_campaign(conn, ws, draft["id"]) == {"id": draft["id"], "deleted": True}
    assert count(conn, "campaigns") == count(conn, "campaign_variants") == 0
    assert refused(deletion.delete_campaign, conn, ws, draft["id"]) == (404, "Not found.")
    assert refused(deletion.delete_campaign, conn, ws, "nope") == (
        400, "We could not find the campaign you are looking for.")
    assert refused(deletion.delete_campaign, conn, ws, "") == (400, "Please provide a campaign ID.")


def test_a_queued_campaign_is_refused_and_a_sent_one_needs_archiving(conn: Any, ws: int) -> None:
    queued = f.queued_email_campaign(conn, ws)
    assert refused(deletion.delete_campaign, conn, ws, queued) == (
        409, "This campaign is QUEUED: wait for it to finish or cancel it first.")
    schedule.cancel_campaign(conn, ws, queued)
    assert deletion.delete_campaign(conn, ws, queued)["deleted"] is True  # cancelled before sending anything


def test_a_sent_campaign_is_archived_then_deleted_and_the_totals_stay(conn: Any, ws: int) -> None:
    sent = f.sent_email_campaign(conn, ws, ["a@example.com", "b@example.com"])
    assert campaigns.get_campaign(conn, ws, sent)["status"] == "SENT"
    usage = billing.resources(conn, ws)
    monthly = conn.execute("SELECT used FROM usage_counters WHERE workspace_id = ? AND resource = 'monthly_emails'",
                           (ws,)).fetchone()[0]
    totals = conn.execute("SELECT sum(total_delivered) FROM contacts").fetchone()[0]
    assert refused(deletion.delete_campaign, conn, ws, sent) == (409, "This campaign sent messages (SENT): archive it first.")
    assert count(conn, "email_messages", "campaign_id = ?", sent) == 2
    assert schedule.archive_campaign(conn, ws, sent) == {"id": sent, "status": "ARCHIVED"}
    assert refused(schedule.archive_campaign, conn, ws, sent) == (400, "Only sent or cancelled campaigns can be archived.")
    last = conn.execute("SELECT max(delivered_at) FROM email_messages WHERE campaign_id = ?", (sent,)).fetchone()[0]
    until = clock.format_ts(clock.parse_ts(last) + timedelta(days=30))
    assert refused(deletion.delete_campaign, conn, ws, sent) == (
        409, f"This campaign's last message went out at {last}: its unsubscribe links must keep working for 30 days,"
             f" until {until}. Delete it after that.")
    f.sent_long_ago(conn, sent)
    removal = deletion.remove_campaign(conn, ws, sent)
    assert removal.effects == ["Campaign Spring sale deleted with 2 messages, their clicks and statistics.",
                               "The workspace's usage counters keep what it sent."]
    for table in ("email_messages", "email_campaign_counters", "email_campaign_hours", "email_links",
                  "campaign_variants"):
        assert count(conn, table) == 0, table
    assert conn.execute("SELECT used FROM usage_counters WHERE workspace_id = ? AND resource = 'monthly_emails'",
                        (ws,)).fetchone()[0] == monthly == 2
    assert conn.execute("SELECT sum(total_delivered) FROM contacts").fetchone()[0] == totals
    assert billing.resources(conn, ws) == usage  # what GET /v1/workspace shows as used


def test_a_draft_cannot_be_archived_and_a_series_definition_is_refused(conn: Any, ws: int) -> None:
    draft = f.ready_campaign(conn, ws)
    assert refused(schedule.archive_campaign, conn, ws, draft["id"]) == (
        400, "Only sent or cancelled campaigns can be archived.")
    series = f.series_row(conn, ws, draft["id"])
    assert refused(deletion.delete_campaign, conn, ws, draft["id"]) == (
        409, f"This campaign is the definition of series {series} (ACTIVE): stop the series first"
             f" (mkt campaigns series stop {series}).")


# --- SMS campaigns -----------------------------------------------------------------------------

def test_an_sms_campaign_queued_completed_archived(conn: Any, ws: int) -> None:
    queued = f.queued_sms_campaign(conn, ws)
    assert refused(deletion.delete_sms_campaign, conn, ws, queued) == (
        409, "This SMS campaign is QUEUED: wait for it to finish or cancel it first.")
    done = f.completed_sms_campaign(conn, ws)
    assert sms_campaigns.get_campaign(conn, ws, done)["status"] == "COMPLETED"
    balance = ledger.show_balance(conn, ws)
    spent = ledger.spending(conn, ws)["spent"]
    assert refused(deletion.delete_sms_campaign, conn, ws, done) == (
        409, "This SMS campaign sent messages (COMPLETED): archive it first.")
    sms_campaigns.archive_campaign(conn, ws, done)
    removal = deletion.remove_sms_campaign(conn, ws, done)
    assert removal.data == {"id": done, "deleted": True}
    assert removal.effects[1] == "The SMS ledger keeps its charges and refunds: the balance does not change."
    assert count(conn, "sms_messages", "campaign_id = ?", done) == count(conn, "sms_outbox", "campaign_id = ?", done) == 0
    assert ledger.show_balance(conn, ws) == balance and ledger.spending(conn, ws)["spent"] == spent
    assert refused(deletion.delete_sms_campaign, conn, ws, done) == (404, "Not found.")
    assert refused(deletion.delete_sms_campaign, conn, ws, "zz") == (
        400, "We could not find the campaign you are looking for.")


# --- automations -------------------------------------------------------------------------------

def test_an_active_automation_is_archived_then_deleted_with_its_enrollments(conn: Any, ws: int) -> None:
    from marketing_cli.services.automations import flows, triggers

    f.tag(conn, ws, "vip")
    person = f.contact(conn, ws, "a@example.com")
    flow = f.step_flow(conn, ws, [{"id": "a", "type": "wait", "duration": {"days": 1}, "next": "b"},
                                  {"id": "b", "type": "add_tag", "tag": "vip"}])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": person["id"]})
    assert refused(deletion.delete_automation, conn, ws, flow["id"]) == (
        409, "This automation is ACTIVE: archive it first (the contacts in it exit).")
    flows.archive_automation(conn, ws, flow["id"])
    removal = deletion.remove_automation(conn, ws, flow["id"])
    assert removal.effects == ["Automation Flow deleted with 1 version, 1 enrollment and 0 messages of its steps."]
    for table in ("automations", "automation_versions", "automation_enrollments"):
        assert count(conn, table) == 0, table
    assert count(conn, "contacts") == 1
    assert refused(deletion.delete_automation, conn, ws, flow["id"]) == (404, "Not found.")


def test_an_archived_automation_whose_emails_went_out_lately_waits_30_days(conn: Any, ws: int) -> None:
    from marketing_cli.services.automations import flows, triggers

    person = f.contact(conn, ws, "a@example.com", first_name="Ann")
    flow = f.step_flow(conn, ws, [f.email_step("hello", f.verified_sender(conn, ws))])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": person["id"]})
    f.run_automations(conn)
    hidden = conn.execute("SELECT id FROM campaigns WHERE automation_id = ?", (flow["id"],)).fetchone()[0]
    assert count(conn, "email_messages", "campaign_id = ? AND delivered_at IS NOT NULL", hidden) == 1
    assert refused(deletion.delete_campaign, conn, ws, hidden) == (
        409, f"This campaign carries a step of automation {flow['id']}: it is deleted with the automation.")
    flows.archive_automation(conn, ws, flow["id"])
    status, message = refused(deletion.delete_automation, conn, ws, flow["id"])
    assert status == 409 and message.startswith("This automation's last message went out at ")
    f.sent_long_ago(conn, hidden)
    removal = deletion.remove_automation(conn, ws, flow["id"])
    assert removal.effects == ["Automation Flow deleted with 1 version, 1 enrollment and 1 message of its steps."]
    assert count(conn, "campaigns") == count(conn, "email_messages") == 0


def test_a_sender_of_an_archived_flow_is_free_once_its_step_emails_are_out(conn: Any, ws: int) -> None:
    from marketing_cli.services.automations import flows, triggers

    sender = f.verified_sender(conn, ws)
    person = f.contact(conn, ws, "a@example.com", first_name="Ann")
    flow = f.step_flow(conn, ws, [f.email_step("hello", sender)])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": person["id"]})
    f.run_automations(conn)
    flows.archive_automation(conn, ws, flow["id"])
    [hidden] = conn.execute("SELECT id FROM campaigns WHERE automation_id = ?", (flow["id"],)).fetchone()
    # as if the step's message had not gone out yet when the flow was archived
    conn.execute("UPDATE email_messages SET status = 'queued' WHERE campaign_id = ?", (hidden,))
    assert refused(sending.delete_sender_identity, conn, ws, sender) == (
        409, f"This sender is used by messages of automation {flow['id']} not yet sent: wait for them to go out.")
    conn.execute("UPDATE email_messages SET status = 'delivered' WHERE campaign_id = ?", (hidden,))
    assert sending.delete_sender_identity(conn, ws, sender) == {"id": sender, "deleted": True}

"""The send_sms step: one message per step run, rendered with the SMS merge rules, priced and
charged once to the ledger, handed over through the quiet-hours gate; every skip counted with
its reason; publishing checks the body's merge tags and the sender ID."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import flows, stats, steps, triggers
from marketing_cli.services.sms import campaigns as sms_campaigns
from marketing_cli.services.sms import ledger
from marketing_cli.storage.db import transaction
from tests import factories as f

US = "+14155550101"      # San Francisco: quiet hours 08:00-21:00 Pacific
BODY = "Hi {{contact.first_name|there}}, happy birthday from ACME! Reply STOP to opt out."


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, start: datetime) -> None:
        self.now = start
        monkeypatch.setattr(clock, "utcnow", lambda: self.now)

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch, datetime(2026, 11, 25, 20, 0, tzinfo=UTC))  # 12:00 in San Francisco


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any], fixed: Clock) -> dict[str, Any]:
    ws = workspace["id"]
    f.sms_ready(conn, ws, balance="10")
    ann = f.contact(conn, ws, "ann@example.com", first_name="Ann", phone_number=US)["id"]
    return {"ws": ws, "ann": ann}


def _flow(conn: Any, ws: int, body: str = BODY, **step: Any) -> dict[str, Any]:
    return f.automation(conn, ws, {"name": "Birthday", "triggers": [{"type": "manual"}],
                                   "steps": [{"id": "text", "type": "send_sms", "body": body, **step}]})


def _balance(conn: Any, ws: int) -> Decimal:
    return ledger.balance(conn, ws)


def test_a_text_is_written_charged_once_and_handed_over(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws)
    before = _balance(conn, ws)
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    assert f.run_automations(conn)["failed"] == 0
    rows = conn.execute("SELECT * FROM sms_messages").fetchall()
    assert len(rows) == 1
    m = rows[0]
    assert (m["phone"], m["country"], m["status"], m["capped"]) == (US, "US", "sent", 1)
    assert m["body"] == "Hi Ann, happy birthday from ACME! Reply STOP to opt out."
    outbox = conn.execute("SELECT sender, recipient, body FROM sms_outbox").fetchall()
    assert [tuple(r) for r in outbox] == [("ACME", US, m["body"])]
    price = ledger.from_units(m["price_units"])
    assert price > 0 and _balance(conn, ws) == before - price
    charges = conn.execute("SELECT amount, campaign_id FROM sms_ledger WHERE kind = 'charge'").fetchall()
    assert [(Decimal(r[0]), r[1]) for r in charges] == [(-price, m["campaign_id"])]
    run = conn.execute("SELECT outcome, sms_message_id FROM automation_step_runs").fetchone()
    assert tuple(run) == ("sent", m["id"])
    # The step's campaign is the automation's own: not in the SMS campaign list, reserves nothing.
    assert sms_campaigns.list_campaigns(conn, ws)["campaigns"] == []
    assert ledger.reserved(conn, ws) == 0
    step = stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"][0]
    assert step["sms"] == {"messages": 1, "sent": 1, "delivered": 0, "failed": 0, "held": 0, "pending": 0,
                           "cost": ledger.money(price)}
    assert step["outcomes"] == {"sent": 1} and step["skipped"] == {}
    f.run_automations(conn)  # nothing more happens
    assert conn.execute("SELECT count(*) FROM sms_outbox").fetchone()[0] == 1


def test_a_second_pass_uses_the_next_round_and_is_charged_again(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = f.automation(conn, ws, {"name": "Again", "reentry": "every_time", "triggers": [{"type": "manual"}],
                                   "steps": [{"id": "text", "type": "send_sms", "body": "Hello"}]})
    for key in ("a", "b"):
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"], "entry_key": key})
        f.run_automations(conn)
    assert conn.execute("SELECT count(*) FROM sms_outbox").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM sms_ledger WHERE kind = 'charge'").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM automation_sms_campaigns").fetchone()[0] == 2


def test_skips_are_counted_with_their_reasons_and_write_nothing(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws)
    no_phone = f.contact(conn, ws, "bob@example.com", first_name="Bob")["id"]
    stopped = f.contact(conn, ws, "cy@example.com", phone_number="+14155550102")["id"]
    conn.execute("UPDATE contacts SET sms_status = 'UNSUBSCRIBED' WHERE id = ?", (stopped,))
    foreign = f.contact(conn, ws, "di@example.com", phone_number="+525512345678")["id"]  # no price for MX
    conn.execute("DELETE FROM sms_rates WHERE country_code = 'MX'")
    for contact in (no_phone, stopped, foreign):
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact})
    before = _balance(conn, ws)
    f.run_automations(conn)
    assert conn.execute("SELECT count(*) FROM sms_messages").fetchone()[0] == 0
    assert _balance(conn, ws) == before
    step = stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"][0]
    assert step["skipped"] == {"the contact has no phone number": 1, "the contact is UNSUBSCRIBED for SMS": 1,
                               "no SMS price for the country of the number (MX)": 1}
    assert stats.automation_stats(conn, ws, flow["id"])["completed"] == 3  # the contacts go on


def test_insufficient_balance_skips_with_its_reason_and_charges_nothing(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws)
    ledger.append(conn, ws, "charge", -_balance(conn, ws), "spent elsewhere")
    conn.commit()
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    assert conn.execute("SELECT count(*) FROM sms_messages").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sms_campaigns").fetchone()[0] == 0  # rolled back with it
    assert _balance(conn, ws) == 0
    step = stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"][0]
    assert step["skipped"] == {"insufficient SMS balance": 1}


def test_quiet_hours_hold_the_text_until_the_window_opens(conn: Any, world: dict[str, Any], fixed: Clock,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.sms import quiet_hours

    monkeypatch.delenv(quiet_hours.TABLE_ENV)  # the shipped table (the suite's default has no rules)
    ws = world["ws"]
    fixed.now = datetime(2026, 11, 26, 7, 0, tzinfo=UTC)  # 23:00 in San Francisco
    flow = _flow(conn, ws)
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    m = conn.execute("SELECT status, held_until, held_reason FROM sms_messages").fetchone()
    assert m["status"] == "held" and m["held_until"] == "2026-11-26T16:00:00.000Z"  # 08:00 Pacific
    assert conn.execute("SELECT count(*) FROM sms_outbox").fetchone()[0] == 0
    assert stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"][0]["sms"]["held"] == 1
    fixed.now = datetime(2026, 11, 26, 16, 0, 1, tzinfo=UTC)
    f.run_automations(conn)
    assert conn.execute("SELECT status FROM sms_messages").fetchone()[0] == "sent"
    assert conn.execute("SELECT count(*) FROM sms_outbox").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM sms_ledger WHERE kind = 'charge'").fetchone()[0] == 1  # once


def test_a_step_run_twice_charges_once(conn: Any, world: dict[str, Any]) -> None:
    """Two runners reading the same due enrollment: the second finds the step run and stops."""
    ws = world["ws"]
    flow = _flow(conn, ws)
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    x = conn.execute("SELECT id FROM automation_enrollments").fetchone()[0]
    conn.execute("UPDATE automation_enrollments SET seq = 0 WHERE id = ?", (x,))
    conn.commit()
    steps.run_step(conn, x)
    conn.execute("UPDATE automation_enrollments SET seq = 0, status = 'active', step_id = 'text',"
                 " next_run_at = ? WHERE id = ?", (clock.now(), x))  # as a stale reader would see it
    conn.commit()
    assert steps.run_step(conn, x) is False
    assert conn.execute("SELECT count(*) FROM sms_messages").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM sms_ledger WHERE kind = 'charge'").fetchone()[0] == 1


def test_publishing_checks_the_body_and_the_sender_id(conn: Any, workspace: dict[str, Any], fixed: Clock) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws, sender=None)

    def publish(body: str) -> str:
        created = flows.create_automation(conn, ws, {"name": "x", "triggers": [{"type": "manual"}],
                                                     "steps": [{"id": "t", "type": "send_sms", "body": body}]})
        with pytest.raises(MktError) as err:
            flows.publish_automation(conn, ws, created["id"])
        assert err.value.status == 400
        assert flows.get_automation(conn, ws, created["id"])["status"] == "DRAFT"
        return err.value.message

    assert publish("Hello") == ("Step 't' (steps[0]) sends an SMS, but the workspace has no SMS sender ID: set one"
                                " with `mkt sms sender-id set`.")
    ledger.set_sender_id(conn, ws, "ACME")
    assert publish("Hi {{contact.nickname}}") == ("Step 't' (steps[0]): The merge tag {{contact.nickname}} is not a"
                                                  " contact field of this workspace.")
    assert publish("Bye {{unsubscribe_url}}").startswith("Step 't' (steps[0]): The merge tag {{unsubscribe_url}}"
                                                         " cannot be used in an SMS")


@pytest.mark.parametrize(("step", "message"), [
    ({"body": "x" * 1601}, "The member 'steps[0].body' must be 1600 characters or less."),
    ({"body": " "}, "The member 'steps[0].body' must not be empty."),
    ({"body": "Hi", "when_capped": "drop"}, "The member 'steps[0].when_capped' must be one of: skip, defer."),
    ({"body": "Hi", "from": "ACME"}, "Unknown member 'steps[0].from'"),
])
def test_a_malformed_sms_step_is_refused(conn: Any, workspace: dict[str, Any], step: dict[str, Any],
                                         message: str) -> None:
    with pytest.raises(MktError) as err:
        flows.create_automation(conn, workspace["id"], {"name": "x", "triggers": [{"type": "manual"}],
                                                        "steps": [{"id": "t", "type": "send_sms", **step}]})
    assert (err.value.status, err.value.message) == (400, message)
    assert flows.list_automations(conn, workspace["id"]) == []


def test_a_stop_reply_after_the_text_makes_the_next_step_skip(conn: Any, world: dict[str, Any],
                                                              fixed: Clock) -> None:
    ws = world["ws"]
    flow = f.automation(conn, ws, {"name": "Two", "triggers": [{"type": "manual"}], "steps": [
        {"id": "one", "type": "send_sms", "body": "One", "next": "w"},
        {"id": "w", "type": "wait", "duration": {"hours": 1}, "next": "two"},
        {"id": "two", "type": "send_sms", "body": "Two"}]})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    conn.execute("UPDATE contacts SET sms_status = 'UNSUBSCRIBED' WHERE id = ?", (world["ann"],))  # a STOP reply
    conn.commit()
    fixed.advance(hours=2)
    f.run_automations(conn)
    assert [r[0] for r in conn.execute("SELECT body FROM sms_outbox")] == ["One"]
    step = stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"][2]
    assert step["skipped"] == {"the contact is UNSUBSCRIBED for SMS": 1}


def test_a_cancelled_step_campaign_takes_no_more_messages(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = f.automation(conn, ws, {"name": "Again", "reentry": "every_time", "triggers": [{"type": "manual"}],
                                   "steps": [{"id": "text", "type": "send_sms", "body": "Hello"}]})
    bob = f.contact(conn, ws, "bob@example.com", phone_number="+14155550102")["id"]
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    first = conn.execute("SELECT campaign_id FROM automation_sms_campaigns").fetchone()[0]
    sms_campaigns.cancel_campaign(conn, ws, first)
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": bob})
    f.run_automations(conn)
    assert [r[0] for r in conn.execute("SELECT recipient FROM sms_outbox ORDER BY id")] == [US, "+14155550102"]
    assert conn.execute("SELECT count(*) FROM automation_sms_campaigns").fetchone()[0] == 2


def test_the_checkpointed_balance_is_the_ledgers_sum(conn: Any, world: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.automations import sms

    ws = world["ws"]
    monkeypatch.setattr(sms, "CHECKPOINT_EVERY", 3)
    flow = f.automation(conn, ws, {"name": "Many", "triggers": [{"type": "manual"}],
                                   "steps": [{"id": "text", "type": "send_sms", "body": "Hello"}]})
    phones = [f"+1415555{n:04d}" for n in range(200, 208)]
    for contact in f.sms_contacts(conn, ws, phones):
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact["id"]})
    ledger.add_balance(conn, ws, "1.25")
    f.run_automations(conn)
    assert conn.execute("SELECT count(*) FROM sms_ledger WHERE kind = 'charge'").fetchone()[0] == 8
    checkpoint = conn.execute("SELECT last_entry_id, total FROM sms_ledger_checkpoints").fetchone()
    assert checkpoint is not None and checkpoint[0] < conn.execute("SELECT max(id) FROM sms_ledger").fetchone()[0]
    assert sms.balance(conn, ws) == ledger.balance(conn, ws)
    assert Decimal(checkpoint[1]) == sum((Decimal(r[0]) for r in conn.execute(
        "SELECT amount FROM sms_ledger WHERE id <= ?", (checkpoint[0],))), Decimal(0))


def test_a_hand_over_that_gives_up_refunds_and_the_next_text_takes_a_new_round(conn: Any,
                                                                               world: dict[str, Any]) -> None:
    from marketing_cli.services.automations import sms

    ws = world["ws"]
    flow = f.automation(conn, ws, {"name": "Again", "reentry": "every_time", "triggers": [{"type": "manual"}],
                                   "steps": [{"id": "text", "type": "send_sms", "body": "Hello"}]})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    before = _balance(conn, ws)
    steps.run_due(conn)  # the message and its charge, not yet handed over
    assert _balance(conn, ws) < before
    campaign_id = conn.execute("SELECT campaign_id FROM sms_messages").fetchone()[0]
    with transaction(conn):  # as the job runner calls it: in the transaction that marks the job dead
        sms.hand_over_gave_up(conn, {"campaign_id": campaign_id}, "Twilio said no")
    assert conn.execute("SELECT status FROM sms_messages").fetchone()[0] == "cancelled"
    assert conn.execute("SELECT status FROM sms_campaigns").fetchone()[0] == "CANCELLED"
    assert _balance(conn, ws) == before
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"], "entry_key": "again"})
    f.run_automations(conn)
    assert [r[0] for r in conn.execute("SELECT body FROM sms_outbox")] == ["Hello"]
    assert conn.execute("SELECT count(*) FROM automation_sms_campaigns").fetchone()[0] == 2

"""Frequency caps per channel: counted from the message rows (through the partial index), a
capped step skipped or deferred as it says, deferred to the instant the oldest counted
message leaves the window; the double opt-in confirmation exempt."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import caps, stats, triggers
from tests import factories as f
from tests.engines import query_plan

START = datetime(2026, 11, 25, 18, 0, tzinfo=UTC)


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = START
        monkeypatch.setattr(clock, "utcnow", lambda: self.now)

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any], fixed: Clock) -> dict[str, Any]:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    return {"ws": ws, "sender": f.verified_sender(conn, ws),
            "ann": f.contact(conn, ws, "ann@example.com", first_name="Ann", phone_number="+14155550101")["id"]}


def _emails(conn: Any) -> list[str]:
    return [r[0] for r in conn.execute("SELECT v.subject FROM email_messages m JOIN campaign_variants v"
                                       " ON v.id = m.variant_id ORDER BY m.id")]


def _three_emails(sender: int, **extra: Any) -> list[dict[str, Any]]:
    return [f.email_step("one", sender, "w1", **extra), {"id": "w1", "type": "wait", "duration": {"hours": 1},
                                                         "next": "two"},
            f.email_step("two", sender, "w2", **extra), {"id": "w2", "type": "wait", "duration": {"hours": 1},
                                                         "next": "three"},
            f.email_step("three", sender, **extra)]


def test_the_setting_is_read_and_written(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    assert caps.get_caps(conn, ws) == {"email": None, "sms": None}
    got = caps.set_caps(conn, ws, {"email": {"max_messages": 2, "window": {"hours": 36}}})
    assert got == {"email": {"max_messages": 2, "window": {"days": 1, "hours": 12}, "window_seconds": 129600},
                   "sms": None}
    got = caps.set_caps(conn, ws, {"sms": {"max_messages": 1, "window": {"days": 7}}})
    assert got["email"]["max_messages"] == 2 and got["sms"]["window_seconds"] == 7 * 86400
    assert caps.set_caps(conn, ws, {"email": None})["email"] is None


@pytest.mark.parametrize(("body", "message"), [
    ({}, caps.BAD_BODY),
    ([], caps.BAD_BODY),
    ({"push": None}, "Unknown member 'push'"),
    ({"email": 3}, f"The member 'email' must be an object or null. {caps.BAD_BODY}"),
    ({"email": {"max_messages": 0, "window": {"days": 1}}},
     "The member 'email.max_messages' must be a whole number from 1 to 1000."),
    ({"email": {"max_messages": True, "window": {"days": 1}}},
     "The member 'email.max_messages' must be a whole number from 1 to 1000."),
    ({"sms": {"max_messages": 1, "window": {"days": 400}}},
     "The duration 'sms.window' must be more than 0 and at most 366 days."),
    ({"sms": {"max_messages": 1}},
     "The member 'sms.window' must be an object such as {\"days\": 1} (days, hours, minutes, seconds)."),
    ({"sms": {"max_messages": 1, "window": {"days": 1}, "per": "contact"}}, "Unknown member 'sms.per'"),
    ({"email": {"max_messages": 1, "window": {"days": 1}}, "sms": {"max_messages": -1, "window": {"days": 1}}},
     "The member 'sms.max_messages' must be a whole number from 1 to 1000."),
])
def test_a_bad_setting_is_refused_and_writes_nothing(conn: Any, workspace: dict[str, Any], body: Any,
                                                     message: str) -> None:
    with pytest.raises(MktError) as err:
        caps.set_caps(conn, workspace["id"], body)
    assert (err.value.status, err.value.message) == (400, message)
    assert caps.get_caps(conn, workspace["id"]) == {"email": None, "sms": None}


def test_a_deferred_email_goes_when_the_oldest_leaves_the_window(conn: Any, world: dict[str, Any],
                                                                 fixed: Clock) -> None:
    ws = world["ws"]
    caps.set_caps(conn, ws, {"email": {"max_messages": 2, "window": {"days": 1}}})
    flow = f.automation(conn, ws, {"name": "Three", "triggers": [{"type": "manual"}],
                                   "steps": _three_emails(world["sender"])})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    for _ in range(3):
        f.run_automations(conn)
        fixed.advance(hours=1, seconds=1)
    assert _emails(conn) == ["Step one", "Step two"]
    x = conn.execute("SELECT step_id, next_run_at FROM automation_enrollments").fetchone()
    assert tuple(x) == ("three", "2026-11-26T18:00:00.000Z")  # "one" was written at 18:00
    fixed.now = datetime(2026, 11, 26, 17, 59, tzinfo=UTC)
    f.run_automations(conn)
    assert len(_emails(conn)) == 2
    fixed.now = datetime(2026, 11, 26, 18, 0, tzinfo=UTC)
    f.run_automations(conn)
    assert _emails(conn) == ["Step one", "Step two", "Step three"]
    flow_stats = stats.automation_stats(conn, ws, flow["id"])
    three = flow_stats["versions"][0]["steps"][4]
    assert three["deferred"] == {"frequency cap (email)": 1} and three["outcomes"] == {"deferred": 1, "sent": 1}
    assert three["runs"] == 1 and flow_stats["completed"] == 1


def test_a_capped_step_that_says_skip_is_skipped_and_counted(conn: Any, world: dict[str, Any],
                                                             fixed: Clock) -> None:
    ws = world["ws"]
    caps.set_caps(conn, ws, {"email": {"max_messages": 1, "window": {"days": 1}}})
    flow = f.automation(conn, ws, {"name": "Three", "triggers": [{"type": "manual"}],
                                   "steps": _three_emails(world["sender"], when_capped="skip")})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    for _ in range(3):
        f.run_automations(conn)
        fixed.advance(hours=1, seconds=1)
    assert _emails(conn) == ["Step one"]
    by_step = {s["step_id"]: s for s in stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"]}
    assert by_step["two"]["skipped"] == by_step["three"]["skipped"] == {"frequency cap (email)": 1}
    assert stats.automation_stats(conn, ws, flow["id"])["completed"] == 1


def test_the_confirmation_email_is_exempt_and_not_counted(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    caps.set_caps(conn, ws, {"email": {"max_messages": 1, "window": {"days": 1}}})
    bob = f.contact(conn, ws, "bob@example.com", status="UNCONFIRMED")["id"]
    f.automation(conn, ws, {"name": "Capped", "triggers": [{"type": "manual"}],
                            "steps": [f.email_step("before", world["sender"])]})
    first = conn.execute("SELECT id FROM automations").fetchone()[0]
    triggers.enroll_contact(conn, ws, first, {"contact_id": bob})
    conn.execute("UPDATE contacts SET status = 'SUBSCRIBED' WHERE id = ?", (bob,))  # to get one email first
    conn.commit()
    f.run_automations(conn)
    conn.execute("UPDATE contacts SET status = 'UNCONFIRMED' WHERE id = ?", (bob,))
    conn.commit()
    opt_in = f.automation(conn, ws, {"name": "Opt-in", "triggers": [{"type": "manual"}], "steps": [
        f.email_step("confirm", world["sender"], confirmation=True, when_capped="skip",
                     html='<p><a href="{{confirmation_url}}">Confirm</a></p>')]})
    triggers.enroll_contact(conn, ws, opt_in["id"], {"contact_id": bob})
    f.run_automations(conn)
    assert _emails(conn) == ["Step before", "Step confirm"]  # over the cap, and still sent
    assert [tuple(r) for r in conn.execute("SELECT capped FROM email_messages ORDER BY id")] == [(1,), (None,)]


def test_an_sms_cap_counts_sms_only(conn: Any, world: dict[str, Any], fixed: Clock) -> None:
    ws = world["ws"]
    caps.set_caps(conn, ws, {"sms": {"max_messages": 1, "window": {"hours": 12}}})
    flow = f.automation(conn, ws, {"name": "Mixed", "triggers": [{"type": "manual"}], "steps": [
        {"id": "t1", "type": "send_sms", "body": "One", "next": "mail"},
        f.email_step("mail", world["sender"], "t2"),
        {"id": "t2", "type": "send_sms", "body": "Two", "when_capped": "skip", "next": "t3"},
        {"id": "t3", "type": "send_sms", "body": "Three"}]})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    assert [r[0] for r in conn.execute("SELECT body FROM sms_outbox")] == ["One"]
    assert _emails(conn) == ["Step mail"]
    x = conn.execute("SELECT step_id, next_run_at FROM automation_enrollments").fetchone()
    assert tuple(x) == ("t3", "2026-11-26T06:00:00.000Z")
    fixed.now = datetime(2026, 11, 26, 6, 0, tzinfo=UTC)
    f.run_automations(conn)
    assert [r[0] for r in conn.execute("SELECT body FROM sms_outbox")] == ["One", "Three"]
    assert conn.execute("SELECT count(*) FROM sms_ledger WHERE kind = 'charge'").fetchone()[0] == 2
    by_step = {s["step_id"]: s for s in stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"]}
    assert by_step["t2"]["skipped"] == {"frequency cap (sms)": 1}
    assert by_step["t3"]["deferred"] == {"frequency cap (sms)": 1}


def test_campaign_messages_are_not_counted(conn: Any, world: dict[str, Any]) -> None:
    from marketing_cli.services.email.automated import create_automated_campaign, queue_automated_message

    ws = world["ws"]
    caps.set_caps(conn, ws, {"email": {"max_messages": 1, "window": {"days": 1}}})
    campaign_id = create_automated_campaign(conn, ws, automation_id=0, name="News", sender_id=world["sender"],
                                            subject="News", preview_text="", html="<p>News</p>")
    queue_automated_message(conn, campaign_id, world["ann"], "ann@example.com")  # as a campaign writes it
    conn.commit()
    assert caps.capped_until(conn, ws, world["ann"], "email") is None


@pytest.mark.parametrize("table", ["email_messages", "sms_messages"])
def test_the_count_reads_the_partial_index(conn: Any, table: str) -> None:
    plan = query_plan(conn, caps.COUNT_SQL.format(table=table), ("c", "2026-01-01"))
    # SQLite: SEARCH <table> USING INDEX <table>_capped; PostgreSQL: Index Scan using <table>_capped.
    assert re.search(rf"USING INDEX {table}_capped|Index (Only )?Scan using {table}_capped", plan), plan
    assert "SCAN" not in plan and "Seq Scan" not in plan, plan

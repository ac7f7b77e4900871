"""Triggers: the event log through the cursor, each trigger kind, re-entry, replays, crashes,
imports, backfill and enrolling by hand."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import flows, triggers
from marketing_cli.services.contacts import events, records
from tests import factories as f


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    return {"ws": ws, "vip": f.tag(conn, ws, "vip"), "city": f.field(conn, ws, "city"),
            "ann": f.contact(conn, ws, "ann@example.com")["id"], "bob": f.contact(conn, ws, "bob@example.com")["id"]}


def _flow(conn: Any, ws: int, trigger: dict[str, Any], **extra: Any) -> dict[str, Any]:
    doc = {"name": "Flow", "triggers": [trigger], "steps": [{"id": "w", "type": "wait", "duration": {"days": 30}}],
           **extra}
    return f.automation(conn, ws, doc)


def _enrolled(conn: Any, automation_id: int) -> list[tuple[str, str]]:
    return [tuple(r) for r in conn.execute("SELECT contact_id, entry_key FROM automation_enrollments"
                                           " WHERE automation_id = ? ORDER BY id", (automation_id,))]


def _track(conn: Any, ws: int, email: str, name: str, **properties: Any) -> None:
    events.track_event(conn, ws, {"email_address": email, "event_name": name, "properties": properties})


def test_each_trigger_kind_enrolls_the_matching_contact_only(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    billing_allow(conn, ws)
    tagged = _flow(conn, ws, {"type": "tag_added", "tag": "vip"})
    untagged = _flow(conn, ws, {"type": "tag_removed", "tag": "vip"})
    moved = _flow(conn, ws, {"type": "field_updated", "field": "city", "to": "Rome"})
    bought = _flow(conn, ws, {"type": "custom_event", "name": "purchase", "properties": {"plan": "pro"}})
    pending = _flow(conn, ws, {"type": "subscription_pending"})
    records.add_contact_tags(conn, ws, world["ann"], {"tag_ids": [world["vip"]]})
    records.remove_contact_tags(conn, ws, world["ann"], {"tag_ids": [world["vip"]]})
    records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "fields": {"city": "Paris"}})
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "fields": {"city": "Rome"}})
    _track(conn, ws, "bob@example.com", "purchase", plan="basic")
    _track(conn, ws, "ann@example.com", "purchase", plan="pro", total=10)
    carl = records.create_contact(conn, ws, {"status": "UNCONFIRMED",
                                           "fields": {"email_address": "carl@example.com"}})["id"]
    assert triggers.read_all_events(conn)["enrolled"] == 5
    assert _enrolled(conn, tagged["id"]) == [(world["ann"], "once")]
    assert _enrolled(conn, untagged["id"]) == [(world["ann"], "once")]
    assert _enrolled(conn, moved["id"]) == [(world["ann"], "once")]
    assert _enrolled(conn, bought["id"]) == [(world["ann"], "once")]
    assert _enrolled(conn, pending["id"]) == [(carl, "once")]


@pytest.mark.parametrize(("expected", "sent"), [
    (True, 5), (True, 5.0), (False, "5"), (False, 6), (False, None), (False, True),
])
def test_a_property_matches_by_json_type_and_value_on_both_engines(conn: Any, world: dict[str, Any],
                                                                   expected: bool, sent: Any) -> None:
    """The rules of SQLite's json_extract (and of the simulator's Python ==) on both engines: a
    number matches the same number however written, never the string of it. PostgreSQL
    compared the values as text, which matched "5" and refused 5.0 (schema step 29)."""
    ws = world["ws"]
    billing_allow(conn, ws)
    seats = _flow(conn, ws, {"type": "custom_event", "name": "upgrade", "properties": {"seats": 5}})
    text = _flow(conn, ws, {"type": "custom_event", "name": "upgrade", "properties": {"code": "5"}})
    nothing = _flow(conn, ws, {"type": "custom_event", "name": "upgrade", "properties": {"coupon": None}})
    _track(conn, ws, "ann@example.com", "upgrade", seats=sent, code=sent)
    triggers.read_all_events(conn)
    assert bool(_enrolled(conn, seats["id"])) is expected
    assert bool(_enrolled(conn, text["id"])) is (sent == "5")
    assert _enrolled(conn, nothing["id"]) == [(world["ann"], "once")]  # null: the member left out matches


def test_a_field_update_matches_from_and_to_by_value(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    f.field(conn, ws, "score", "NUMBER")
    rose = _flow(conn, ws, {"type": "field_updated", "field": "score", "from": 5, "to": 6.5})
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "fields": {"score": 5.0}})
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "fields": {"score": 6.50}})
    records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "fields": {"score": 4}})
    records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "fields": {"score": 6.5}})
    triggers.read_all_events(conn)
    assert _enrolled(conn, rose["id"]) == [(world["ann"], "once")]


def billing_allow(conn: Any, ws: int) -> None:
    from marketing_cli.services.account import billing

    billing.set_allowance(conn, ws, "automations", 20)


def test_events_before_the_first_active_flow_enroll_nobody(conn: Any, world: dict[str, Any]) -> None:
    records.add_contact_tags(conn, world["ws"], world["ann"], {"tag_ids": [world["vip"]]})
    flow = _flow(conn, world["ws"], {"type": "tag_added", "tag": "vip"})
    triggers.read_all_events(conn)
    assert _enrolled(conn, flow["id"]) == []


@pytest.mark.parametrize("reentry", ["once", "every_time"])
def test_an_event_read_twice_enrolls_once(conn: Any, world: dict[str, Any], reentry: str) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "tag_added", "tag": "vip"}, reentry=reentry)
    start = conn.execute("SELECT last_event_id FROM automation_cursors WHERE workspace_id = ?", (ws,)).fetchone()[0]
    records.add_contact_tags(conn, ws, world["ann"], {"tag_ids": [world["vip"]]})
    triggers.read_all_events(conn)
    conn.execute("UPDATE automation_enrollments SET status = 'completed'")  # it left: re-entry would be allowed
    conn.execute("UPDATE automation_cursors SET last_event_id = ?", (start,))  # the same event, replayed
    assert triggers.read_all_events(conn)["enrolled"] == 0
    assert len(_enrolled(conn, flow["id"])) == 1


def test_every_time_enrolls_again_after_the_contact_left(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "custom_event", "name": "visit"}, reentry="every_time")
    _track(conn, ws, "ann@example.com", "visit")
    _track(conn, ws, "ann@example.com", "visit")  # while she is in the flow: no second entry
    triggers.read_all_events(conn)
    assert len(_enrolled(conn, flow["id"])) == 1
    conn.execute("UPDATE automation_enrollments SET status = 'completed'")
    _track(conn, ws, "ann@example.com", "visit")
    triggers.read_all_events(conn)
    assert len(_enrolled(conn, flow["id"])) == 2


def test_cooldown_waits_its_time(conn: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "custom_event", "name": "visit"}, reentry="cooldown", cooldown={"days": 7})
    start = clock.utcnow()
    _track(conn, ws, "ann@example.com", "visit")
    triggers.read_all_events(conn)
    conn.execute("UPDATE automation_enrollments SET status = 'completed'")
    monkeypatch.setattr(clock, "utcnow", lambda: start + timedelta(days=3))
    _track(conn, ws, "ann@example.com", "visit")
    triggers.read_all_events(conn)
    assert len(_enrolled(conn, flow["id"])) == 1
    monkeypatch.setattr(clock, "utcnow", lambda: start + timedelta(days=8))
    _track(conn, ws, "ann@example.com", "visit")
    triggers.read_all_events(conn)
    assert len(_enrolled(conn, flow["id"])) == 2


def test_a_crash_before_the_commit_keeps_the_cursor_and_enrolls_nobody(conn: Any, world: dict[str, Any],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "tag_added", "tag": "vip"})
    before = conn.execute("SELECT last_event_id FROM automation_cursors").fetchone()[0]
    records.add_contact_tags(conn, ws, world["ann"], {"tag_ids": [world["vip"]]})
    monkeypatch.setattr(triggers, "_WAITS", "SELECT crash FROM nowhere")  # fails after the INSERT ... SELECT ran
    with pytest.raises(Exception):  # noqa: B017 - any database error
        triggers.read_events(conn, ws)
    assert conn.execute("SELECT last_event_id FROM automation_cursors").fetchone()[0] == before
    assert _enrolled(conn, flow["id"]) == []
    monkeypatch.undo()
    assert triggers.read_events(conn, ws)["enrolled"] == 1
    assert _enrolled(conn, flow["id"]) == [(world["ann"], "once")]


def test_imports_enroll_nobody_and_backfill_counts_first(conn: Any, world: dict[str, Any]) -> None:
    from marketing_cli.services.contacts import bulk

    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "manual"})
    csv = "email_address,tags\ncara@example.com,vip\ndan@example.com,vip\n"
    bulk.import_contacts(conn, ws, io.StringIO(csv), tag_ids=[world["vip"]], default_status="UNCONFIRMED")
    triggers.read_all_events(conn)
    assert _enrolled(conn, flow["id"]) == []
    total = conn.execute("SELECT count(*) FROM contacts WHERE workspace_id = ?", (ws,)).fetchone()[0]
    counted = triggers.backfill(conn, ws, flow["id"], {"dry_run": True})
    assert counted == {"automation_id": flow["id"], "count": total, "enrolled": 0, "dry_run": True}
    assert _enrolled(conn, flow["id"]) == []
    done = triggers.backfill(conn, ws, flow["id"], {})
    assert done["enrolled"] == total and len(_enrolled(conn, flow["id"])) == total
    assert triggers.backfill(conn, ws, flow["id"], {"dry_run": True})["count"] == 0


def test_backfill_of_a_segment(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "manual"})
    records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "fields": {"city": "Paris"}})
    segment = f.segment(conn, ws, "Parisians", {"condition": "AND", "filters": [
        {"type": "field", "field_id": world["city"], "operator": "eq", "value": "Paris"}]})
    assert triggers.backfill(conn, ws, flow["id"], {"segment_id": segment["id"]})["enrolled"] == 1
    assert _enrolled(conn, flow["id"]) == [(world["bob"], "once")]


def test_enroll_by_hand(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "manual"})
    entered = triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    assert entered["status"] == "active" and entered["version"] == 1 and entered["step_id"] == "w"
    with pytest.raises(MktError) as caught:
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    assert (caught.value.status, caught.value.message) == (409, triggers.ALREADY_IN)
    conn.execute("UPDATE automation_enrollments SET status = 'completed'")
    with pytest.raises(MktError) as caught:
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    assert caught.value.message == triggers.ONCE_ONLY
    with pytest.raises(MktError) as caught:
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": "0" * 24})
    assert caught.value.status == 404
    tagged = _flow(conn, ws, {"type": "tag_added", "tag": "vip"})
    with pytest.raises(MktError) as caught:
        triggers.enroll_contact(conn, ws, tagged["id"], {"contact_id": world["bob"]})
    assert caught.value.message == triggers.NO_MANUAL


def test_an_entry_key_makes_enrolling_by_hand_idempotent(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "manual"}, reentry="every_time")
    first = triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"], "entry_key": "order-1"})
    conn.execute("UPDATE automation_enrollments SET status = 'completed'")
    again = triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"], "entry_key": "order-1"})
    assert again["id"] == first["id"] and len(_enrolled(conn, flow["id"])) == 1


def test_a_paused_flow_takes_no_one_in(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _flow(conn, ws, {"type": "tag_added", "tag": "vip"})
    flows.pause_automation(conn, ws, flow["id"])
    records.add_contact_tags(conn, ws, world["ann"], {"tag_ids": [world["vip"]]})
    triggers.read_all_events(conn)
    flows.resume_automation(conn, ws, flow["id"])
    triggers.read_all_events(conn)
    assert _enrolled(conn, flow["id"]) == []

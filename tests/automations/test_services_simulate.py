"""`simulate`: a flow walked for one contact on a simulated clock (UTC and local times, waits,
events, timeouts, splits, goals, quiet hours, caps) that sends nothing and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.automations import simulate
from marketing_cli.services.automations.simulate.replay import replay
from marketing_cli.services.automations.simulate.times import contact_zone, next_local_time
from marketing_cli.services.automations.simulate.walk import CONTACT_NOT_FOUND, Walk
from marketing_cli.services.sms import quiet_hours
from marketing_cli.storage.db import is_postgresql
from tests import factories as f

# A Wednesday, 07:00 UTC: 08:00 in Paris (winter), 02:00 in New York.
START = datetime(2026, 1, 14, 7, 0, tzinfo=UTC)


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(clock, "utcnow", lambda: START)
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "automations", 20)
    f.sms_ready(conn, ws)
    f.field(conn, ws, "timezone")
    return {"ws": ws, "sender": f.verified_sender(conn, ws), "vip": f.tag(conn, ws, "vip"),
            "ann": f.contact(conn, ws, "ann@example.com", first_name="Ann", timezone="Europe/Paris")["id"]}


def _flow(conn: Any, ws: int, steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return f.automation(conn, ws, {"name": "Flow", "triggers": [{"type": "manual"}], "steps": steps, **extra})


def _counts(conn: Any) -> dict[str, int]:
    if is_postgresql(conn):
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    tables = [r[0] for r in conn.execute(sql)]
    return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}


def _welcome(w: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {**f.email_step("hello", w["sender"], "wait-2d"), "subject": "Welcome, {{contact.first_name}}"},
        {"id": "wait-2d", "type": "wait", "duration": {"days": 2}, "next": "vip?"},
        {"id": "vip?", "type": "split", "condition": {"kind": "tag", "tag": "vip"}, "yes": "perks", "no": "cart"},
        f.email_step("perks", w["sender"]),
        {"id": "cart", "type": "wait_for_event", "event": {"type": "custom_event", "name": "cart",
                                                           "properties": {"size": "big"}},
         "timeout": {"hours": 12}, "next": "thanks", "timeout_next": "nudge"},
        f.email_step("thanks", w["sender"]),
        f.email_step("nudge", w["sender"]),
    ]


def test_each_step_with_its_utc_and_local_time_and_the_timeout_branch(conn: Any, world: dict[str, Any]) -> None:
    flow = _flow(conn, world["ws"], _welcome(world))
    before = _counts(conn)
    result = simulate.simulate(conn, world["ws"], flow["id"], {"contact_id": world["ann"]})
    assert _counts(conn) == before
    assert (result["zone"], result["zone_source"], result["version"]) == ("Europe/Paris", "field", 1)
    steps = [(s["step_id"], s["outcome"], s["at"], s["local"]) for s in result["steps"]]
    assert steps == [
        (None, "entered", "2026-01-14T07:00:00.000Z", "2026-01-14T08:00:00+01:00"),
        ("hello", "would send", "2026-01-14T07:00:00.000Z", "2026-01-14T08:00:00+01:00"),
        ("wait-2d", "wait", "2026-01-14T07:00:00.000Z", "2026-01-14T08:00:00+01:00"),
        ("vip?", "no", "2026-01-16T07:00:00.000Z", "2026-01-16T08:00:00+01:00"),
        ("cart", "waiting", "2026-01-16T07:00:00.000Z", "2026-01-16T08:00:00+01:00"),
        ("cart", "timeout", "2026-01-16T19:00:00.000Z", "2026-01-16T20:00:00+01:00"),
        ("nudge", "would send", "2026-01-16T19:00:00.000Z", "2026-01-16T20:00:00+01:00"),
        (None, "completed", "2026-01-16T19:00:00.000Z", "2026-01-16T20:00:00+01:00"),
    ]
    assert result["steps"][1]["subject"] == "Welcome, Ann"
    assert (result["end"], result["messages"]) == ("completed", {"email": 2})


def test_a_matching_event_takes_the_next_branch_and_a_split_sees_the_contacts_data(
        conn: Any, world: dict[str, Any]) -> None:
    flow = _flow(conn, world["ws"], _welcome(world))
    events = [{"name": "cart", "properties": {"size": "small"}, "at": "2026-01-16T08:00:00Z"},  # no match
              {"name": "cart", "properties": {"size": "big"}, "at": "2026-01-15T08:00:00Z"},  # before the wait
              {"name": "cart", "properties": {"size": "big"}, "at": "2026-01-16T09:30:00Z"}]
    result = simulate.simulate(conn, world["ws"], flow["id"], {"contact_id": world["ann"], "events": events})
    assert [(s["step_id"], s["outcome"], s["at"]) for s in result["steps"][4:7]] == [
        ("cart", "waiting", "2026-01-16T07:00:00.000Z"), ("cart", "event", "2026-01-16T09:30:00.000Z"),
        ("thanks", "would send", "2026-01-16T09:30:00.000Z")]
    bob = f.contact(conn, world["ws"], "bob@example.com", tags=[world["vip"]])["id"]
    result = simulate.simulate(conn, world["ws"], flow["id"], {"contact_id": bob})
    assert [(s["step_id"], s["outcome"]) for s in result["steps"][3:5]] == [("vip?", "yes"), ("perks", "would send")]
    assert (result["zone"], result["zone_source"]) == ("UTC", "workspace")


def test_a_goal_event_ends_it_and_until_stops_the_walk(conn: Any, world: dict[str, Any]) -> None:
    flow = _flow(conn, world["ws"], _welcome(world), goal={"type": "custom_event", "name": "purchase"})
    result = simulate.simulate(conn, world["ws"], flow["id"], {
        "contact_id": world["ann"], "events": [{"name": "purchase", "at": "2026-01-15T10:00:00Z"}]})
    assert (result["end"], result["exit_reason"]) == ("exited", "goal")
    assert [(s["outcome"], s["at"]) for s in result["steps"][-2:]] == [
        ("wait", "2026-01-14T07:00:00.000Z"), ("goal", "2026-01-15T10:00:00.000Z")]
    result = simulate.simulate(conn, world["ws"], flow["id"], {"contact_id": world["ann"], "until": "2026-01-15"})
    assert result["end"] == "in flow"
    assert result["steps"][-1]["outcome"] == "simulation ends"
    assert result["steps"][-1]["at"] == "2026-01-15T23:59:59.999Z"
    assert all(s["at"] <= result["until"] for s in result["steps"])


def test_a_status_that_the_step_would_skip_and_a_set_tag_seen_by_a_later_split(
        conn: Any, world: dict[str, Any]) -> None:
    steps = [{"id": "tag", "type": "add_tag", "tag": "vip", "next": "vip?"},
             {"id": "vip?", "type": "split", "condition": {"kind": "tag", "tag": "vip"}, "yes": "hello"},
             f.email_step("hello", world["sender"])]
    flow = _flow(conn, world["ws"], steps)
    gone = f.contact(conn, world["ws"], "gone@example.com", status="UNSUBSCRIBED")["id"]
    result = simulate.simulate(conn, world["ws"], flow["id"], {"contact_id": gone})
    assert [(s["step_id"], s["outcome"]) for s in result["steps"][1:4]] == [
        ("tag", "would add the tag"), ("vip?", "yes"), ("hello", "skipped")]
    assert result["steps"][3]["detail"] == "the contact is UNSUBSCRIBED, not SUBSCRIBED"
    assert conn.execute("SELECT count(*) FROM contact_tags").fetchone()[0] == 0


def test_a_draft_is_simulated_as_publishing_would_resolve_it(conn: Any, world: dict[str, Any]) -> None:
    draft = f.automation(conn, world["ws"], {"name": "Draft", "triggers": [{"type": "manual"}],
                                             "steps": [f.email_step("hello", world["sender"])]}, publish=False)
    result = simulate.simulate(conn, world["ws"], draft["id"], {"contact_id": world["ann"]})
    assert result["version"] is None
    assert [s["outcome"] for s in result["steps"]] == ["entered", "would send", "completed"]


def test_frequency_caps_skip_or_defer(conn: Any, world: dict[str, Any]) -> None:
    from marketing_cli.services.automations import caps

    caps.set_caps(conn, world["ws"], {"email": {"max_messages": 1, "window": {"days": 1}}})
    flow = _flow(conn, world["ws"], [f.email_step("one", world["sender"], "two"),
                                     {**f.email_step("two", world["sender"]), "when_capped": "skip"}])
    result = simulate.simulate(conn, world["ws"], flow["id"], {"contact_id": world["ann"]})
    assert [(s["step_id"], s["outcome"]) for s in result["steps"][1:3]] == [("one", "would send"), ("two", "skipped")]
    assert result["steps"][2]["detail"] == "frequency cap: 1 email message(s) per 86400 s"
    # Deferred (the default of `when_capped`, as the send steps run it): held until a slot frees.
    walk = _walk(conn, world, world["ann"], [
        f.email_step("one", world["sender"], "two"),
        {**f.email_step("two", world["sender"]), "body_html": "<p>2</p>"}])
    assert [(s["step_id"], s["outcome"], s["at"]) for s in walk.timeline[1:4]] == [
        ("one", "would send", "2026-01-14T07:00:00.000Z"), ("two", "deferred", "2026-01-14T07:00:00.000Z"),
        ("two", "would send", "2026-01-15T07:00:00.000Z")]


def _walk(conn: Any, w: dict[str, Any], contact_id: str, steps: list[dict[str, Any]]) -> Walk:
    contact = conn.execute("SELECT * FROM contacts WHERE id = ?", (contact_id,)).fetchone()
    zone, _ = contact_zone(conn, w["ws"], contact, START)
    walk = Walk(conn, w["ws"], {"start": steps[0]["id"], "steps": steps}, contact, zone, [], START,
                START + timedelta(days=30))
    replay(walk)
    return walk


def test_sms_steps_are_priced_and_held_by_quiet_hours_in_the_numbers_zone(conn: Any, world: dict[str, Any],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # 02:00 in New York: US quiet hours (the built-in table) hold the text until the window opens.
    monkeypatch.setenv(quiet_hours.TABLE_ENV, str(quiet_hours.BUILT_IN))
    amy = f.contact(conn, world["ws"], "amy@example.com", phone_number="+12125550123", first_name="Amy")["id"]
    walk = _walk(conn, world, amy, [{"id": "text", "type": "send_sms", "body": "Hi {{contact.first_name}}"}])
    held, sent = walk.timeline[1], walk.timeline[2]
    assert (held["outcome"], held["at"]) == ("held", "2026-01-14T07:00:00.000Z")
    assert "quiet hours" in held["detail"]
    assert (sent["outcome"], sent["body"], sent["segments"], sent["country"]) == ("would send", "Hi Amy", 1, "US")
    assert sent["at"] == held["until"] == "2026-01-14T13:00:00.000Z"
    assert sent["local"] == "2026-01-14T08:00:00-05:00"  # the contact's zone comes from the number
    assert sent["price"] is not None


def test_wait_until_a_time_of_day_on_weekdays_in_the_contacts_zone(conn: Any, world: dict[str, Any]) -> None:
    walk = _walk(conn, world, world["ann"], [
        {"id": "monday-9", "type": "wait_until", "time": "09:00", "weekdays": ["mon"], "next": "hello"},
        f.email_step("hello", world["sender"])])
    assert [(s["step_id"], s["outcome"], s["local"]) for s in walk.timeline[1:3]] == [
        ("monday-9", "wait", "2026-01-14T08:00:00+01:00"), ("hello", "would send", "2026-01-19T09:00:00+01:00")]
    # Today, later: the same day.
    assert next_local_time(START, "Europe/Paris", "09:00", None) == datetime(2026, 1, 14, 8, 0, tzinfo=UTC)


def test_an_unknown_step_type_is_listed_and_the_walk_goes_on(conn: Any, world: dict[str, Any]) -> None:
    walk = _walk(conn, world, world["ann"], [{"id": "future", "type": "send_push", "next": "bye"},
                                             {"id": "bye", "type": "exit"}])
    assert [(s["step_id"], s["outcome"]) for s in walk.timeline] == [
        (None, "entered"), ("future", "not simulated"), ("bye", "exit")]


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"contact_id": "nope"}, 400, "The contact ID you provided is not valid."),
    ({"contact_id": "0" * 24}, 404, CONTACT_NOT_FOUND),
    ({"contact_id": "{ann}", "until": "2020-01-01"}, 400, "The member 'until' must be in the future."),
    ({"contact_id": "{ann}", "until": "soon"}, 400, None),
    ({"contact_id": "{ann}", "events": {"name": "x"}}, 400, None),
    ({"contact_id": "{ann}", "events": [{"name": "x"}]}, 400, "The member 'events[0].at' is required (when the event"
                                                             " happens)."),
    ({"contact_id": "{ann}", "events": [{"name": "x", "at": "2026-02-01", "colour": 1}]}, 400,
     "Unknown member 'events[0].colour'"),
    ({"contact_id": "{ann}", "extra": 1}, 400, "Unknown member 'extra'"),
])
def test_bad_input_is_a_clear_4xx_and_writes_nothing(conn: Any, world: dict[str, Any], body: dict[str, Any],
                                                     status: int, message: str | None) -> None:
    flow = _flow(conn, world["ws"], _welcome(world))
    body = {k: v.format(ann=world["ann"]) if isinstance(v, str) else v for k, v in body.items()}
    before = _counts(conn)
    with pytest.raises(MktError) as caught:
        simulate.simulate(conn, world["ws"], flow["id"], body)
    assert caught.value.status == status
    if message is not None:
        assert caught.value.message == message
    assert _counts(conn) == before
    assert conn.execute("PRAGMA query_only").fetchone()[0] == 0

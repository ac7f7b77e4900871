"""wait_until: the next moment strictly after now at which the contact's clock reads the time
(on the given weekdays), in the contact's zone by the local-time campaigns' rule (field,
phone, location, workspace), DST-safe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import flows, steps, triggers
from marketing_cli.services.contacts.zones import contact_zone
from tests import factories as f

NY = "America/New_York"


@pytest.mark.parametrize(("now", "zone", "hhmm", "days", "expected"), [
    # 08:00 New York (EST) on a Wednesday: 09:00 is later the same day
    ("2026-11-25T13:00:00Z", NY, "09:00", None, "2026-11-25T14:00:00Z"),
    # exactly 09:00: strictly after now, so tomorrow
    ("2026-11-25T14:00:00Z", NY, "09:00", None, "2026-11-26T14:00:00Z"),
    # Wednesday 10:00: the next Monday
    ("2026-11-25T15:00:00Z", NY, "09:00", ["mon"], "2026-11-30T14:00:00Z"),
    # the local day, not UTC's: 23:30 Tuesday in New York is already Wednesday in UTC
    ("2026-11-25T04:30:00Z", NY, "09:00", ["tue", "wed"], "2026-11-25T14:00:00Z"),
    # 02:30 does not exist on 2027-03-14 in New York: 03:30 EDT (the gap's length later)
    ("2027-03-14T05:00:00Z", NY, "02:30", None, "2027-03-14T07:30:00Z"),
    # 01:30 happens twice on 2026-11-01: the first one (EDT)
    ("2026-11-01T04:00:00Z", NY, "01:30", None, "2026-11-01T05:30:00Z"),
    # across the change: 09:00 EDT on Saturday, 09:00 EST on Sunday
    ("2026-10-31T14:00:00Z", NY, "09:00", None, "2026-11-01T14:00:00Z"),
    ("2026-11-25T10:00:00Z", "Asia/Kolkata", "18:30", ["wed"], "2026-11-25T13:00:00Z"),
])
def test_next_local_time(now: str, zone: str, hhmm: str, days: list[str] | None, expected: str) -> None:
    moment = steps.next_local_time(clock.parse_ts(now), zone, hhmm, days)
    assert clock.format_ts(moment) == clock.format_ts(clock.parse_ts(expected))


def test_the_contacts_zone_follows_the_local_time_rule(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.field(conn, ws, "phone_number", label="Phone")
    f.field(conn, ws, "timezone")
    at = datetime(2026, 11, 25, 12, tzinfo=UTC)
    by_field = f.contact(conn, ws, "a@example.com", timezone="Europe/Paris", phone_number="+14155550101")["id"]
    by_phone = f.contact(conn, ws, "b@example.com", phone_number="+14155550102")["id"]
    located = f.contact(conn, ws, "c@example.com")["id"]
    conn.execute("UPDATE contacts SET located_timezone = 'Asia/Tokyo' WHERE id = ?", (located,))
    nothing = f.contact(conn, ws, "d@example.com")["id"]
    conn.execute("UPDATE workspaces SET timezone = 'Australia/Sydney' WHERE id = ?", (ws,))
    conn.commit()
    assert contact_zone(conn, ws, by_field, at) == ("Europe/Paris", "field")
    assert contact_zone(conn, ws, by_phone, at) == ("America/Los_Angeles", "phone")
    assert contact_zone(conn, ws, located, at) == ("Asia/Tokyo", "location")
    assert contact_zone(conn, ws, nothing, at) == ("Australia/Sydney", "workspace")


def test_a_flow_waits_until_nine_in_the_contacts_zone(conn: Any, workspace: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    now = datetime(2026, 11, 25, 20, 0, tzinfo=UTC)  # Wednesday 21:00 in Paris
    monkeypatch.setattr(clock, "utcnow", lambda: now)
    f.field(conn, ws, "timezone")
    ann = f.contact(conn, ws, "ann@example.com", timezone="Europe/Paris")["id"]
    f.tag(conn, ws, "morning")
    flow = f.automation(conn, ws, {"name": "Morning", "triggers": [{"type": "manual"}], "steps": [
        {"id": "nine", "type": "wait_until", "time": "9:00", "weekdays": ["fri", "thu"], "next": "tag"},
        {"id": "tag", "type": "add_tag", "tag": "morning"}]})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": ann})
    f.run_automations(conn)
    x = conn.execute("SELECT step_id, next_run_at FROM automation_enrollments").fetchone()
    assert tuple(x) == ("tag", "2026-11-26T08:00:00.000Z")  # Thursday 09:00 in Paris
    run = conn.execute("SELECT outcome, detail FROM automation_step_runs").fetchone()
    assert tuple(run) == ("waited", "Europe/Paris (field)")
    now += timedelta(hours=12, seconds=1)
    f.run_automations(conn)
    assert conn.execute("SELECT status FROM automation_enrollments").fetchone()[0] == "completed"


@pytest.mark.parametrize(("step", "message"), [
    ({"time": "25:00"}, "The member 'steps[0].time': The local time must be HH:MM on a 24-hour clock (for example"
                        " 09:00), not '25:00'."),
    ({"time": "09:00", "weekdays": []}, "The member 'steps[0].weekdays' must list distinct days among mon, tue,"
                                        " wed, thu, fri, sat, sun (at least one), or be left out for every day."),
    ({"time": "09:00", "weekdays": ["mon", "mon"]}, "The member 'steps[0].weekdays' must list distinct days among"
                                                    " mon, tue, wed, thu, fri, sat, sun (at least one), or be left"
                                                    " out for every day."),
    ({"time": "09:00", "weekdays": ["monday"]}, "The member 'steps[0].weekdays' must list distinct days among mon,"
                                                " tue, wed, thu, fri, sat, sun (at least one), or be left out for"
                                                " every day."),
    ({"time": 9}, "The member 'steps[0].time' must be a string."),
])
def test_a_malformed_wait_until_is_refused(conn: Any, workspace: dict[str, Any], step: dict[str, Any],
                                           message: str) -> None:
    with pytest.raises(MktError) as err:
        flows.create_automation(conn, workspace["id"], {"name": "x", "triggers": [{"type": "manual"}],
                                                        "steps": [{"id": "w", "type": "wait_until", **step}]})
    assert (err.value.status, err.value.message) == (400, message)


def test_a_cycle_through_wait_until_is_allowed(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.tag(conn, ws, "daily")
    flow = f.automation(conn, ws, {"name": "Daily", "triggers": [{"type": "manual"}], "steps": [
        {"id": "w", "type": "wait_until", "time": "09:00", "next": "t"},
        {"id": "t", "type": "add_tag", "tag": "daily", "next": "w"}]})
    assert flow["status"] == "ACTIVE"


def test_the_json_schema_takes_the_new_steps() -> None:
    import jsonschema

    from marketing_cli.services.automations.format import flow_schema

    schema = flow_schema()
    doc = {"name": "x", "triggers": [{"type": "date_anniversary", "field": "birthday"}], "steps": [
        {"id": "w", "type": "wait_until", "time": "09:00", "weekdays": ["mon", "fri"], "next": "t"},
        {"id": "t", "type": "send_sms", "body": "Hi {{contact.first_name|friend}}", "when_capped": "skip",
         "next": "m"},
        {"id": "m", "type": "send_email", "sender_id": 1, "subject": "Hello", "html": "<p>x</p>",
         "when_capped": "defer"}]}
    jsonschema.validate(doc, schema)
    for bad in ({"time": "25:00"}, {"weekdays": ["monday"]}, {"weekdays": []}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**doc, "steps": [{**doc["steps"][0], **bad}]}, schema)
    for bad in ({"body": " "}, {"when_capped": "never"}, {"body": "x" * 1601}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**doc, "steps": [{**doc["steps"][1], **bad}]}, schema)

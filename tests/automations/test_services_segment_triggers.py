"""Segment triggers: decided for the contacts with events by the segment's compiled filters."""

from __future__ import annotations

from typing import Any

from marketing_cli.services.account import billing
from marketing_cli.services.automations import flows, triggers
from marketing_cli.services.contacts import records
from tests import factories as f


def test_entering_and_leaving_a_segment(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "automations", 5)
    city = f.field(conn, ws, "city")
    already = f.contact(conn, ws, "old@example.com", city="Paris")["id"]
    ann = f.contact(conn, ws, "ann@example.com", city="Rome")["id"]
    segment = f.segment(conn, ws, "Parisians", {"condition": "AND", "filters": [
        {"type": "field", "field_id": city, "operator": "eq", "value": "Paris"}]})
    wait = [{"id": "w", "type": "wait", "duration": {"days": 1}}]
    entered = f.automation(conn, ws, {"name": "In", "reentry": "every_time",
                                      "triggers": [{"type": "segment_entered", "segment_id": segment["id"]}],
                                      "steps": wait})
    left = f.automation(conn, ws, {"name": "Out", "triggers": [{"type": "segment_left", "segment_id": segment["id"]}],
                                   "steps": wait})

    def who(automation: dict[str, Any]) -> list[str]:
        return [r[0] for r in conn.execute("SELECT contact_id FROM automation_enrollments WHERE automation_id = ?"
                                           " ORDER BY id", (automation["id"],))]

    records.upsert_contact(conn, ws, {"email_address": "old@example.com", "fields": {"city": "Paris"},
                                      "tags": [f.tag(conn, ws, "vip")]})  # an event, still a member: nothing
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "fields": {"city": "Paris"}})
    triggers.read_all_events(conn)
    assert who(entered) == [ann] and who(left) == []
    records.upsert_contact(conn, ws, {"email_address": "old@example.com", "fields": {"city": "Lyon"}})
    triggers.read_all_events(conn)
    assert who(left) == [already] and who(entered) == [ann]
    state = {r[0] for r in conn.execute("SELECT contact_id FROM automation_segment_state WHERE automation_id = ?",
                                        (entered["id"],))}
    assert state == {ann}
    flows.pause_automation(conn, ws, entered["id"])
    flows.resume_automation(conn, ws, entered["id"])  # the state starts again from the members now
    assert {r[0] for r in conn.execute("SELECT contact_id FROM automation_segment_state WHERE automation_id = ?",
                                       (entered["id"],))} == {ann}

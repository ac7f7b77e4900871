"""The drain (services/automations/drain.py): a batch of due email steps run in one transaction
writes what the step-by-step path writes, and leaves to it what it does not handle."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.services.account import billing
from marketing_cli.services.automations import drain, steps, triggers
from marketing_cli.services.contacts import events
from tests import factories as f


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "automations", 20)
    return {"ws": ws, "sender": f.verified_sender(conn, ws), "vip": f.tag(conn, ws, "vip")}


def _flow(conn: Any, ws: int, sender: int, name: str) -> dict[str, Any]:
    """An email step, then a tag step (due at once), then a second email step."""
    return f.automation(conn, ws, {"name": name, "triggers": [{"type": "manual"}], "steps": [
        f.email_step("hello", sender, "tag"), {"id": "tag", "type": "add_tag", "tag": "vip", "next": "bye"},
        f.email_step("bye", sender)]})


def _written(conn: Any, automation_id: int) -> dict[str, Any]:
    """What a pass wrote for the flow's enrollments, without ids and times."""
    runs = [tuple(r) for r in conn.execute(
        "SELECT c.email, r.seq, r.step_id, r.outcome, r.detail, m.email, m.domain, m.provider, m.capped, m.status,"
        " cv.subject FROM automation_step_runs r JOIN automation_enrollments x ON x.id = r.enrollment_id"
        " JOIN contacts c ON c.id = x.contact_id LEFT JOIN email_messages m ON m.id = r.email_message_id"
        " LEFT JOIN campaign_variants cv ON cv.id = m.variant_id WHERE r.automation_id = ?"
        " ORDER BY c.email, r.seq", (automation_id,))]
    enrollments = [tuple(r) for r in conn.execute(
        "SELECT c.email, x.status, x.seq, x.step_id, x.next_run_at IS NULL, x.waiting, x.exit_reason"
        " FROM automation_enrollments x JOIN contacts c ON c.id = x.contact_id WHERE x.automation_id = ?"
        " ORDER BY c.email", (automation_id,))]
    rounds = conn.execute("SELECT count(*) FROM automation_campaigns ac JOIN automation_versions v"
                          " ON v.id = ac.version_id WHERE v.automation_id = ?", (automation_id,)).fetchone()[0]
    return {"runs": runs, "enrollments": enrollments, "rounds": rounds}


def test_a_batch_writes_what_the_step_by_step_path_writes(conn: Any, world: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = world["ws"]
    people = [f.contact(conn, ws, f"p{i}@example{i % 3}.org", first_name=f"P{i}")["id"] for i in range(6)]
    people.append(f.contact(conn, ws, "gone@example.org", status="UNSUBSCRIBED")["id"])
    batch, alone = _flow(conn, ws, world["sender"], "Batch"), _flow(conn, ws, world["sender"], "Alone")
    for contact_id in people:
        triggers.enroll_contact(conn, ws, batch["id"], {"contact_id": contact_id})
    assert steps.run_due(conn) == len(people)
    for contact_id in people:
        triggers.enroll_contact(conn, ws, alone["id"], {"contact_id": contact_id})
    monkeypatch.setattr(drain, "run_batch", lambda conn_, ids: ids)  # every enrollment on its own
    assert steps.run_due(conn) == len(people)
    done, reference = _written(conn, batch["id"]), _written(conn, alone["id"])
    assert done == reference
    assert [r[3] for r in done["runs"]].count("sent") == 12 and [r[3] for r in done["runs"]].count("skipped") == 2
    assert {r[1] for r in done["enrollments"]} == {"completed"}


def test_a_contact_the_first_round_has_goes_to_the_next_round(conn: Any, world: dict[str, Any]) -> None:
    """Re-entry: a second pass through the step is a second round's campaign, in the batch or alone."""
    ws = world["ws"]
    flow = f.automation(conn, ws, {"name": "Again", "reentry": "every_time",
                                   "triggers": [{"type": "custom_event", "name": "ping"}],
                                   "steps": [f.email_step("hello", world["sender"])]})
    ann = f.contact(conn, ws, "ann@example.com")["id"]
    bob = f.contact(conn, ws, "bob@example.com")["id"]
    for round_ in (1, 2):
        for contact_id in (ann, bob):
            events.append_event(conn, ws, contact_id, "CUSTOM_EVENT", {"event_name": "ping", "properties": {}})
        triggers.read_all_events(conn)
        assert steps.run_due(conn) == 2
    sent = [tuple(r) for r in conn.execute(
        "SELECT m.email, ac.round FROM email_messages m JOIN automation_campaigns ac ON ac.campaign_id = m.campaign_id"
        " WHERE ac.version_id IN (SELECT id FROM automation_versions WHERE automation_id = ?)"
        " ORDER BY m.email, ac.round", (flow["id"],))]
    assert sent == [("ann@example.com", 1), ("ann@example.com", 2), ("bob@example.com", 1), ("bob@example.com", 2)]
    assert conn.execute("SELECT count(*) FROM automation_step_runs WHERE outcome = 'sent'").fetchone()[0] == 4


def test_a_capped_workspace_and_a_confirmation_go_step_by_step(conn: Any, world: dict[str, Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.automations import caps

    ws = world["ws"]
    flow = f.automation(conn, ws, {"name": "Capped", "triggers": [{"type": "manual"}],
                                   "steps": [f.email_step("hello", world["sender"])]})
    ann = f.contact(conn, ws, "ann@example.com")["id"]
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": ann})
    caps.set_caps(conn, ws, {"email": {"max_messages": 5, "window": {"days": 1}}})
    left = drain.run_batch(conn, steps.due_enrollments(conn))
    assert len(left) == 1 and conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 0
    assert steps.run_due(conn) == 1
    assert conn.execute("SELECT capped FROM email_messages").fetchone()[0] == 1

"""Moving in-flight contacts between versions: the dry run's report, a mapped move, unmapped
steps that stay or exit, and the log; both faces."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import flows, migrate, triggers
from tests import factories as f


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    start = clock.utcnow()
    moment = {"now": start}
    monkeypatch.setattr(clock, "utcnow", lambda: moment["now"])
    ws = workspace["id"]
    sender = f.verified_sender(conn, ws)
    wait = {"type": "wait", "duration": {"days": 1}}
    v1 = {"name": "Series", "triggers": [{"type": "manual"}],
          "steps": [f.email_step("one", sender, "w1"), {"id": "w1", **wait, "next": "two"},
                    f.email_step("two", sender, "w2"), {"id": "w2", **wait, "next": "three"},
                    f.email_step("three", sender)]}
    flow = f.automation(conn, ws, v1)
    contacts = [f.contact(conn, ws, f"c{i}@example.com")["id"] for i in range(3)]
    for contact_id in contacts:
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact_id})
    f.run_automations(conn)  # all three got "one" and wait before "two"
    v2 = {**v1, "steps": [f.email_step("one", sender, "w1"), {"id": "w1", **wait, "next": "deux"},
                          f.email_step("deux", sender, "w2"), {"id": "w2", **wait, "next": "three"},
                          f.email_step("three", sender)]}
    flows.update_automation(conn, ws, flow["id"], v2)
    flows.publish_automation(conn, ws, flow["id"])

    def advance(**kw: float) -> None:
        moment["now"] += timedelta(**kw)

    return {"ws": ws, "flow": flow["id"], "advance": advance}


def test_a_dry_run_reports_and_changes_nothing(conn: Any, world: dict[str, Any]) -> None:
    before = conn.execute("SELECT * FROM automation_enrollments ORDER BY id").fetchall()
    report = migrate.migrate(conn, world["ws"], world["flow"], {"to_version": 2, "dry_run": True})
    assert report["steps"] == [{"from_version": 1, "step_id": "two", "contacts": 3, "to_step": None,
                                "action": "stay"}]
    assert (report["moved"], report["stayed"], report["exited"]) == (0, 3, 0)
    mapped = migrate.migrate(conn, world["ws"], world["flow"], {"to_version": 2, "dry_run": True,
                                                                "map": {"two": "deux"}})
    assert mapped["steps"][0]["to_step"] == "deux" and mapped["moved"] == 3
    assert conn.execute("SELECT * FROM automation_enrollments ORDER BY id").fetchall() == before
    assert conn.execute("SELECT count(*) FROM automation_migrations").fetchone()[0] == 0


def test_a_mapped_move_runs_the_new_step_once_at_the_same_time(conn: Any, world: dict[str, Any]) -> None:
    done = migrate.migrate(conn, world["ws"], world["flow"], {"to_version": 2, "map": {"two": "deux"}})
    assert done["moved"] == 3
    assert conn.execute("SELECT count(*) FROM automation_migrations").fetchone()[0] == 1
    world["advance"](days=1, seconds=1)
    f.run_automations(conn)
    subjects = [r[0] for r in conn.execute("SELECT v.subject FROM email_messages m JOIN campaign_variants v"
                                           " ON v.id = m.variant_id ORDER BY m.id")]
    assert subjects.count("Step deux") == 3 and "Step two" not in subjects


def test_unmapped_contacts_can_exit_with_the_reason(conn: Any, world: dict[str, Any]) -> None:
    done = migrate.migrate(conn, world["ws"], world["flow"], {"to_version": 2, "unmapped": "exit"})
    assert done["exited"] == 3
    reasons = {r[0] for r in conn.execute("SELECT exit_reason FROM automation_enrollments")}
    assert reasons == {"migrated: step two has no counterpart in version 2"}


def test_bad_migrations_are_refused(conn: Any, world: dict[str, Any]) -> None:
    for body, message in [({"to_version": 9}, "We could not find that version of the automation."),
                          ({"to_version": 2, "map": {"two": "zwei"}},
                           "The map sends 'two' to 'zwei', which is no step of version 2."),
                          ({"to_version": 2, "unmapped": "maybe"}, "The member 'unmapped' must be 'stay' or 'exit'."),
                          ({"version": 2}, "Unknown member 'version'")]:
        with pytest.raises(MktError) as caught:
            migrate.migrate(conn, world["ws"], world["flow"], body)
        assert caught.value.message == message


def test_both_faces(cli_json: Any, client: Any, auth: dict[str, str], world: dict[str, Any]) -> None:
    aid = str(world["flow"])
    cli = cli_json("automations", "migrate", aid, "--to-version", "2", "--map", "two=deux", "--dry-run")
    api = client.post(f"/v1/automations/{aid}/migrate", headers=auth,
                      json={"to_version": 2, "map": {"two": "deux"}, "dry_run": True, "unmapped": "stay"})
    assert cli == api.json()["data"] and cli["moved"] == 3

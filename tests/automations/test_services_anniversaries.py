"""Date anniversaries: the day in every year through the field's index, and 29 February."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import flows, triggers
from tests import factories as f
from tests.engines import query_plan


def _at(monkeypatch: pytest.MonkeyPatch, year: int, month: int, day: int) -> None:
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(year, month, day, 8, 0, tzinfo=UTC))


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    f.field(conn, ws, "birthday", "DATE")
    people = {name: f.contact(conn, ws, f"{name}@example.com", birthday=day)["id"]
              for name, day in (("leap", "1992-02-29"), ("feb28", "1985-02-28"), ("march", "1980-03-01"))}
    flow = f.automation(conn, ws, {"name": "Birthday", "reentry": "every_time",
                                   "triggers": [{"type": "date_anniversary", "field": "birthday"}],
                                   "steps": [{"id": "w", "type": "wait", "duration": {"days": 2}}]})
    return {"ws": ws, "flow": flow["id"], **people}


def _entered(conn: Any, world: dict[str, Any]) -> list[tuple[str, str]]:
    names = {v: k for k, v in world.items() if isinstance(v, str)}
    return sorted((names[r[0]], r[1]) for r in conn.execute(
        "SELECT contact_id, entry_key FROM automation_enrollments WHERE automation_id = ?", (world["flow"],)))


def test_29_february_is_celebrated_on_28_february_in_other_years(conn: Any, world: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _at(monkeypatch, 2027, 2, 28)
    assert triggers.anniversaries(conn) == 2
    assert triggers.anniversaries(conn) == 0  # the same day again: nobody twice
    assert _entered(conn, world) == [("feb28", "anniversary:2027"), ("leap", "anniversary:2027")]


def test_in_a_leap_year_29_february_has_its_own_day(conn: Any, world: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _at(monkeypatch, 2028, 2, 28)
    triggers.anniversaries(conn)
    assert _entered(conn, world) == [("feb28", "anniversary:2028")]
    _at(monkeypatch, 2028, 2, 29)
    triggers.anniversaries(conn)
    assert _entered(conn, world) == [("feb28", "anniversary:2028"), ("leap", "anniversary:2028")]
    _at(monkeypatch, 2028, 3, 1)
    f.run_automations(conn)  # the job runs anniversaries too
    assert ("march", "anniversary:2028") in _entered(conn, world)


def test_every_year_again(conn: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    _at(monkeypatch, 2027, 3, 1)
    triggers.anniversaries(conn)
    conn.execute("UPDATE automation_enrollments SET status = 'completed'")
    _at(monkeypatch, 2028, 3, 1)
    triggers.anniversaries(conn)
    assert _entered(conn, world) == [("march", "anniversary:2027"), ("march", "anniversary:2028")]


def test_the_query_uses_the_fields_index(conn: Any, world: dict[str, Any]) -> None:
    from marketing_cli.storage import field_sql

    field_id = conn.execute("SELECT id FROM fields WHERE merge_tag = 'birthday'").fetchone()[0]
    plan = query_plan(conn, "SELECT c.id FROM contacts c WHERE c.workspace_id = ? AND"
                      f" {field_sql.typed_value_expr(conn, field_id, 'DATE', 'c')} IN (SELECT value FROM json_each(?))",
                      (world["ws"], '["x"]'))
    assert field_sql.index_name(field_id) in plan


def test_only_a_date_field_has_anniversaries(conn: Any, world: dict[str, Any]) -> None:
    f.field(conn, world["ws"], "city")
    created = flows.create_automation(conn, world["ws"], {
        "name": "x", "triggers": [{"type": "date_anniversary", "field": "city"}], "steps": [{"id": "a", "type": "exit"}]})
    with pytest.raises(MktError) as caught:
        flows.publish_automation(conn, world["ws"], created["id"])
    assert caught.value.message == "triggers[0]: the field 'city' is not a DATE field, so it has no anniversary."

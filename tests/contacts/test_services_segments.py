"""Segments service: create (messages, allowance, queued count), list, get, members,
refresh, the count job and the stale-count scheduler."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import segments
from tests.factories import build_filter_world as build_world

OPEN_RATE = {"condition": "AND", "filters": [{"type": "open_rate", "operator": "gte", "value": 50}]}


@pytest.fixture
def world(conn: sqlite3.Connection) -> dict[str, Any]:
    w = build_world(conn)
    billing.set_plan(conn, w["ws"], "pro")
    return w


def create(conn: sqlite3.Connection, ws: int, name: Any = "Engaged", filters: Any = None) -> dict[str, Any]:
    return segments.create_segment(conn, ws, {"name": name, "filters": OPEN_RATE if filters is None else filters})


def test_create_answers_the_segment_with_count_zero_and_queues_the_count(conn: sqlite3.Connection,
                                                                         world: dict[str, Any]) -> None:
    seg = create(conn, world["ws"], "  Engaged  ")
    assert set(seg) == {"id", "name", "filters", "contact_count", "counted_at", "counting", "created_at", "updated_at"}
    assert seg["name"] == "Engaged" and seg["contact_count"] == 0
    assert seg["filters"] == OPEN_RATE
    queued = jobs.list_jobs(conn, status="queued")
    assert [(j["type"], j["payload"], j["workspace_id"]) for j in queued] == [
        ("segment.count", {"segment_id": seg["id"]}, world["ws"])]
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert segments.get_segment(conn, world["ws"], seg["id"])["contact_count"] == 2  # a (50%) and d (100%)


def test_name_messages(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    ws = world["ws"]
    for name in (None, "", "   "):
        with pytest.raises(MktError, match="^Please provide a name for this segment$"):
            create(conn, ws, name)
    with pytest.raises(MktError, match="^Segment name must be 64 characters or less$"):
        create(conn, ws, "x" * 65)
    assert create(conn, ws, "x" * 64)["name"] == "x" * 64
    with pytest.raises(MktError, match="^The member 'name' must be a string.$"):
        create(conn, ws, 5)
    for body in (None, [], "x"):
        with pytest.raises(MktError, match="^Invalid request body.$"):
            segments.create_segment(conn, ws, body)


def test_a_failed_create_writes_nothing(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    with pytest.raises(MktError, match="Filter #2: Value must be between 0 and 100"):
        create(conn, world["ws"], filters={"condition": "AND", "filters": [
            OPEN_RATE["filters"][0], {"type": "click_rate", "operator": "gt", "value": 101}]})
    assert conn.execute("SELECT COUNT(*) FROM segments").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0


def test_billing_limit(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    ws = world["ws"]
    billing.set_allowance(conn, ws, "segments", 2)
    create(conn, ws, "one")
    create(conn, ws, "two")
    with pytest.raises(MktError, match="^Billing limit error$") as err:
        create(conn, ws, "three")
    assert err.value.status == 400
    assert billing.usage(conn, ws, "segments") == 2
    # Validation comes first: a bad body gets its own message even at the limit.
    with pytest.raises(MktError, match="^Please provide a name for this segment$"):
        create(conn, ws, "")


def test_list_get_and_workspace_isolation(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    first = create(conn, world["ws"], "first")
    second = create(conn, world["ws"], "second")
    assert [s["id"] for s in segments.list_segments(conn, world["ws"])] == [first["id"], second["id"]]
    assert segments.get_segment(conn, world["ws"], str(first["id"])) == first
    assert segments.list_segments(conn, world["other"]) == []
    with pytest.raises(MktError, match="^We were unable to find the segment.$") as err:
        segments.get_segment(conn, world["other"], first["id"])
    assert err.value.status == 404
    for bad in ("abc", "0", "-1", "", True, 1.5):
        with pytest.raises(MktError, match="^Please provide a valid segment ID.$"):
            segments.get_segment(conn, world["ws"], bad)


def test_members_are_live_and_paged(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    seg = create(conn, world["ws"], filters={"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [world["t"]["t1"]]}]})
    page = segments.segment_members(conn, world["ws"], seg["id"], page=1, limit=2)
    assert page["pagination"] == {"page": 1, "limit": 2, "total": 3}
    ids = [c["id"] for c in page["contacts"]]
    assert ids == sorted([world["c"]["a"], world["c"]["b"]])
    assert page["contacts"][0]["data"]["email_address"] == "a@x.io"
    rest = segments.segment_members(conn, world["ws"], seg["id"], page=2, limit=2)
    assert [c["id"] for c in rest["contacts"]] == [world["c"]["e"]]
    # Live: untag a contact and it leaves at once, with no recount.
    conn.execute("DELETE FROM contact_tags WHERE contact_id = ?", (world["c"]["a"],))
    assert segments.segment_members(conn, world["ws"], seg["id"])["pagination"]["total"] == 2
    with pytest.raises(MktError, match="^The limit must be an integer between 1 and 250.$"):
        segments.segment_members(conn, world["ws"], seg["id"], limit=251)
    for page in (0, segments.MAX_PAGE + 1):  # the offset of any page fits 64 bits
        with pytest.raises(MktError, match="^The page must be an integer between 1 and 1000000000.$"):
            segments.segment_members(conn, world["ws"], seg["id"], page=page)


def test_refresh_queues_one_count_and_the_job_is_idempotent(conn: sqlite3.Connection,
                                                            world: dict[str, Any]) -> None:
    seg = create(conn, world["ws"])
    first = segments.refresh_segment(conn, world["ws"], seg["id"])
    again = segments.refresh_segment(conn, world["ws"], seg["id"])
    assert first == again == {"segment_id": seg["id"], "job_id": first["job_id"]}  # folded into the queued one
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert segments.get_segment(conn, world["ws"], seg["id"])["contact_count"] == 2
    # Running the count again changes nothing (idempotent), data changes are picked up.
    segments.recount_segment(conn, world["ws"], seg["id"])
    assert segments.get_segment(conn, world["ws"], seg["id"])["contact_count"] == 2
    conn.execute("UPDATE contacts SET unique_opens = 0 WHERE id = ?", (world["c"]["d"],))
    refreshed = segments.refresh_segment(conn, world["ws"], seg["id"])
    assert refreshed["job_id"] != first["job_id"]
    jobs.run_due(conn)
    assert segments.get_segment(conn, world["ws"], seg["id"])["contact_count"] == 1
    with pytest.raises(MktError, match="^We were unable to find the segment.$"):
        segments.refresh_segment(conn, world["other"], seg["id"])


def test_count_job_of_a_deleted_segment_is_a_no_op(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    seg = create(conn, world["ws"])
    conn.execute("DELETE FROM segments WHERE id = ?", (seg["id"],))
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}


def test_count_job_of_a_broken_segment_fails_with_the_message(conn: sqlite3.Connection,
                                                              world: dict[str, Any]) -> None:
    seg = create(conn, world["ws"], filters={"condition": "OR", "filters": [
        OPEN_RATE["filters"][0], {"type": "field", "field_id": world["f"]["city"], "operator": "eq", "value": "x"}]})
    conn.execute("DELETE FROM fields WHERE id = ?", (world["f"]["city"],))
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    job = jobs.list_jobs(conn)[0]
    # A 4xx is permanent: no retries of a definition that cannot work.
    assert (job["status"], job["attempts"]) == ("failed", 1)
    assert job["last_error"] == "Filter #2: The specified field_id does not exist"
    assert segments.get_segment(conn, world["ws"], seg["id"])["contact_count"] == 0


def test_scheduler_requeues_stale_counts_only(conn: sqlite3.Connection, world: dict[str, Any],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    stale = create(conn, world["ws"], "stale")
    fresh = create(conn, world["ws"], "fresh")
    jobs.run_due(conn)
    assert segments.enqueue_stale_counts(conn) == 0  # just counted
    later = clock.utcnow() + timedelta(minutes=16)
    conn.execute("UPDATE segments SET counted_at = ? WHERE id = ?",
                 (clock.format_ts(clock.utcnow() + timedelta(minutes=10)), fresh["id"]))
    monkeypatch.setattr(clock, "utcnow", lambda: later)
    assert segments.enqueue_stale_counts(conn) == 1
    queued = jobs.list_jobs(conn, status="queued")
    assert [j["payload"]["segment_id"] for j in queued] == [stale["id"]]
    assert segments.enqueue_stale_counts(conn) == 0  # a recent job for the key: not again
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}


def test_stored_filters_are_the_normalised_form(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    seg = create(conn, world["ws"], filters={"condition": "and", "filters": [
        {"type": "field", "field_id": world["f"]["country"], "operator": "eq", "value": "fr"}]})
    stored = json.loads(conn.execute("SELECT filters FROM segments WHERE id = ?", (seg["id"],)).fetchone()[0])
    assert stored == seg["filters"] == {"condition": "AND", "filters": [
        {"type": "field", "field_id": world["f"]["country"], "operator": "eq", "value": "FR"}]}

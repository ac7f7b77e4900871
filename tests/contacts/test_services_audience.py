"""The audience resolver: channel eligibility, include/exclude tags and segments, each
contact once, counts in SQL, id batches, and Configure Campaign's messages."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import audience, segments
from marketing_cli.storage.db import is_postgresql
from tests.factories import build_filter_world as build_world

# The world (tests/contacts/test_segment_filters.py), eligibility per channel:
#   a  SUBSCRIBED, email, phone, sms NULL           email yes  sms yes    tags t1 t2
#   b  SUBSCRIBED, email, phone, sms UNSUBSCRIBED   email yes  sms no     tags t1
#   c  UNSUBSCRIBED, email, no phone                email no   sms no     no tags
#   d  SUBSCRIBED, email, phone                     email yes  sms yes    tags t2
#   e  SUBSCRIBED, no email, phone, sms SUBSCRIBED  email no   sms yes    tags t1 t2 t3


@pytest.fixture
def world(conn: sqlite3.Connection) -> dict[str, Any]:
    w = build_world(conn)
    billing.set_plan(conn, w["ws"], "pro")
    ws = w["ws"]
    # Segment "engaged": open rate >= 50 (a, d). Segment "paris": city contains paris (a, b).
    w["s"] = {
        "engaged": segments.create_segment(conn, ws, {"name": "engaged", "filters": {"condition": "AND", "filters": [
            {"type": "open_rate", "operator": "gte", "value": 50}]}})["id"],
        "paris": segments.create_segment(conn, ws, {"name": "paris", "filters": {"condition": "AND", "filters": [
            {"type": "field", "field_id": w["f"]["city"], "operator": "contains", "value": "paris"}]}})["id"],
    }
    return w


def resolve(conn: sqlite3.Connection, w: dict[str, Any], aud: Any, channel: str = "email") -> set[str]:
    query = audience.resolve_audience(conn, w["ws"], aud, channel)
    names = {v: k for k, v in w["c"].items()}
    rows = [row[0] for row in conn.execute(query.sql, query.params)]
    assert len(rows) == len(set(rows)), "a contact appeared twice"
    assert audience.count_audience(conn, w["ws"], aud, channel) == len(rows)
    return {names[r] for r in rows}


def tags(w: dict[str, Any], *names: str) -> list[int]:
    return [w["t"][n] for n in names]


def segs(w: dict[str, Any], *names: str) -> list[int]:
    return [w["s"][n] for n in names]


def test_entire_audience_per_channel(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    everyone = {"type": "ENTIRE_AUDIENCE"}
    assert resolve(conn, world, everyone, "email") == {"a", "b", "d"}
    assert resolve(conn, world, everyone, "sms") == {"a", "d", "e"}  # b opted out of SMS only


def test_sms_eligibility_statuses(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    everyone = {"type": "ENTIRE_AUDIENCE"}
    for status, eligible in (("SUBSCRIBED", True), ("UNSUBSCRIBED", False), ("CLEANED", False),
                             ("BLOCKED", False)):
        conn.execute("UPDATE contacts SET sms_status = ? WHERE id = ?", (status, world["c"]["a"]))
        assert ("a" in resolve(conn, world, everyone, "sms")) is eligible, status
    # Email opt-out does not affect SMS, and the other way round.
    conn.execute("UPDATE contacts SET sms_status = NULL, status = 'UNSUBSCRIBED' WHERE id = ?", (world["c"]["a"],))
    assert "a" in resolve(conn, world, everyone, "sms")
    assert "a" not in resolve(conn, world, everyone, "email")
    conn.execute("UPDATE contacts SET phone = '' WHERE id = ?", (world["c"]["d"],))
    assert "d" not in resolve(conn, world, everyone, "sms")
    for status in ("UNCONFIRMED", "CLEANED", "COMPLAINED"):
        conn.execute("UPDATE contacts SET status = ? WHERE id = ?", (status, world["c"]["b"]))
        assert "b" not in resolve(conn, world, everyone, "email"), status


def test_tags_include_any_and_exclude(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    assert resolve(conn, world, {"type": "TAGS", "include_tag_ids": tags(world, "t1")}) == {"a", "b"}
    # a has both t1 and t2 and appears once.
    assert resolve(conn, world, {"type": "TAGS", "include_tag_ids": tags(world, "t1", "t2")}) == {"a", "b", "d"}
    assert resolve(conn, world, {"type": "TAGS", "include_tag_ids": tags(world, "t1", "t2"),
                                 "exclude_tag_ids": tags(world, "t1")}) == {"d"}
    assert resolve(conn, world, {"type": "TAGS", "include_tag_ids": tags(world, "t1", "t2")}, "sms") == {"a", "d", "e"}


def test_segments_include_any_and_exclude(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    assert resolve(conn, world, {"type": "SEGMENTS", "include_segment_ids": segs(world, "engaged")}) == {"a", "d"}
    assert resolve(conn, world, {"type": "SEGMENTS",
                                 "include_segment_ids": segs(world, "engaged", "paris")}) == {"a", "b", "d"}
    assert resolve(conn, world, {"type": "SEGMENTS", "include_segment_ids": segs(world, "engaged", "paris"),
                                 "exclude_segment_ids": segs(world, "paris")}) == {"d"}


def test_exclude_segment_whose_filter_is_null_for_a_contact(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    # "paris" compares a city that d does not have: excluding "paris" must keep d.
    aud = {"type": "ENTIRE_AUDIENCE", "exclude_segment_ids": segs(world, "paris")}
    assert resolve(conn, world, aud) == {"d"}
    aud = {"type": "ENTIRE_AUDIENCE", "exclude_segment_ids": segs(world, "paris"),
           "exclude_tag_ids": tags(world, "t2")}
    assert resolve(conn, world, aud) == set()


def test_tags_include_segment_exclude(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    aud = {"type": "TAGS", "include_tag_ids": tags(world, "t1", "t2"), "exclude_segment_ids": segs(world, "engaged")}
    assert resolve(conn, world, aud) == {"b"}
    assert resolve(conn, world, aud, "sms") == {"e"}


def test_segments_are_evaluated_live(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    aud = {"type": "SEGMENTS", "include_segment_ids": segs(world, "engaged")}
    assert resolve(conn, world, aud) == {"a", "d"}
    conn.execute("UPDATE contacts SET unique_opens = 10 WHERE id = ?", (world["c"]["b"],))
    assert resolve(conn, world, aud) == {"a", "b", "d"}  # no recount needed


def test_a_list_of_audiences_is_their_union(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    aud = [{"type": "TAGS", "include_tag_ids": tags(world, "t2"), "exclude_tag_ids": tags(world, "t1")},
           {"type": "SEGMENTS", "include_segment_ids": segs(world, "paris")}]
    assert resolve(conn, world, aud) == {"a", "b", "d"}


def test_other_workspaces_never_leak(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    assert audience.count_audience(conn, world["other"], {"type": "ENTIRE_AUDIENCE"}, "email") == 1
    with pytest.raises(MktError, match="^One or more tags could not be found.$"):
        audience.count_audience(conn, world["other"], {"type": "TAGS", "include_tag_ids": tags(world, "t1")}, "email")
    with pytest.raises(MktError, match="^One or more segments could not be found.$"):
        audience.count_audience(conn, world["other"], {"type": "SEGMENTS",
                                                       "include_segment_ids": segs(world, "paris")}, "email")


def temp_tables(conn: sqlite3.Connection) -> list[str]:
    if is_postgresql(conn):  # this connection's own temporary tables
        return [r[0] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = pg_my_temp_schema() AND relkind = 'r'")]
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_temp_master WHERE type = 'table'")]


def test_batches_without_repeats_from_a_snapshot(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    aud = {"type": "TAGS", "include_tag_ids": tags(world, "t1", "t2")}
    batches = list(audience.iter_audience_batches(conn, world["ws"], aud, "sms", batch_size=2))
    assert [len(b) for b in batches] == [2, 1]
    flat = [i for b in batches for i in b]
    assert sorted(flat) == sorted(world["c"][n] for n in ("a", "d", "e"))  # a has both tags: once
    assert temp_tables(conn) == []  # the snapshot is dropped at the end
    exact = list(audience.iter_audience_batches(conn, world["ws"], aud, "sms", batch_size=3))
    assert [len(b) for b in exact] == [3]
    assert list(audience.iter_audience_batches(conn, world["ws"], {"type": "TAGS",
                                                                   "include_tag_ids": tags(world, "t3")}, "email")) == []
    # A snapshot: contacts added meanwhile are not picked up; closing early drops the table.
    it = audience.iter_audience_batches(conn, world["ws"], {"type": "ENTIRE_AUDIENCE"}, "email", batch_size=1)
    first = next(it)
    conn.execute("UPDATE contacts SET status = 'SUBSCRIBED' WHERE id = ?", (world["c"]["c"],))
    assert len(temp_tables(conn)) == 1
    rest = [i for b in it for i in b]
    assert sorted(first + rest) == sorted(world["c"][n] for n in ("a", "b", "d"))
    it = audience.iter_audience_batches(conn, world["ws"], {"type": "ENTIRE_AUDIENCE"}, "email", batch_size=1)
    next(it)
    it.close()
    assert temp_tables(conn) == []
    with pytest.raises(ValueError):
        next(audience.iter_audience_batches(conn, world["ws"], {"type": "ENTIRE_AUDIENCE"}, "email", batch_size=0))


def test_validate_normalises(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    out = audience.validate_audience(conn, world["ws"], {
        "type": "tags", "include_tag_ids": tags(world, "t1", "t1"), "include_segment_ids": segs(world, "paris"),
        "exclude_tag_ids": [], "exclude_segment_ids": None})
    assert out == [{"type": "TAGS", "include_tag_ids": tags(world, "t1"), "include_segment_ids": None,
                    "exclude_tag_ids": None, "exclude_segment_ids": None}]


@pytest.mark.parametrize(("aud", "message"), [
    ({"type": "EVERYONE"}, "Invalid audience type. Must be 'ENTIRE_AUDIENCE', 'TAGS', or 'SEGMENTS'."),
    ({}, "Invalid audience type. Must be 'ENTIRE_AUDIENCE', 'TAGS', or 'SEGMENTS'."),
    (None, "Invalid audience type. Must be 'ENTIRE_AUDIENCE', 'TAGS', or 'SEGMENTS'."),
    ({"type": "TAGS"}, "At least one tag is required when audience type is 'TAGS'."),
    ({"type": "TAGS", "include_tag_ids": []}, "At least one tag is required when audience type is 'TAGS'."),
    ({"type": "TAGS", "include_tag_ids": [424242]}, "One or more tags could not be found."),
    ({"type": "TAGS", "include_tag_ids": [10**30]}, "One or more tags could not be found."),
    ({"type": "SEGMENTS"}, "At least one segment is required when audience type is 'SEGMENTS'."),
    ({"type": "SEGMENTS", "include_segment_ids": [424242]}, "One or more segments could not be found."),
    ({"type": "ENTIRE_AUDIENCE", "exclude_tag_ids": [424242]}, "One or more exclude tags could not be found."),
    ({"type": "ENTIRE_AUDIENCE", "exclude_segment_ids": [424242]},
     "One or more exclude segments could not be found."),
    ({"type": "TAGS", "include_tag_ids": "1"}, "The member 'audience.include_tag_ids' must be an array."),
    ({"type": "TAGS", "include_tag_ids": ["1"]},
     "The member 'audience.include_tag_ids' must be an array of integers."),
    ([], "The member 'audience' must not be empty."),
    (["x"], "The member 'audience[0]' must be an object."),
    ("TAGS", "The member 'audience' must be an object."),
])
def test_messages(conn: sqlite3.Connection, world: dict[str, Any], aud: Any, message: str) -> None:
    with pytest.raises(MktError) as err:
        audience.count_audience(conn, world["ws"], aud, "email")
    assert (err.value.status, err.value.message) == (400, message)


def test_channel_message(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    with pytest.raises(MktError, match="^Invalid channel. Must be 'email' or 'sms'.$"):
        audience.count_audience(conn, world["ws"], {"type": "ENTIRE_AUDIENCE"}, "fax")


def test_audience_count_body(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    out = audience.audience_count(conn, world["ws"], {"audience": {"type": "ENTIRE_AUDIENCE"}, "channel": "SMS"})
    assert out == {"channel": "sms", "count": 3, "audience": [
        {"type": "ENTIRE_AUDIENCE", "include_tag_ids": None, "include_segment_ids": None,
         "exclude_tag_ids": None, "exclude_segment_ids": None}]}
    assert audience.audience_count(conn, world["ws"], {"audience": {"type": "ENTIRE_AUDIENCE"}})["channel"] == "email"
    with pytest.raises(MktError, match="^Invalid request body.$"):
        audience.audience_count(conn, world["ws"], [])

"""Bulk tagging (automations/tagging.py over contacts/tagging.py): selections, counts, events
only for the contacts that change, the flows they trigger enrolled at once, exactly as the
per-contact path's events enroll them through the automations pass."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.automations import flows, tagging, triggers
from marketing_cli.services.contacts import records
from tests import factories as f

EMAILS = [f"p{i}@example.com" for i in range(7)]


def _world(conn: Any, ws: int) -> dict[str, Any]:
    billing.set_allowance(conn, ws, "automations", 20)
    w = {"ws": ws, "vip": f.tag(conn, ws, "vip"), "other": f.tag(conn, ws, "other"), "city": f.field(conn, ws, "city")}
    w["ids"] = {e: f.contact(conn, ws, e, city="Rome" if i % 2 else "Oslo")["id"] for i, e in enumerate(EMAILS)}
    return w


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    return _world(conn, workspace["id"])


def _events(conn: Any, ws: int, kind: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT contact_id FROM contact_events WHERE workspace_id = ? AND type = ?"
                                       " ORDER BY id", (ws, kind))]


def _tagged(conn: Any, tag: int) -> set[str]:
    return {r[0] for r in conn.execute("SELECT contact_id FROM contact_tags WHERE tag_id = ?", (tag,))}


def test_a_search_tags_its_contacts_with_one_event_each_for_those_that_change(conn: Any, world: dict[str, Any]) -> None:
    ws, ids = world["ws"], world["ids"]
    records.add_contact_tags(conn, ws, ids["p1@example.com"], {"tag_ids": [world["vip"]]})  # has it already
    conn.execute("UPDATE contacts SET updated_at = '2020-01-01T00:00:00.000000Z' WHERE workspace_id = ?", (ws,))
    before = {r[0]: r[1] for r in conn.execute("SELECT id, updated_at FROM contacts WHERE workspace_id = ?", (ws,))}
    done = tagging.tag_contacts(conn, ws, world["vip"], {"search": {"fields": [
        {"merge_tag": "city", "operator": "EQUALS", "value": "Rome"}]}}, batch=2)
    rome = {ids[e] for i, e in enumerate(EMAILS) if i % 2}
    assert done == {"tag_id": world["vip"], "selected": 3, "tagged": 2, "already_tagged": 1, "not_found": 0,
                    "enrolled": 0}
    assert _tagged(conn, world["vip"]) == rome
    assert _events(conn, ws, "TAG_ADDED") == [ids["p1@example.com"], *sorted(rome - {ids["p1@example.com"]})]
    after = {r[0]: r[1] for r in conn.execute("SELECT id, updated_at FROM contacts WHERE workspace_id = ?", (ws,))}
    assert {c for c in after if after[c] != before[c]} == rome - {ids["p1@example.com"]}


def test_every_selector_and_its_counts(conn: Any, world: dict[str, Any]) -> None:
    ws, ids, vip = world["ws"], world["ids"], world["vip"]
    by_list = tagging.tag_contacts(conn, ws, vip, {"emails": ["P0@example.com", "p0@example.com", "nobody@example.com",
                                                              "p2@example.com"]})
    assert by_list == {"tag_id": vip, "selected": 2, "tagged": 2, "already_tagged": 0, "not_found": 1, "enrolled": 0}
    by_id = tagging.tag_contacts(conn, ws, vip, {"contact_ids": [ids["p2@example.com"], ids["p3@example.com"],
                                                                 "ab" * 12]})
    assert by_id == {"tag_id": vip, "selected": 2, "tagged": 1, "already_tagged": 1, "not_found": 1, "enrolled": 0}
    segment = f.segment(conn, ws, "Tagged", {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [vip]}]})
    other = tagging.tag_contacts(conn, ws, world["other"], {"segment_id": segment["id"]})
    assert other["selected"] == other["tagged"] == 3
    assert _tagged(conn, world["other"]) == {ids[e] for e in ("p0@example.com", "p2@example.com", "p3@example.com")}
    everyone = tagging.tag_contacts(conn, ws, vip, {"search": {}})
    assert (everyone["selected"], everyone["tagged"], everyone["already_tagged"]) == (7, 4, 3)


def test_untag_fires_tag_removed_only_for_contacts_that_had_it(conn: Any, world: dict[str, Any]) -> None:
    ws, ids, vip = world["ws"], world["ids"], world["vip"]
    tagging.tag_contacts(conn, ws, vip, {"emails": EMAILS[:3]})
    done = tagging.untag_contacts(conn, ws, vip, {"search": {"status": "SUBSCRIBED"}}, batch=3)
    assert done == {"tag_id": vip, "selected": 7, "untagged": 3, "not_tagged": 4, "not_found": 0, "enrolled": 0}
    assert _tagged(conn, vip) == set()
    assert _events(conn, ws, "TAG_REMOVED") == sorted(ids[e] for e in EMAILS[:3])


def test_a_segment_whose_membership_the_tagging_changes_is_walked_once(conn: Any, world: dict[str, Any]) -> None:
    ws, vip = world["ws"], world["vip"]
    untagged = f.segment(conn, ws, "Not VIP", {"condition": "AND", "filters": [
        {"type": "tags", "operator": "not_contains", "value": [vip]}]})
    done = tagging.tag_contacts(conn, ws, vip, {"segment_id": untagged["id"]}, batch=2)
    assert (done["selected"], done["tagged"]) == (7, 7)
    assert len(_events(conn, ws, "TAG_ADDED")) == 7


# --- enrollment: the bulk path and the per-contact path agree --------------------------------

FLOWS = {
    "once": {"triggers": [{"type": "tag_added", "tag": "vip"}]},
    "every": {"triggers": [{"type": "tag_added", "tag": "vip"}], "reentry": "every_time"},
    "cool": {"triggers": [{"type": "tag_added", "tag": "vip"}], "reentry": "cooldown", "cooldown": {"days": 7}},
    "paused": {"triggers": [{"type": "tag_added", "tag": "vip"}]},
    "other": {"triggers": [{"type": "tag_added", "tag": "other"}]},
    "removed": {"triggers": [{"type": "tag_removed", "tag": "vip"}], "reentry": "every_time"},
    "segment": {"triggers": [{"type": "segment_entered", "segment_id": "VIPs"}]},
}


def _flows(conn: Any, w: dict[str, Any]) -> dict[str, int]:
    f.segment(conn, w["ws"], "VIPs", {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [w["vip"]]}]})
    made = {}
    for name, doc in FLOWS.items():
        doc = {"name": name, **copy.deepcopy(doc), "steps": [{"id": "w", "type": "wait", "duration": {"days": 30}}]}
        for trigger in doc["triggers"]:
            if "segment_id" in trigger:
                trigger["segment_id"] = conn.execute("SELECT id FROM segments WHERE workspace_id = ? AND name = ?",
                                                  (w["ws"], trigger["segment_id"])).fetchone()[0]
        made[name] = f.automation(conn, w["ws"], doc)["id"]
    flows.pause_automation(conn, w["ws"], made["paused"])
    return made


def _history(conn: Any, w: dict[str, Any], made: dict[str, int]) -> None:
    """Before the tagging: p0 in `every` now, p1 through `once` already (completed), p2 in `cool`
    three days ago (completed), all by hand; p3 has the tag (no event expected for it)."""
    ids, now = w["ids"], clock.now()
    past = clock.format_ts(clock.utcnow() - timedelta(days=3))
    for name, email, status, at in (("every", "p0", "active", now), ("once", "p1", "completed", now),
                                    ("cool", "p2", "completed", past)):
        version = conn.execute("SELECT id FROM automation_versions WHERE automation_id = ?",
                               (made[name],)).fetchone()[0]
        key = "once" if name == "once" else "manual:x"
        conn.execute("INSERT INTO automation_enrollments (automation_id, version_id, workspace_id, contact_id,"
                     " entry_key, entry_event_id, status, step_id, seq, next_run_at, entered_at, updated_at)"
                     " VALUES (?, ?, ?, ?, ?, 0, ?, 'w', 0, ?, ?, ?)",
                     (made[name], version, w["ws"], ids[f"{email}@example.com"], key, status, at, at, at))
    records.add_contact_tags(conn, w["ws"], ids["p3@example.com"], {"tag_ids": [w["vip"]]})
    triggers.read_all_events(conn)


def _enrollments(conn: Any, w: dict[str, Any], made: dict[str, int]) -> set[tuple[str, str, str, str]]:
    names = {v: k for k, v in made.items()}
    emails = {v: k for k, v in w["ids"].items()}
    return {(names[r["automation_id"]], emails[r["contact_id"]], r["entry_key"].split(":")[0], r["status"])
            for r in conn.execute("SELECT * FROM automation_enrollments WHERE workspace_id = ?", (w["ws"],))}


def test_the_bulk_path_enrolls_exactly_as_per_contact_calls_and_the_automations_pass(conn: Any) -> None:
    one, bulk = (_world(conn, f.workspace(conn, name)["id"]) for name in ("One by one", "Bulk"))
    made = {id(w): _flows(conn, w) for w in (one, bulk)}
    for w in (one, bulk):
        _history(conn, w, made[id(w)])
    for contact_id in one["ids"].values():
        records.add_contact_tags(conn, one["ws"], contact_id, {"tag_ids": [one["vip"]]})
    triggers.read_all_events(conn)
    count = "SELECT count(*) FROM automation_enrollments WHERE workspace_id = ?"
    had = conn.execute(count, (bulk["ws"],)).fetchone()[0]
    done = tagging.tag_contacts(conn, bulk["ws"], bulk["vip"], {"search": {}}, batch=3)
    expected = _enrollments(conn, one, made[id(one)])
    assert _enrollments(conn, bulk, made[id(bulk)]) == expected
    assert done["enrolled"] == conn.execute(count, (bulk["ws"],)).fetchone()[0] - had > 0
    assert done["tagged"] == 6  # p3 had the tag: no event, no enrollment for it
    assert ("once", "p1@example.com", "once", "active") not in expected  # once: never again
    assert ("cool", "p2@example.com", "event", "active") not in expected  # within its cooldown
    assert not {e for e in expected if e[0] in ("paused", "other", "removed")}
    assert {e[1] for e in expected if e[0] == "segment"} == set(EMAILS)
    # untagging: the tag_removed flow, both ways again
    for contact_id in one["ids"].values():
        records.remove_contact_tags(conn, one["ws"], contact_id, {"tag_ids": [one["vip"]]})
    triggers.read_all_events(conn)
    tagging.untag_contacts(conn, bulk["ws"], bulk["vip"], {"emails": EMAILS})
    assert _enrollments(conn, bulk, made[id(bulk)]) == _enrollments(conn, one, made[id(one)])
    assert len({e for e in _enrollments(conn, one, made[id(one)]) if e[0] == "removed"}) == 7
    assert triggers.read_all_events(conn)["enrolled"] == 0  # the cursor is past every event


def test_events_written_before_are_read_first_and_not_counted(conn: Any, world: dict[str, Any]) -> None:
    ws, ids = world["ws"], world["ids"]
    other = f.automation(conn, ws, {"name": "Other", "triggers": [{"type": "tag_added", "tag": "other"}],
                                    "steps": [{"id": "w", "type": "wait", "duration": {"days": 1}}]})["id"]
    vip = f.automation(conn, ws, {"name": "VIP", "triggers": [{"type": "tag_added", "tag": "vip"}],
                                  "steps": [{"id": "w", "type": "wait", "duration": {"days": 1}}]})["id"]
    records.add_contact_tags(conn, ws, ids["p0@example.com"], {"tag_ids": [world["other"]]})  # not read yet
    done = tagging.tag_contacts(conn, ws, world["vip"], {"emails": EMAILS[:2]})
    assert done["enrolled"] == 2
    rows = conn.execute("SELECT automation_id, count(*) FROM automation_enrollments GROUP BY automation_id").fetchall()
    assert dict((r[0], r[1]) for r in rows) == {other: 1, vip: 2}
    assert conn.execute("SELECT count(*) FROM jobs WHERE dedupe_key = ?", (triggers.RUN_JOB,)).fetchone()[0] == 1


def test_without_any_flow_it_tags_and_enrolls_nobody(conn: Any, world: dict[str, Any]) -> None:
    done = tagging.tag_contacts(conn, world["ws"], world["vip"], {"search": {}})
    assert (done["tagged"], done["enrolled"]) == (7, 0)
    assert conn.execute("SELECT count(*) FROM automation_cursors").fetchone()[0] == 0


@pytest.mark.parametrize(("tag", "body", "status", "message"), [
    (999, {"search": {}}, 404, "We couldn't find a tag with that ID in this workspace."),
    ("x", {"search": {}}, 400, "Please provide a valid tag ID."),
    ("vip", {}, 400, "Please provide exactly one of 'search', 'segment_id', 'emails' or 'contact_ids'"),
    ("vip", {"search": {}, "segment_id": 1}, 400, "Please provide exactly one of"),
    ("vip", {"serch": {}}, 400, "Unknown member 'serch'"),
    ("vip", {"search": {"page": 2}}, 400, "Unknown member 'search.page'"),
    ("vip", {"search": {"fields": [{"merge_tag": "nope", "operator": "EQUALS", "value": 1}]}}, 400, "nope"),
    ("vip", {"search": []}, 400, "The member 'search' must be"),
    ("vip", {"segment_id": 424242}, 404, "We were unable to find the segment."),
    ("vip", {"emails": []}, 400, "The member 'emails' must hold at least one entry."),
    ("vip", {"emails": ["a@example.com", "not an address"]}, 400,
     "The member 'emails' holds an entry that is not an email address: 'not an address' (entry 2)."),
    ("vip", {"contact_ids": ["123"]}, 400, "The member 'contact_ids' holds an entry that is not a contact ID"),
    ("vip", {"emails": "a@example.com"}, 400, "The member 'emails' must be"),
    ("vip", [], 400, "Invalid request body."),
])
def test_bad_requests_are_refused_before_anything_is_written(conn: Any, world: dict[str, Any], tag: Any, body: Any,
                                                              status: int, message: str) -> None:
    tag_id = world["vip"] if tag == "vip" else tag
    with pytest.raises(MktError) as refused:
        tagging.tag_contacts(conn, world["ws"], tag_id, body)
    assert refused.value.status == status and message in refused.value.message
    assert _tagged(conn, world["vip"]) == set() and not _events(conn, world["ws"], "TAG_ADDED")


def test_a_list_longer_than_the_limit_is_refused(conn: Any, world: dict[str, Any], monkeypatch: Any) -> None:
    from marketing_cli.kernel import limits

    monkeypatch.setattr(limits, "TAG_LIST", 3)
    with pytest.raises(MktError, match="can hold at most 3 entries"):
        tagging.tag_contacts(conn, world["ws"], world["vip"], {"emails": EMAILS[:4]})

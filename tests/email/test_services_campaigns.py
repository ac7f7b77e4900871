"""Email campaigns service: create, list, get, configure (every rule, in order), states."""

from __future__ import annotations

import json
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.email import campaigns as c
from tests import factories as f


def err(fn: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as info:
        fn(*args, **kwargs)
    return info.value.status, info.value.message


# --- create ---------------------------------------------------------------------------------

def test_create_single_variant_has_variant_a_in_draft(conn: Any, workspace: dict[str, Any]) -> None:
    made = c.create_campaign(conn, workspace["id"], {"name": "  Spring sale  "})
    assert made["name"] == "Spring sale" and made["type"] == "SINGLE_VARIANT" and made["status"] == "DRAFT"
    assert made["sender_identity"] is None and made["reply_to"] is None and made["audience"] == []
    [variant] = made["variants"]
    assert variant["type"] == "A" and len(variant["id"]) == 24 and variant["template_type"] == "EDITOR"
    assert made["created_at"].endswith("Z")


def test_create_ab_testing_has_two_variants_case_insensitive(conn: Any, workspace: dict[str, Any]) -> None:
    made = c.create_campaign(conn, workspace["id"], {"name": "AB", "type": "ab_testing"})
    assert made["type"] == "AB_TESTING"
    assert [v["type"] for v in made["variants"]] == ["A", "B"]
    assert made["variants"][0]["id"] != made["variants"][1]["id"]


@pytest.mark.parametrize(("body", "message"), [
    ([], c.CREATE_INVALID_BODY),
    ({}, c.NAME_REQUIRED),
    ({"name": "   "}, c.NAME_REQUIRED),
    ({"name": "x" * 256}, c.NAME_TOO_LONG),
    ({"name": 5}, "The member 'name' must be a string."),
    ({"name": "ok", "type": "MULTI"}, c.TYPE_INVALID),
    ({"name": "ok", "type": 3}, c.TYPE_INVALID),
])
def test_create_refuses_bad_bodies(conn: Any, workspace: dict[str, Any], body: Any, message: str) -> None:
    assert err(c.create_campaign, conn, workspace["id"], body) == (400, message)
    assert conn.execute("SELECT COUNT(*) FROM campaigns").fetchone()[0] == 0


def test_name_of_255_characters_is_accepted(conn: Any, workspace: dict[str, Any]) -> None:
    assert c.create_campaign(conn, workspace["id"], {"name": "x" * 255})["name"] == "x" * 255


# --- get and list -----------------------------------------------------------------------------

def test_get_refuses_missing_malformed_and_foreign_ids(conn: Any, workspace: dict[str, Any]) -> None:
    other = f.workspace(conn, "Other workspace")
    foreign = f.campaign(conn, other["id"])
    assert err(c.get_campaign, conn, workspace["id"], " ") == (400, c.ID_REQUIRED)
    assert err(c.get_campaign, conn, workspace["id"], "nope") == (400, c.NOT_FOUND)
    assert err(c.get_campaign, conn, workspace["id"], "a" * 24) == (400, c.NOT_FOUND)
    assert err(c.get_campaign, conn, workspace["id"], foreign["id"]) == (400, c.NOT_FOUND)
    assert c.get_campaign(conn, other["id"], foreign["id"])["id"] == foreign["id"]


def test_list_pages_newest_first_with_sanitised_limit(conn: Any, workspace: dict[str, Any]) -> None:
    ids = [f.campaign(conn, workspace["id"], f"C{i}")["id"] for i in range(5)]
    page = c.list_campaigns(conn, workspace["id"], page="2", limit="2")
    assert [x["id"] for x in page["campaigns"]] == [ids[2], ids[1]]
    assert page["pagination"] == {"current_page": 2, "per_page": 2, "total_pages": 3, "total_count": 5}
    assert c.list_campaigns(conn, workspace["id"], limit="1000")["pagination"]["per_page"] == 100
    for bad in ("0", "-3", "abc", "", None):
        assert c.list_campaigns(conn, workspace["id"], page=bad, limit=bad)["pagination"]["per_page"] == 50
    assert c.list_campaigns(conn, workspace["id"], page=9)["campaigns"] == []
    assert all(x["status"] == "DRAFT" and x["variants"] for x in page["campaigns"])


def test_list_filters_by_status_and_refuses_unknown_status(conn: Any, workspace: dict[str, Any]) -> None:
    draft = f.campaign(conn, workspace["id"], "Draft")
    queued = f.campaign(conn, workspace["id"], "Queued")
    c.set_campaign_status(conn, queued["id"], "QUEUED")
    assert [x["id"] for x in c.list_campaigns(conn, workspace["id"], status="queued")["campaigns"]] == [queued["id"]]
    assert [x["id"] for x in c.list_campaigns(conn, workspace["id"], status="DRAFT")["campaigns"]] == [draft["id"]]
    assert err(c.list_campaigns, conn, workspace["id"], status="DONE") == (400, "Invalid status 'DONE'.")


def test_list_is_workspace_scoped(conn: Any, workspace: dict[str, Any]) -> None:
    other = f.workspace(conn, "Other workspace")
    f.campaign(conn, other["id"])
    assert c.list_campaigns(conn, workspace["id"])["pagination"]["total_count"] == 0


# --- configure --------------------------------------------------------------------------------

@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    vip = f.tag(conn, ws, "vip")
    seg = f.segment(conn, ws, "All vip", {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [vip]}]})["id"]
    return {"ws": ws, "sender": f.campaign_sender(conn, ws), "vip": vip, "segment": seg,
            "single": f.campaign(conn, ws), "ab": f.campaign(conn, ws, "AB", "AB_TESTING")}


def test_configure_sets_every_section(conn: Any, world: dict[str, Any]) -> None:
    cid = world["single"]["id"]
    out = c.configure_campaign(conn, world["ws"], cid, {
        "sender": {"sender_identity_id": world["sender"],
                   "reply_to": {"display_name": "Help", "local_part": "Help", "domain_name": "Example.COM"}},
        "audience": {"type": "tags", "include_tag_ids": [world["vip"]], "exclude_segment_ids": [world["segment"]]},
        "variants": [{"type": "a", "subject": "  Hello there  ", "preview_text": "Read me"}]})
    assert set(out) == {"id", "name", "type", "sender_identity", "reply_to", "audience", "variants"}
    assert out["sender_identity"] == {"display_name": "News Team", "local_part": "news", "domain_name": "example.com"}
    assert out["reply_to"] == {"display_name": "Help", "local_part": "help", "domain_name": "example.com"}
    assert out["audience"] == [{"type": "TAGS", "include_tag_ids": [world["vip"]], "include_segment_ids": None,
                                "exclude_tag_ids": None, "exclude_segment_ids": [world["segment"]]}]
    assert out["variants"][0] == {**world["single"]["variants"][0], "subject": "Hello there",
                                  "preview_text": "Read me"}


def test_configure_leaves_omitted_sections_and_replaces_given_ones(conn: Any, world: dict[str, Any]) -> None:
    cid, ws = world["ab"]["id"], world["ws"]
    c.configure_campaign(conn, ws, cid, {
        "sender": {"sender_identity_id": world["sender"],
                   "reply_to": {"display_name": "", "local_part": "r", "domain_name": "example.com"}},
        "audience": {"type": "ENTIRE_AUDIENCE"},
        "variants": [{"type": "A", "subject": "Subject A", "preview_text": "pa"},
                     {"type": "B", "subject": "Subject B", "preview_text": "pb"}]})
    out = c.configure_campaign(conn, ws, cid, {"sender": {"sender_identity_id": world["sender"]}})
    assert out["reply_to"] is None  # a given sender replaces the whole section
    assert out["audience"][0]["type"] == "ENTIRE_AUDIENCE"
    assert [v["subject"] for v in out["variants"]] == ["Subject A", "Subject B"]
    out = c.configure_campaign(conn, ws, cid, {"variants": [{"type": "B", "subject": "New B"},
                                                            {"type": "A", "subject": "New A", "preview_text": None}]})
    assert [(v["subject"], v["preview_text"]) for v in out["variants"]] == [("New A", ""), ("New B", "pb")]
    assert [v["id"] for v in out["variants"]] == [v["id"] for v in world["ab"]["variants"]]
    assert c.configure_campaign(conn, ws, cid, {})["variants"] == out["variants"]


def _configure_error(conn: Any, world: dict[str, Any], body: Any, campaign: str = "single") -> tuple[int, str]:
    return err(c.configure_campaign, conn, world["ws"], world[campaign]["id"], body)


@pytest.mark.parametrize(("body", "message"), [
    ({"sender": {}}, c.SENDER_INVALID),
    ({"sender": {"sender_identity_id": "x"}}, c.SENDER_INVALID),
    ({"sender": {"sender_identity_id": 0}}, c.SENDER_INVALID),
    ({"sender": {"sender_identity_id": 999}}, c.SENDER_NOT_FOUND),
    ({"sender": "me"}, "The member 'sender' must be an object."),
    ({"audience": {"type": "ALL"}}, "Invalid audience type. Must be 'ENTIRE_AUDIENCE', 'TAGS', or 'SEGMENTS'."),
    ({"audience": {"type": "TAGS", "include_tag_ids": []}}, "At least one tag is required when audience type is 'TAGS'."),
    ({"audience": {"type": "TAGS", "include_tag_ids": [999]}}, "One or more tags could not be found."),
    ({"audience": {"type": "SEGMENTS"}}, "At least one segment is required when audience type is 'SEGMENTS'."),
    ({"audience": {"type": "SEGMENTS", "include_segment_ids": [999]}}, "One or more segments could not be found."),
    ({"audience": {"type": "ENTIRE_AUDIENCE", "exclude_tag_ids": [999]}},
     "One or more exclude tags could not be found."),
    ({"audience": {"type": "ENTIRE_AUDIENCE", "exclude_segment_ids": [999]}},
     "One or more exclude segments could not be found."),
    ({"variants": [{"type": "C", "subject": "Hello"}]}, c.VARIANT_TYPE_INVALID),
    ({"variants": [{"subject": "Hello"}]}, c.VARIANT_TYPE_INVALID),
    ({"variants": [{"type": "A", "subject": "Hello"}, {"type": "B", "subject": "Hello"}]}, c.SINGLE_NO_B),
    ({"variants": []}, c.SINGLE_NEEDS_A),
    ({"variants": [{"type": "A", "subject": "Hello"}, {"type": "a", "subject": "Hi!"}]},
     "Variant 'A' is given more than once."),
    ({"variants": [{"type": "A"}]}, c.SUBJECT_REQUIRED),
    ({"variants": [{"type": "A", "subject": "   "}]}, c.SUBJECT_REQUIRED),
    ({"variants": [{"type": "A", "subject": "Hi"}]}, c.SUBJECT_TOO_SHORT),
    ({"variants": [{"type": "A", "subject": "x" * 91}]}, c.SUBJECT_TOO_LONG),
    ({"variants": [{"type": "A", "subject": "Hello", "preview_text": "p" * 121}]}, c.PREVIEW_TOO_LONG),
    ({"variants": {"type": "A"}}, "The member 'variants' must be an array."),
    ({"variants": [{"type": "A", "subject": 3}]}, "The member 'variants[0].subject' must be a string."),
    ([1], c.INVALID_BODY),
])
def test_configure_messages(conn: Any, world: dict[str, Any], body: Any, message: str) -> None:
    before = c.get_campaign(conn, world["ws"], world["single"]["id"])
    assert _configure_error(conn, world, body) == (400, message)
    assert c.get_campaign(conn, world["ws"], world["single"]["id"]) == before


def test_configure_ab_rules(conn: Any, world: dict[str, Any]) -> None:
    assert _configure_error(conn, world, {"variants": [{"type": "A", "subject": "Hello"}]}, "ab") == \
        (400, c.AB_NEEDS_BOTH)
    assert _configure_error(conn, world, {"variants": [{"type": "B", "subject": "Hello"}]}, "ab") == \
        (400, c.AB_NEEDS_BOTH)


def test_configure_subject_and_preview_bounds_are_inclusive(conn: Any, world: dict[str, Any]) -> None:
    out = c.configure_campaign(conn, world["ws"], world["single"]["id"], {
        "variants": [{"type": "A", "subject": "abc" * 30, "preview_text": "p" * 120}]})
    assert len(out["variants"][0]["subject"]) == 90 and len(out["variants"][0]["preview_text"]) == 120
    out = c.configure_campaign(conn, world["ws"], world["single"]["id"], {"variants": [{"type": "A", "subject": "abc"}]})
    assert out["variants"][0]["subject"] == "abc"


def test_configure_checks_in_the_specifications_order(conn: Any, world: dict[str, Any]) -> None:
    everything_wrong = {"sender": {"sender_identity_id": 999}, "audience": {"type": "ALL"},
                        "variants": [{"type": "Z"}]}
    assert _configure_error(conn, world, everything_wrong) == (400, c.SENDER_NOT_FOUND)
    del everything_wrong["sender"]
    assert _configure_error(conn, world, everything_wrong)[1].startswith("Invalid audience type")
    del everything_wrong["audience"]
    assert _configure_error(conn, world, everything_wrong) == (400, c.VARIANT_TYPE_INVALID)
    assert err(c.configure_campaign, conn, world["ws"], "f" * 24, everything_wrong) == (400, c.NOT_FOUND)
    assert err(c.configure_campaign, conn, world["ws"], "", everything_wrong) == (400, c.ID_REQUIRED)


def test_configure_is_all_or_nothing(conn: Any, world: dict[str, Any]) -> None:
    body = {"sender": {"sender_identity_id": world["sender"]}, "audience": {"type": "ENTIRE_AUDIENCE"},
            "variants": [{"type": "A", "subject": "no"}]}
    assert _configure_error(conn, world, body) == (400, c.SUBJECT_TOO_SHORT)
    row = conn.execute("SELECT sender_identity_id, audience FROM campaigns WHERE id = ?",
                       (world["single"]["id"],)).fetchone()
    assert tuple(row) == (None, None)


def test_configure_refuses_another_workspaces_sender(conn: Any, world: dict[str, Any]) -> None:
    other = f.workspace(conn, "Other workspace")
    foreign = f.campaign_sender(conn, other["id"], "other.example")
    assert _configure_error(conn, world, {"sender": {"sender_identity_id": foreign}}) == (400, c.SENDER_NOT_FOUND)


@pytest.mark.parametrize(("reply_to", "message"), [
    ({"display_name": "x", "domain_name": "example.com"}, c.REPLY_TO_INCOMPLETE),
    ({"local_part": "x"}, c.REPLY_TO_INCOMPLETE),
    ({"local_part": "a b", "domain_name": "example.com"}, c.REPLY_TO_INVALID),
    ({"local_part": "x", "domain_name": "nodot"}, c.REPLY_TO_INVALID),
    ({"local_part": "jürgen", "domain_name": "example.com"}, c.REPLY_TO_NOT_ASCII),
    ({"display_name": "a\r\nBcc: x@y.z", "local_part": "x", "domain_name": "example.com"}, c.REPLY_TO_INVALID),
    ("x@example.com", "The member 'sender.reply_to' must be an object."),
    ({"local_part": 1, "domain_name": "example.com"}, "The member 'sender.reply_to.local_part' must be a string."),
])
def test_configure_checks_reply_to(conn: Any, world: dict[str, Any], reply_to: Any, message: str) -> None:
    body = {"sender": {"sender_identity_id": world["sender"], "reply_to": reply_to}}
    assert _configure_error(conn, world, body) == (400, message)


def test_configure_needs_draft(conn: Any, world: dict[str, Any]) -> None:
    c.set_campaign_status(conn, world["single"]["id"], "QUEUED")
    assert _configure_error(conn, world, {}) == (400, c.NOT_DRAFT)


def test_configure_stores_audience_the_resolver_reads(conn: Any, world: dict[str, Any]) -> None:
    from marketing_cli.services.contacts.audience import count_audience

    f.contact(conn, world["ws"], "a@example.com", tags=[world["vip"]])
    f.contact(conn, world["ws"], "b@example.com")
    c.configure_campaign(conn, world["ws"], world["single"]["id"],
                         {"audience": {"type": "TAGS", "include_tag_ids": [world["vip"]]}})
    stored = json.loads(conn.execute("SELECT audience FROM campaigns WHERE id = ?",
                                     (world["single"]["id"],)).fetchone()[0])
    assert count_audience(conn, world["ws"], stored, "email") == 1


# --- the status machine -------------------------------------------------------------------------

def test_every_status_has_a_row_and_moves_only_to_known_statuses() -> None:
    assert set(c.TRANSITIONS) == set(c.STATUSES)
    assert all(targets <= set(c.STATUSES) for targets in c.TRANSITIONS.values())
    assert c.TRANSITIONS["SENT"] == c.TRANSITIONS["CANCELLED"] == frozenset({"ARCHIVED"})  # then only deleted
    assert c.TRANSITIONS["ARCHIVED"] == frozenset()


def test_set_campaign_status_follows_the_table(conn: Any, workspace: dict[str, Any]) -> None:
    cid = f.campaign(conn, workspace["id"])["id"]
    path = ["QUEUED", "PREPROCESSING", "IN_REVIEW", "SENDING", "PAUSED", "SENDING", "SENT"]
    previous = "DRAFT"
    for status in path:
        assert c.set_campaign_status(conn, cid, status) == previous
        previous = status
    assert c.get_campaign(conn, workspace["id"], cid)["status"] == "SENT"
    assert err(c.set_campaign_status, conn, cid, "DRAFT") == (409, "A campaign cannot move from SENT to DRAFT.")
    assert c.get_campaign(conn, workspace["id"], cid)["status"] == "SENT"


def test_set_campaign_status_refuses_illegal_moves(conn: Any, workspace: dict[str, Any]) -> None:
    cid = f.campaign(conn, workspace["id"])["id"]
    assert err(c.set_campaign_status, conn, cid, "SENT") == (409, "A campaign cannot move from DRAFT to SENT.")
    with pytest.raises(ValueError):
        c.set_campaign_status(conn, cid, "DONE")
    assert err(c.set_campaign_status, conn, "f" * 24, "QUEUED") == (400, c.NOT_FOUND)

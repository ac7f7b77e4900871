"""Flows: the document's shape, publishing (graph, references, versions), the lifecycle and
the plan allowance."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import billing
from marketing_cli.services.automations import flows
from marketing_cli.services.automations.format import flow_schema
from tests import factories as f


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    return {"ws": ws, "sender": f.verified_sender(conn, ws), "vip": f.tag(conn, ws, "vip"),
            "city": f.field(conn, ws, "city")}


def _doc(sender: int, **extra: Any) -> dict[str, Any]:
    return {"name": "Welcome", "triggers": [{"type": "tag_added", "tag": "vip"}],
            "steps": [f.email_step("hello", sender, "wait"),
                      {"id": "wait", "type": "wait", "duration": {"days": 1}, "next": "tag"},
                      {"id": "tag", "type": "add_tag", "tag": "vip"}], **extra}


def _error(fn: Any, *args: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as caught:
        fn(*args)
    return caught.value.status, caught.value.message


def test_create_is_a_draft_and_publish_makes_version_1_active(conn: Any, world: dict[str, Any]) -> None:
    created = flows.create_automation(conn, world["ws"], _doc(world["sender"]))
    assert created["status"] == "DRAFT" and created["current_version"] is None and created["versions"] == []
    published = flows.publish_automation(conn, world["ws"], created["id"])
    assert published["status"] == "ACTIVE" and published["current_version"] == 1
    version = flows.get_version(conn, world["ws"], created["id"], 1)
    steps = {s["id"]: s for s in version["flow"]["steps"]}
    assert steps["tag"]["tag_id"] == world["vip"] and steps["wait"]["seconds"] == 86400
    assert "unsubscribe_url" in steps["hello"]["body_html"]
    assert version["flow"]["triggers"][0]["event_type"] == "TAG_ADDED"


@pytest.mark.parametrize(("change", "message"), [
    ({"steps": [{"id": "a", "type": "wait", "duration": {"days": 1}, "next": "b"},
                {"id": "b", "type": "add_tag", "tag": "vip"}, {"id": "c", "type": "exit"}]},
     "No path from the start reaches the step(s): c."),
    ({"steps": [{"id": "a", "type": "add_tag", "tag": "vip", "next": "b"},
                {"id": "b", "type": "remove_tag", "tag": "vip", "next": "a"}]},
     "The steps a -> b -> a form a cycle without a wait: add a wait step to it."),
    ({"steps": [{"id": "a", "type": "add_tag", "tag": "gold"}]},
     "Step 'a' (steps[0]) names the tag 'gold', which the workspace does not have."),
    ({"steps": [{"id": "a", "type": "set_field", "field": "zip", "value": "1"}]},
     "Step 'a' (steps[0]) names the field 'zip', which the workspace does not have."),
    ({"steps": [{"id": "a", "type": "split", "condition": {"kind": "segment", "segment_id": 99}}]},
     "Step 'a' (steps[0]) names the segment 99, which the workspace does not have."),
    ({"steps": [{"id": "a", "type": "send_email", "sender_id": 99, "subject": "Hello", "html": "<p>x</p>"}]},
     "Step 'a' (steps[0]) names the sender 99, which the workspace does not have."),
    ({"steps": [{"id": "a", "type": "send_email", "sender_id": 1, "subject": "Hello", "template_id": 42}]},
     "Step 'a' (steps[0]) names the template 42, which the workspace does not have."),
    ({"steps": [{"id": "a", "type": "send_email", "sender_id": 1, "subject": "Hi {{contact.nickname}}",
                 "html": "<p>{{confirmation_url}} {{coupon}}</p>"}]},
     "Step 'a' (steps[0]) uses merge tags the workspace does not define: {{contact.nickname}}, {{coupon}}."),
    ({"triggers": [{"type": "tag_removed", "tag": "nope"}]},
     "triggers[0] names the tag 'nope', which the workspace does not have."),
    ({"steps": [{"id": "a", "type": "send_email", "sender_id": 1, "subject": "Hello", "html": "<p>No way out</p>"}]},
     "Step 'a' (steps[0]) has no unsubscribe link: add {{unsubscribe_url}} to its HTML."),
])
def test_publishing_refuses_a_bad_graph_or_reference(conn: Any, world: dict[str, Any], change: dict[str, Any],
                                                     message: str) -> None:
    created = flows.create_automation(conn, world["ws"], {**_doc(world["sender"]), **change})
    assert _error(flows.publish_automation, conn, world["ws"], created["id"]) == (400, message)
    after = flows.get_automation(conn, world["ws"], created["id"])
    assert after["status"] == "DRAFT" and after["versions"] == []  # nothing written


def test_a_sender_on_an_unverified_domain_is_refused_as_a_campaign_would_be(conn: Any, world: dict[str, Any]) -> None:
    f.allow_domains(conn, world["ws"])
    unverified = f.sender(conn, world["ws"], f.domain(conn, world["ws"], "news.example.net")["id"])
    created = flows.create_automation(conn, world["ws"], _doc(unverified["id"]))
    status, message = _error(flows.publish_automation, conn, world["ws"], created["id"])
    assert status == 400 and message.startswith("Step 'hello' (steps[0]): The sending domain news.example.net is not"
                                                 " verified yet")
    # A double opt-in confirmation needs no unsubscribe link: its link is the way in.
    confirm = {**_doc(world["sender"]), "triggers": [{"type": "subscription_pending"}], "steps": [
        {"id": "c", "type": "send_email", "sender_id": world["sender"], "subject": "Confirm", "confirmation": True,
         "html": "<p><a href='{{confirmation_url}}'>Yes, subscribe me</a></p>"}]}
    assert f.automation(conn, world["ws"], confirm)["status"] == "ACTIVE"


def test_a_cycle_through_a_wait_is_allowed(conn: Any, world: dict[str, Any]) -> None:
    doc = {**_doc(world["sender"]), "steps": [
        {"id": "a", "type": "add_tag", "tag": "vip", "next": "w"},
        {"id": "w", "type": "wait", "duration": {"days": 7}, "next": "a"}]}
    assert f.automation(conn, world["ws"], doc)["status"] == "ACTIVE"


@pytest.mark.parametrize(("doc", "message"), [
    ([], "The automation must be a JSON object (docs/automations.md)."),
    ({"name": "x", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "exit"}], "colour": 1},
     "Unknown member 'colour'"),
    ({"name": "x", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "wait", "durtion": {}}]},
     "Unknown member 'steps[0].durtion'"),
    ({"name": "x", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "wait", "duration": {"days": 0}}]},
     "The duration 'steps[0].duration' must be more than 0 and at most 366 days."),
    ({"name": "x", "triggers": [], "steps": [{"id": "a", "type": "exit"}]},
     "The member 'triggers' must be an array of at least one trigger."),
    ({"name": "x", "triggers": [{"type": "birthday"}], "steps": [{"id": "a", "type": "exit"}]},
     ("The member 'triggers[0].type' must be one of: contact_subscribed, subscription_pending, tag_added, "
      "tag_removed, field_updated, custom_event, segment_entered, segment_left, date_anniversary, manual.")),
    ({"name": "x", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "exit"}, {"id": "a", "type": "exit"}]},
     "The step id 'a' is used twice (steps[0] and steps[1])."),
    ({"name": "x", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "add_tag", "tag": "t", "next": "z"}]},
     "Step 'a' (steps[0]) points 'next' at 'z', which is no step."),
    ({"name": "x", "triggers": [{"type": "manual"}], "steps": [
        {"id": "a", "type": "send_email", "sender_id": 1, "subject": "Hello"}]},
     "Step 'a' (steps[0]) needs exactly one of 'template_id' and 'html'."),
    ({"name": "x", "reentry": "sometimes", "triggers": [{"type": "manual"}], "steps": [{"id": "a", "type": "exit"}]},
     "The member 'reentry' must be one of: once, every_time, cooldown."),
])
def test_a_malformed_document_is_refused_and_nothing_is_written(conn: Any, world: dict[str, Any], doc: Any,
                                                                message: str) -> None:
    assert _error(flows.create_automation, conn, world["ws"], doc) == (400, message)
    assert flows.list_automations(conn, world["ws"]) == []


def test_the_json_schema_accepts_what_the_service_accepts(world: dict[str, Any]) -> None:
    schema = flow_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = _doc(world["sender"], reentry="cooldown", cooldown={"hours": 12},
               goal={"type": "custom_event", "name": "purchase", "properties": {"plan": "pro"}})
    doc["steps"] += [{"id": "s", "type": "split", "condition": {"kind": "random", "percent": 30}, "yes": "x"},
                     {"id": "x", "type": "exit"}]
    jsonschema.validate(doc, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "colour": 1}, schema)


def test_the_allowance_counts_active_flows(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    first, second = (f.automation(conn, ws, _doc(world["sender"])) for _ in range(2))  # free plan: 2
    third = flows.create_automation(conn, ws, _doc(world["sender"]))
    assert _error(flows.publish_automation, conn, ws, third["id"]) == (400, "Billing limit error")
    assert flows.get_automation(conn, ws, third["id"])["status"] == "DRAFT"
    flows.pause_automation(conn, ws, first["id"])
    assert flows.publish_automation(conn, ws, third["id"])["status"] == "ACTIVE"
    assert _error(flows.resume_automation, conn, ws, first["id"]) == (400, "Billing limit error")
    flows.archive_automation(conn, ws, second["id"])
    assert flows.resume_automation(conn, ws, first["id"])["status"] == "ACTIVE"
    used = {r["name"]: r["used"] for r in billing.resources(conn, ws)}
    assert used["automations"] == 2


def test_lifecycle_errors_and_archived_is_final(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    a = f.automation(conn, ws, _doc(world["sender"]))
    assert _error(flows.resume_automation, conn, ws, a["id"]) == (409, "Only paused automations can be resumed.")
    flows.archive_automation(conn, ws, a["id"])
    assert _error(flows.pause_automation, conn, ws, a["id"]) == (409, "Only active automations can be paused.")
    assert _error(flows.update_automation, conn, ws, a["id"], _doc(world["sender"]))[0] == 409
    assert _error(flows.get_automation, conn, ws, "abc") == (404, flows.NOT_FOUND)
    assert _error(flows.get_automation, conn, ws, 999) == (404, flows.NOT_FOUND)


def test_publishing_again_stores_a_new_version_and_keeps_the_old(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    a = f.automation(conn, ws, _doc(world["sender"]))
    doc = _doc(world["sender"])
    doc["steps"] = [s for s in doc["steps"] if s["id"] != "wait"]
    doc["steps"][0]["next"] = "tag"
    flows.update_automation(conn, ws, a["id"], doc)
    again = flows.publish_automation(conn, ws, a["id"])
    assert [v["version"] for v in again["versions"]] == [1, 2] and again["current_version"] == 2
    assert [s["id"] for s in flows.get_version(conn, ws, a["id"], 1)["flow"]["steps"]] == ["hello", "wait", "tag"]
    assert [s["id"] for s in flows.get_version(conn, ws, a["id"], 2)["flow"]["steps"]] == ["hello", "tag"]
    triggers = conn.execute("SELECT version_id FROM automation_triggers WHERE automation_id = ?", (a["id"],)).fetchall()
    v2 = conn.execute("SELECT id FROM automation_versions WHERE automation_id = ? AND version = 2",
                      (a["id"],)).fetchone()[0]
    assert [r[0] for r in triggers] == [v2]
    assert json.loads(json.dumps(again))  # JSON-ready

"""Automations: flows (create, replace the draft, publish, pause, resume, archive), their
versions, enrollments, backfill, statistics, migration, simulation and test sends; and the
workspace's frequency caps of automated messages (docs/automations.md).

The routes of api/automations.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import (
    ANY,
    EMPTY_OR,
    HEX_ID,
    INT_ID,
    NULLABLE_TIMESTAMP,
    TIMESTAMP,
    array,
    deleted,
    enum,
    obj,
)


def _automation_operations() -> dict[tuple[str, str], dict[str, Any]]:
    from marketing_cli.services.automations import flows, simulate
    from marketing_cli.services.automations.format import flow_schema

    flow = {k: v for k, v in flow_schema().items() if not k.startswith("$")}
    summary = obj({"id": INT_ID, "name": {"type": "string"}, "status": enum(flows.STATUSES),
                   "current_version": {"type": ["integer", "null"]}, "reentry": {"type": "string"},
                   "triggers": array({"type": "string"}), "created_at": TIMESTAMP, "updated_at": TIMESTAMP},
                  ("id", "name", "status", "current_version"))
    automation = {**summary, "properties": {**summary["properties"], "flow": {"type": "object"},
                                            "versions": array(ANY), "enrollments": {"type": "object"},
                                            "webhook_secret": {"type": "string"}}}
    enrollment = obj({"id": INT_ID, "automation_id": INT_ID, "version": INT_ID, "contact_id": HEX_ID,
                      "status": enum(("active", "paused", "completed", "exited")),
                      "step_id": {"type": ["string", "null"]}, "next_run_at": NULLABLE_TIMESTAMP,
                      "waiting_for_event": {"type": "boolean"}, "exit_reason": {"type": ["string", "null"]},
                      "goal_reached_at": NULLABLE_TIMESTAMP, "entered_at": TIMESTAMP},
                     ("id", "automation_id", "version", "contact_id", "status"))
    one = "/v1/automations/{automation_id}"

    def action(summary_: str) -> dict[str, Any]:
        return {"summary": summary_, "envelope": "A", "data": automation}

    return {
        ("POST", "/v1/automations"): {"links": [("GET", one, {"automation_id": "id"}),
                                                ("POST", one + "/publish", {"automation_id": "id"})],
                                      "summary": "Create an automation (a DRAFT flow; docs/automations.md)",
                                      "envelope": "A", "status": 201, "body": flow, "data": automation},
        ("GET", "/v1/automations"): {"summary": "The workspace's automations", "envelope": "A",
                                     "query": {"status": EMPTY_OR(flows.STATUSES)}, "data": array(summary)},
        ("GET", "/v1/automations/schema"): {"summary": "The JSON Schema of the flow document", "envelope": "A",
                                            "data": {"type": "object"}},
        ("GET", one): {"summary": "An automation: its draft, versions and enrollment counts", "envelope": "A",
                       "data": automation},
        ("PUT", one): {"summary": "Replace an automation's draft (publish to make it live)", "envelope": "A",
                       "body": flow, "data": automation},
        ("POST", one + "/publish"): action("Validate the draft and publish it as the next version"),
        ("POST", one + "/pause"): action("Pause: no new entries, every contact held where it is"),
        ("POST", one + "/resume"): action("Resume a paused automation"),
        ("POST", one + "/archive"): action("Archive: final; contacts still in it exit"),
        ("DELETE", one): {**deleted(INT_ID, "a DRAFT or ARCHIVED automation with its versions, enrollments and "
                                            "step messages"), "envelope": "A"},
        ("GET", one + "/versions/{version}"): {"summary": "A published version (references resolved)",
                                               "envelope": "A", "data": ANY},
        ("POST", one + "/enrollments"): {"summary": "Add a contact by hand (the flow needs a manual trigger)",
                                         "envelope": "A", "status": 201,
                                         "body": obj({"contact_id": HEX_ID,
                                                      "entry_key": {"type": "string", "minLength": 1,
                                                                    "maxLength": 200}}, ("contact_id",)),
                                         "data": enrollment},
        ("GET", one + "/enrollments"): {"summary": "The automation's enrollments, newest first", "envelope": "A",
                                        "query": {"status": EMPTY_OR(("active", "paused", "completed", "exited"))},
                                        "data": array(enrollment)},
        ("POST", one + "/backfill"): {"summary": "Enroll existing contacts (all, or a segment's); dry_run counts",
                                      "envelope": "A", "body_optional": True,
                                      "body": obj({"segment_id": INT_ID, "dry_run": {"type": "boolean"}}),
                                      "data": ANY},
        ("GET", one + "/statistics"): {"summary": "Statistics per version and step", "envelope": "A", "data": ANY},
        ("POST", one + "/migrate"): {"summary": "Move in-flight contacts to a version (dry_run: only the report)",
                                     "envelope": "A",
                                     "body": obj({"to_version": {"type": "integer", "minimum": 1},
                                                  "map": {"type": "object", "additionalProperties": {"type": "string"}},
                                                  "dry_run": {"type": "boolean"}, "unmapped": enum(("stay", "exit"))},
                                                 ("to_version",)),
                                     "data": ANY},
        ("POST", one + "/simulate"): {
            "summary": "Walk the flow for one contact on a simulated clock (sends and writes nothing)",
            "envelope": "A",
            "body": obj({"contact_id": HEX_ID, "until": {"type": "string"}, "events": array(obj({
                "name": {"type": "string"}, "type": enum(simulate.EVENT_TYPES), "properties": {"type": "object"},
                "at": {"type": "string"}, "tag": {"type": "string"}, "field": {"type": "string"},
                "from": ANY, "to": ANY, "step": {"type": "string"}}, ("at",)), maxItems=1000)},
                ("contact_id",)),
            "data": ANY},
        ("POST", one + "/test"): {"summary": "Send each message of the flow once to a test address",
                                  "envelope": "A",
                                  "body": obj({"to": {"type": "string", "minLength": 1}, "sms_to": {"type": "string"},
                                               "contact_id": HEX_ID}, ("to",)),
                                  "data": ANY},
    }


def _automation_caps_operations() -> dict[tuple[str, str], dict[str, Any]]:
    """GET/PUT /v1/automations/caps: the workspace's frequency caps (services/automations/caps.py)."""
    duration = {"type": "object", "minProperties": 1, "additionalProperties": False,
                "properties": {unit: {"type": "integer", "minimum": 0}
                               for unit in ("days", "hours", "minutes", "seconds")}}
    cap_in = {"type": ["object", "null"], "additionalProperties": False, "required": ["max_messages", "window"],
              "properties": {"max_messages": {"type": "integer", "minimum": 1, "maximum": 1000}, "window": duration}}
    cap_out = {"type": ["object", "null"], "required": ["max_messages", "window", "window_seconds"],
               "properties": {"max_messages": {"type": "integer"}, "window": duration,
                              "window_seconds": {"type": "integer"}}}
    data = obj({"email": cap_out, "sms": cap_out}, ("email", "sms"))
    return {
        ("GET", "/v1/automations/caps"): {"summary": "Frequency caps of automated messages, per channel",
                                          "envelope": "A", "data": data},
        ("PUT", "/v1/automations/caps"): {"summary": "Set or remove (null) a channel's frequency cap",
                                          "envelope": "A", "body": {**obj({"email": cap_in, "sms": cap_in}),
                                                                    "minProperties": 1},
                                          "data": data},
    }


OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {**_automation_operations(), **_automation_caps_operations()}

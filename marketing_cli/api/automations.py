"""/v1/automations (extension, docs/automations.md): flows, their versions, enrollments and
statistics, and GET /v1/automations/schema (the JSON Schema of the flow document).
Envelope A, as the campaign endpoints. The ids are `:int` path parameters, so that
/v1/automations/schema is never read as an automation (a PUT there is a 405, not a 400)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.automations import caps, flows, format, migrate, simulate, stats, triggers
from marketing_cli.services.deletion import campaigns as deletion

INVALID_BODY = "Invalid request body: send the automation as a JSON object."


async def create_automation(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, INVALID_BODY)
    return envelope_a(await call(request, flows.create_automation, workspace_id, body), 201)


async def list_automations(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, flows.list_automations, workspace_id, request.query_params.get("status")))


async def flow_schema(request: Request) -> Response:
    require_workspace(request)
    return envelope_a(format.flow_schema())


get_automation = on_id(flows.get_automation, "automation_id")
update_automation = on_id(flows.update_automation, "automation_id", body=INVALID_BODY)


async def get_version(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, flows.get_version, workspace_id, request.path_params["automation_id"],
                                 request.path_params["version"]))


enroll = on_id(triggers.enroll_contact, "automation_id", body='Invalid request body: send {"contact_id": ...}.',
               status=201)


async def list_enrollments(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, triggers.list_enrollments, workspace_id,
                                 request.path_params["automation_id"], status=request.query_params.get("status")))


async def backfill(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, "Invalid request body.", default={})
    return envelope_a(await call(request, triggers.backfill, workspace_id, request.path_params["automation_id"], body))


migrate_contacts = on_id(migrate.migrate, "automation_id",
                         body='Invalid request body: send {"to_version": N, "map": {...}}.')
simulate_flow = on_id(simulate.simulate, "automation_id", body='Invalid request body: send {"contact_id": ...}.')
send_tests = on_id(simulate.send_tests, "automation_id", body='Invalid request body: send {"to": ...}.')
statistics = on_id(stats.automation_stats, "automation_id")
publish_automation = on_id(flows.publish_automation, "automation_id")
pause_automation = on_id(flows.pause_automation, "automation_id")
resume_automation = on_id(flows.resume_automation, "automation_id")
archive_automation = on_id(flows.archive_automation, "automation_id")
delete_automation = on_id(deletion.delete_automation, "automation_id")


routes = [
    Route("/v1/automations", create_automation, methods=["POST"]),
    Route("/v1/automations", list_automations, methods=["GET"]),
    Route("/v1/automations/schema", flow_schema, methods=["GET"]),
    Route("/v1/automations/{automation_id:int}", get_automation, methods=["GET"]),
    Route("/v1/automations/{automation_id:int}", update_automation, methods=["PUT"]),
    Route("/v1/automations/{automation_id:int}", delete_automation, methods=["DELETE"]),
    Route("/v1/automations/{automation_id:int}/publish", publish_automation, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/pause", pause_automation, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/resume", resume_automation, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/archive", archive_automation, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/versions/{version:int}", get_version, methods=["GET"]),
    Route("/v1/automations/{automation_id:int}/enrollments", enroll, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/enrollments", list_enrollments, methods=["GET"]),
    Route("/v1/automations/{automation_id:int}/backfill", backfill, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/statistics", statistics, methods=["GET"]),
    Route("/v1/automations/{automation_id:int}/migrate", migrate_contacts, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/simulate", simulate_flow, methods=["POST"]),
    Route("/v1/automations/{automation_id:int}/test", send_tests, methods=["POST"]),
]


# --- frequency caps ------------------------------------------------------------------------

async def get_caps(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, caps.get_caps, workspace_id))


async def set_caps(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, f"Invalid request body. {caps.BAD_BODY}")
    return envelope_a(await call(request, caps.set_caps, workspace_id, body))


routes += [
    Route("/v1/automations/caps", get_caps, methods=["GET"]),
    Route("/v1/automations/caps", set_caps, methods=["PUT"]),
]

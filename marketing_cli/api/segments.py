"""/v1 segments: POST and GET /v1/segments, GET /v1/segments/:id (envelope B), and the
extensions GET /v1/segments/:id/members and POST /v1/segments/:id/refresh.

Members are evaluated live: a filter no index serves scans the workspace's contacts
(about half a second at a million); like every handler, it runs in a worker thread.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_b, read_json
from marketing_cli.services.contacts import segments
from marketing_cli.services.deletion import audience as deletion


async def create_segment(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, segments.INVALID_BODY)
    return envelope_b(await call(request, segments.create_segment, workspace_id, body), 201)


async def list_segments(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_b(await call(request, segments.list_segments, workspace_id))


get_segment = on_id(segments.get_segment, "segment_id", envelope=envelope_b)
update_segment = on_id(segments.update_segment, "segment_id", body=segments.INVALID_BODY, envelope=envelope_b)
delete_segment = on_id(deletion.delete_segment, "segment_id", envelope=envelope_b)


async def segment_members(request: Request) -> Response:
    workspace_id = require_workspace(request)
    query = request.query_params
    return envelope_b(await call(request, segments.segment_members, workspace_id, request.path_params["segment_id"],
                                 page=query.get("page", 1), limit=query.get("limit", 50)))


refresh_segment = on_id(segments.refresh_segment, "segment_id", envelope=envelope_b, status=202)


routes = [
    Route("/v1/segments", create_segment, methods=["POST"]),
    Route("/v1/segments", list_segments, methods=["GET"]),
    Route("/v1/segments/{segment_id}", get_segment, methods=["GET"]),
    Route("/v1/segments/{segment_id}", update_segment, methods=["PATCH"]),
    Route("/v1/segments/{segment_id}", delete_segment, methods=["DELETE"]),
    Route("/v1/segments/{segment_id}/members", segment_members, methods=["GET"]),
    Route("/v1/segments/{segment_id}/refresh", refresh_segment, methods=["POST"]),
]

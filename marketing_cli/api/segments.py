"""/v1 segments: POST and GET /v1/segments, GET /v1/segments/:id (envelope B), and the
extensions GET /v1/segments/:id/members and POST /v1/segments/:id/refresh.

Members are evaluated live: a filter no index serves scans the workspace's contacts
(about half a second at a million), so that one handler runs the service in a worker
thread (with that thread's own connection) instead of on the event loop.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import db_conn, require_workspace
from marketing_cli.api.responses import envelope_b, read_json
from marketing_cli.services import segments


async def create_segment(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, segments.INVALID_BODY)
    return envelope_b(segments.create_segment(db_conn(request), workspace_id, body), 201)


async def list_segments(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_b(segments.list_segments(db_conn(request), workspace_id))


async def get_segment(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_b(segments.get_segment(db_conn(request), workspace_id, request.path_params["segment_id"]))


async def segment_members(request: Request) -> Response:
    workspace_id = require_workspace(request)
    query = request.query_params
    db = request.app.state.db
    return envelope_b(await run_in_threadpool(
        lambda: segments.segment_members(db.conn(), workspace_id, request.path_params["segment_id"],
                                         page=query.get("page", 1), limit=query.get("limit", 50))))


async def refresh_segment(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_b(segments.refresh_segment(db_conn(request), workspace_id, request.path_params["segment_id"]),
                      202)


routes = [
    Route("/v1/segments", create_segment, methods=["POST"]),
    Route("/v1/segments", list_segments, methods=["GET"]),
    Route("/v1/segments/{segment_id}", get_segment, methods=["GET"]),
    Route("/v1/segments/{segment_id}/members", segment_members, methods=["GET"]),
    Route("/v1/segments/{segment_id}/refresh", refresh_segment, methods=["POST"]),
]

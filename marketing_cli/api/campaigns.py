"""/v1 email campaigns (envelope A): create, list, show, configure, variant HTML and its
preview thumbnail, and test emails.

Checks that the specification lists before "Invalid request body." (the campaign id, the
variant type) run before the body is read.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.deletion import campaigns as deletion
from marketing_cli.services.delivery import lane_view, test_emails
from marketing_cli.services.email import campaigns, variant_html


async def create_campaign(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, campaigns.CREATE_INVALID_BODY)
    return envelope_a(await call(request, campaigns.create_campaign, workspace_id, body), 201)


duplicate_campaign = on_id(campaigns.duplicate_campaign, "campaign_id", status=201)


async def list_campaigns(request: Request) -> Response:
    workspace_id = require_workspace(request)
    query = request.query_params
    return envelope_a(await call(request, campaigns.list_campaigns, workspace_id, page=query.get("page", 1),
                                 limit=query.get("limit", campaigns.DEFAULT_LIMIT), status=query.get("status")))


get_campaign = on_id(lane_view.campaign_view, "campaign_id")  # (with `held_back`: services/delivery/lane_view.py)


async def configure_campaign(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = campaigns.check_campaign_id(request.path_params["campaign_id"])
    body = await read_json(request, campaigns.INVALID_BODY)
    return envelope_a(await call(request, campaigns.configure_campaign, workspace_id, campaign_id, body))


async def set_variant_html(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = campaigns.check_campaign_id(request.path_params["campaign_id"])
    variant_type = campaigns.check_variant_type(request.path_params["variant_type"])
    body = await read_json(request, campaigns.INVALID_BODY)
    return envelope_a(await call(request, variant_html.set_variant_html, workspace_id, campaign_id, variant_type,
                                 body))


async def get_variant_html(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, variant_html.get_variant_html, workspace_id,
                                 request.path_params["campaign_id"], request.path_params["variant_type"]))


async def get_variant_preview(request: Request) -> Response:
    workspace_id = require_workspace(request)
    content_type, body = await call(request, variant_html.get_variant_preview, workspace_id,
                                    request.path_params["campaign_id"], request.path_params["variant_type"])
    return Response(body, media_type=content_type, headers={"Cache-Control": "private, max-age=60"})


async def send_test_email(request: Request) -> Response:
    workspace_id = require_workspace(request)
    campaign_id = campaigns.check_campaign_id(request.path_params["campaign_id"])
    body = await read_json(request, campaigns.INVALID_BODY)
    return envelope_a(await call(request, test_emails.send_test_email, workspace_id, campaign_id, body))


delete_campaign = on_id(deletion.delete_campaign, "campaign_id")


routes = [
    Route("/v1/campaigns", create_campaign, methods=["POST"]),
    Route("/v1/campaigns", list_campaigns, methods=["GET"]),
    Route("/v1/campaigns/{campaign_id}", get_campaign, methods=["GET"]),
    Route("/v1/campaigns/{campaign_id}", delete_campaign, methods=["DELETE"]),
    Route("/v1/campaigns/{campaign_id}/configure", configure_campaign, methods=["PATCH"]),
    Route("/v1/campaigns/{campaign_id}/duplicate", duplicate_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/variants/{variant_type}/html", set_variant_html, methods=["POST"]),
    Route("/v1/campaigns/{campaign_id}/variants/{variant_type}/html", get_variant_html, methods=["GET"]),
    Route("/v1/campaigns/{campaign_id}/variants/{variant_type}/preview", get_variant_preview, methods=["GET"]),
    Route("/v1/campaigns/{campaign_id}/test", send_test_email, methods=["POST"]),
]

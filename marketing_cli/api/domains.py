"""/v1/domains: GET (list), POST (add), GET /v1/domains/{id}, POST /v1/domains/{id}/verify,
GET /v1/domains/{id}/compliance (the compliance gate's rules, services/delivery/compliance.py),
POST, GET and DELETE /v1/domains/{id}/warmup (start, status, stop: services/delivery/warmup.py).

Get Domain is the specification's (envelope A); the list, add and verify endpoints are
extensions in the same style (CONTRACT sections 5 and 7). Verification looks the records
up in DNS (a few seconds at most) in the handler's worker thread. The operator's mark
(`mkt domains mark-verified`, verified without DNS) has no route, by design: an API key
that could set it could send as any domain it adds.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.endpoints import on_id
from marketing_cli.api.responses import envelope_a, read_json
from marketing_cli.services.deletion import sending as deletion
from marketing_cli.services.delivery import compliance, warmup
from marketing_cli.services.email import domains


async def list_domains(request: Request) -> Response:
    workspace_id = require_workspace(request)
    return envelope_a(await call(request, domains.list_domains, workspace_id))


async def create_domain(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, domains.INVALID_BODY)
    return envelope_a(await call(request, domains.create_domain, workspace_id, body), 201)


get_domain = on_id(domains.get_domain, "domain_id")
verify_domain = on_id(domains.verify_domain, "domain_id")
check_compliance = on_id(compliance.check_domain, "domain_id")


delete_domain = on_id(deletion.delete_domain, "domain_id")
warmup_status = on_id(warmup.warmup_status, "domain_id")
stop_warmup = on_id(warmup.stop_warmup, "domain_id")


async def start_warmup(request: Request) -> Response:
    workspace_id = require_workspace(request)
    body = await read_json(request, warmup.INVALID_BODY, default={})
    return envelope_a(await call(request, _start, workspace_id, request.path_params["domain_id"], body))


def _start(conn: Any, workspace_id: int, domain_id: str, body: Any) -> dict[str, Any]:
    return warmup.start_warmup(conn, workspace_id, domain_id, warmup.schedule_from_body(body))


routes = [
    Route("/v1/domains", list_domains, methods=["GET"]),
    Route("/v1/domains", create_domain, methods=["POST"]),
    Route("/v1/domains/{domain_id}", get_domain, methods=["GET"]),
    Route("/v1/domains/{domain_id}", delete_domain, methods=["DELETE"]),
    Route("/v1/domains/{domain_id}/verify", verify_domain, methods=["POST"]),
    Route("/v1/domains/{domain_id}/compliance", check_compliance, methods=["GET"]),
    Route("/v1/domains/{domain_id}/warmup", start_warmup, methods=["POST"]),
    Route("/v1/domains/{domain_id}/warmup", warmup_status, methods=["GET"]),
    Route("/v1/domains/{domain_id}/warmup", stop_warmup, methods=["DELETE"]),
]

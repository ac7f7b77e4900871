"""GET /v1/sms-rates: public without a key (rate-limited per IP), the workspace's prices with one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from marketing_cli.api.auth import RateLimiter, optional_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a
from marketing_cli.services.account import rates

PUBLIC_LIMIT = (
    "You have exceeded the rate limit of 60 requests per minute. "
    "Please authenticate with an API key for a higher limit."
)


async def list_sms_rates(request: Request) -> Response:
    workspace_id = optional_workspace(request)
    if workspace_id is None:
        limiter: RateLimiter = request.app.state.public_rates_limiter
        limiter.check(request.client.host if request.client else "unknown")
    return envelope_a(await call(request, rates.list_rates, workspace_id))


routes = [Route("/v1/sms-rates", list_sms_rates, methods=["GET"])]

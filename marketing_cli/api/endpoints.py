"""Endpoints that are one service call on one path parameter, made from the service instead of
written out:

    cancel_campaign = on_id(campaigns.cancel_campaign, "campaign_id")
    schedule_campaign = on_id(schedule.schedule_campaign, "campaign_id", body=INVALID_BODY)

The endpoint authenticates (`require_workspace`), reads the JSON body when `body` gives the
message for a bad one, calls `service(workspace_id, <the parameter>[, body])` in a worker
thread (`call`) and wraps its answer in `envelope` with `status`. A missing parameter (an alias
route such as `/v1/sms-campaigns//schedule`) is passed as "", so the service answers the
specification's message for an empty id. Assign the endpoint to a name once and give that name
to every route of the operation: api/strict.py finds an operation's declaration by its endpoint.
A handler that does anything more is written out in its module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import envelope_a, read_json


def on_id(service: Callable[..., Any], param: str, *, body: str | None = None,
          envelope: Callable[[Any, int], Response] = envelope_a,
          status: int = 200) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        workspace_id = require_workspace(request)
        args: list[Any] = [request.path_params.get(param, "")]
        if body is not None:
            args.append(await read_json(request, body))
        return envelope(await call(request, service, workspace_id, *args), status)

    endpoint.__name__ = endpoint.__qualname__ = service.__name__
    endpoint.__doc__ = f"{service.__module__}.{service.__name__} on the path's {param}."
    return endpoint

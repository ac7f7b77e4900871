"""Strict input: what each operation declares is all it accepts (issue 26, CONTRACT section 4).

`api/schemas/` declares every operation's query parameters and JSON body; the OpenAPI
document publishes them (bodies with `additionalProperties: false`, `kernel/inputs.closed`),
and this module enforces the same declaration, so the two cannot drift:

- `check_query(request)`: a query parameter the operation does not declare is 400
  `Unknown query parameter 'x'`. Run by `api/auth` right after the key is checked, so a
  request without a key still gets its 401 first, and before the handler reads anything.
- `check_body(request, body)`: a body member the operation's schema does not list, at any
  depth where the schema lists members (`ab_test`, `sender.reply_to`, `variants[0]`), is 400
  `Unknown member 'x'`. Run by `api/responses.read_json` as soon as the body is decoded.

Objects the specification leaves open stay open: contact `fields` (keyed by the workspace's
merge tags and checked against its field definitions, `email_address` inside ignored as the
specification says), event `properties`, editor `body_json`, filter `value`s.

Public paths for browsers and Twilio (tracking links, unsubscribe pages, webhooks, the docs)
are not held to this: a mail client or a link scanner may add parameters to a link in a
message, and Twilio adds members to its callbacks over time; neither is a typo of a caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from marketing_cli.api import schemas
from marketing_cli.kernel.inputs import check_members, check_parameters, closed


@dataclass(frozen=True)
class Declared:
    query: frozenset[str]
    body: dict[str, Any] | None  # the closed body schema, None when the body is not JSON


def plain_path(path: str) -> str:
    """The documented operation an alias route repeats (schemas.is_alias)."""
    import re

    path = re.sub(r"\{(\w+):[^}]+\}", r"{\1}", path)
    return path.replace("/{prefix}", "").replace("//", "/{campaign_id}/")


def declarations(routes: Iterable[BaseRoute]) -> dict[tuple[Any, str], Declared]:
    """{(endpoint, method): Declared} for every route of an API-key operation."""
    found: dict[tuple[Any, str], Declared] = {}
    for route in routes:
        if not isinstance(route, Route):
            continue
        for method in route.methods or ():
            operation = schemas.OPERATIONS.get(("GET" if method == "HEAD" else method, plain_path(route.path)))
            if operation is None or operation.get("auth") == "none" or not route.path.startswith("/v1/"):
                continue
            body = closed(operation["body"]) if "body" in operation else None
            declared = Declared(frozenset(operation.get("query", ())), body)
            previous = found.setdefault((route.endpoint, method), declared)
            assert previous == declared, f"{method} {route.path}: one endpoint, two declarations"
    return found


def _declared(request: Request) -> Declared | None:
    table = getattr(request.app.state, "declared", None)
    return None if table is None else table.get((request.scope.get("endpoint"), request.method))


def check_query(request: Request) -> None:
    if not request.scope.get("query_string"):
        return  # the common case costs one lookup
    declared = _declared(request)
    if declared is not None:
        check_parameters(request.query_params.keys(), declared.query)


def check_body(request: Request, body: Any) -> None:
    declared = _declared(request)
    if declared is not None and declared.body is not None:
        check_members(body, declared.body)

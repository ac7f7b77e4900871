"""The API's own description: an OpenAPI 3.1 document built from the app's routes.

`openapi_document(app)` walks the app's routes (so a new route is in the document by
itself) and takes each operation's request and response schemas from api/schemas/. A
route without a declaration there is still listed, marked `x-mkt-undeclared`, and
tests/platform/test_api_openapi.py fails until it is declared. Served without a key at
`GET /v1/openapi.json`, rendered for people at `GET /docs` by Redoc (vendored in static/,
MIT licence), printed by `mkt openapi`.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any, Iterable

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from marketing_cli.api import schemas
from marketing_cli.api.responses import JSONBody
from marketing_cli.kernel.inputs import closed

TITLE = "mkt: email and SMS marketing API"
_CONVERTOR = re.compile(r"\{(\w+):[^}]+\}")
_PARAMETER = re.compile(r"\{(\w+)\}")
PUBLIC_PREFIXES = ("/t/",)  # tracking links; webhooks are declared with auth "none"

ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["data", "error"],
    "properties": {
        "data": {"type": "null"},
        "error": {"type": "object", "required": ["status", "message"],
                  "properties": {"status": {"type": "integer"}, "message": {"type": "string"}}},
    },
}
ENVELOPE_A: dict[str, Any] = {
    "type": "object", "required": ["error", "data"],
    "properties": {"error": {"type": "null"}, "data": {}},
    "description": "Envelope A: {\"error\": null, \"data\": ...}",
}
ENVELOPE_B: dict[str, Any] = {
    "type": "object", "required": ["data"],
    "properties": {"data": {}},
    "description": "Envelope B: {\"data\": ...}",
}


def openapi_path(path: str) -> str:
    """Starlette's `{name:convertor}` as OpenAPI's `{name}`."""
    return _CONVERTOR.sub(r"{\1}", path)


def _methods(route: Route) -> list[str]:
    return sorted(m for m in (route.methods or ()) if m != "HEAD")


def declared_routes(routes: Iterable[BaseRoute]) -> list[tuple[str, str]]:
    """(method, OpenAPI path) of every documented route, in the app's order."""
    found = []
    for route in routes:
        # include_in_schema=False: the dashboard's pages (api/dashboard.py), which are not the API
        if isinstance(route, Route) and route.include_in_schema and not schemas.is_alias(route.path):
            found.extend((method, openapi_path(route.path)) for method in _methods(route))
    return found


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if kind is None and "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    if kind is None:
        return schema
    kinds = kind if isinstance(kind, list) else [kind]
    if "null" in kinds:
        return schema
    widened = {**schema, "type": [*kinds, "null"]}
    if "enum" in schema:
        widened["enum"] = [*schema["enum"], None]
    return widened


def optional_members_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The request convention (services/inputs.member): an optional member sent as null is
    read as left out, at every depth."""
    result = dict(schema)
    if "properties" in schema:
        required = set(schema.get("required", ()))
        result["properties"] = {}
        for name, sub in schema["properties"].items():
            sub = optional_members_nullable(sub)
            result["properties"][name] = sub if name in required else _nullable(sub)
    if isinstance(schema.get("items"), dict):
        result["items"] = optional_members_nullable(schema["items"])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            result[key] = [optional_members_nullable(sub) for sub in schema[key]]
    for key in ("if", "then", "else"):
        if key in schema:
            result[key] = optional_members_nullable(schema[key])
    return result


def operation_id(method: str, path: str) -> str:
    return f"{method.lower()}{re.sub(r'[^A-Za-z0-9]+', '_', path)}".rstrip("_")


def _links(declared: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI links: what a created resource's id can be used for next (create, then read)."""
    return {operation_id(method, path): {
        "operationId": operation_id(method, path),
        "parameters": {name: f"$response.body#/data/{member}" for name, member in parameters.items()}}
        for method, path, parameters in declared.get("links", ())}


def _envelope(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    name = "EnvelopeA" if kind == "A" else "EnvelopeB"
    return {"allOf": [{"$ref": f"#/components/schemas/{name}"},
                      {"type": "object", "properties": {"data": data}}]}


def _parameters(path: str, declared: dict[str, Any]) -> list[dict[str, Any]]:
    params = [{"name": name, "in": "path", "required": True,
               "schema": schemas.PATH_PARAMETERS.get(name, {"type": "string"})}
              for name in _PARAMETER.findall(path)]
    for name, schema in declared.get("query", {}).items():
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in declared.get("query_required", ()),
                                 "schema": schema}
        if schema.get("type") == "array":
            param.update(style="form", explode=True)
        params.append(param)
    return params


def _request_body(declared: dict[str, Any]) -> dict[str, Any] | None:
    if "body" in declared:
        return {"required": not declared.get("body_optional"),
                "content": {"application/json": {"schema": closed(optional_members_nullable(declared["body"]))}}}
    if "body_media" in declared:
        return {"required": True, "content": {media: {"schema": {"type": "string"}} for media in declared["body_media"]}}
    return None


def _responses(declared: dict[str, Any]) -> dict[str, Any]:
    if declared.get("envelope"):
        success: dict[str, Any] = {"description": "Success", "content": {
            "application/json": {"schema": _envelope(declared["envelope"], declared.get("data", {}))}}}
    else:
        success = {"description": "Success"}
        if declared.get("media"):
            success["content"] = {name: {"schema": schema} for name, schema in declared["media"].items()}
    if declared.get("links"):
        success["links"] = _links(declared)
    responses = {str(declared.get("status", 200)): success, "4XX": {"$ref": "#/components/responses/Error"}}
    for code, media in declared.get("errors", {}).items():
        responses[code] = {"description": "Error page",
                           "content": {name: {"schema": schema} for name, schema in media.items()}}
    return responses


def _security(path: str, declared: dict[str, Any]) -> list[dict[str, list[str]]]:
    auth = declared.get("auth", "key")
    if auth == "none" or path.startswith(PUBLIC_PREFIXES):
        return []
    if auth == "optional":
        return [{}, {"bearer": []}]
    return [{"bearer": []}]


def _operation(method: str, path: str, declared: dict[str, Any] | None, tag: str) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": operation_id(method, path), "tags": [tag]}
    if declared is None:
        declared = {"summary": "(not declared in api/schemas/)", "envelope": None, "media": {}}
        op["x-mkt-undeclared"] = True
    op["summary"] = declared["summary"]
    params = _parameters(path, declared)
    if params:
        op["parameters"] = params
    body = _request_body(declared)
    if body:
        op["requestBody"] = body
    op["responses"] = _responses(declared)
    op["security"] = _security(path, declared)
    return op


def _tag(path: str) -> str:
    parts = [p for p in path.split("/") if p and not p.startswith("{")]
    if parts[:1] == ["v1"]:
        parts = parts[1:]
    return parts[0] if parts else "api"


def document_for_routes(routes: Iterable[BaseRoute]) -> dict[str, Any]:
    from marketing_cli import __version__

    paths: dict[str, dict[str, Any]] = {}
    for method, path in declared_routes(routes):
        declared = schemas.OPERATIONS.get((method, path))
        paths.setdefault(path, {})[method.lower()] = _operation(method, path, declared, _tag(path))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": TITLE,
            "version": __version__,
            "description": ("The `/v1` API of `mkt serve`. Every error, on every endpoint, is "
                            "`{\"data\": null, \"error\": {\"status\", \"message\"}}`. An optional member of a "
                            "request body sent as null is read as left out. Authenticate with "
                            "`Authorization: Bearer <key>` (`mkt keys create`)."),
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "An API key of the workspace (`mkt keys create`)."}},
            "schemas": {"Error": ERROR, "EnvelopeA": ENVELOPE_A, "EnvelopeB": ENVELOPE_B},
            "responses": {"Error": {
                "description": "An error: the message is the specification's text",
                "headers": {"X-Error-Detail": {
                    "description": "Present when the message cannot say everything: for a plan-limit error, the "
                                   "allowance, the usage and the command that raises it.",
                    "schema": {"type": "string"}}},
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
        },
    }


def openapi_document(app: Any) -> dict[str, Any]:
    """The OpenAPI 3.1 document of a Starlette app built by create_app."""
    return document_for_routes(app.routes)


def cli_document() -> dict[str, Any]:
    """The document of the app `mkt serve` runs, without opening a database."""
    import importlib

    from marketing_cli.api.app import ROUTE_MODULES

    return document_for_routes([r for name in ROUTE_MODULES for r in importlib.import_module(name).routes])


# --- the routes ----------------------------------------------------------------------------

DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mkt API</title>
</head>
<body>
<redoc spec-url="/v1/openapi.json"></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
"""


async def openapi_json(request: Request) -> Response:
    state = request.app.state
    document = getattr(state, "openapi_document", None)
    if document is None:
        document = state.openapi_document = openapi_document(request.app)
    return JSONBody(document)


async def docs_page(request: Request) -> Response:
    return HTMLResponse(DOCS_PAGE)


_REDOC: bytes | None = None


async def redoc_js(request: Request) -> Response:
    global _REDOC
    if _REDOC is None:
        _REDOC = resources.files("marketing_cli.api").joinpath("static/redoc.standalone.js").read_bytes()
    return Response(_REDOC, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


routes = [
    Route("/v1/openapi.json", openapi_json, methods=["GET"]),
    Route("/docs", docs_page, methods=["GET"]),
    Route("/docs/redoc.standalone.js", redoc_js, methods=["GET"]),
]

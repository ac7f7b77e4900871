"""The API's own description: GET /v1/openapi.json, /docs and `mkt openapi` (CONTRACT section 9)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi
from starlette.routing import Route

from marketing_cli.api import schemas
from marketing_cli.api.openapi import openapi_document, openapi_path
from marketing_cli.api.schemas import common
from tests import factories


@pytest.fixture
def document(client: Any) -> dict[str, Any]:
    response = client.get("/v1/openapi.json")  # no key
    assert response.status_code == 200
    return response.json()


def response_validator(document: dict[str, Any], method: str, path: str, status: int) -> Draft202012Validator:
    """A validator for the JSON body the document promises for (method, path, status)."""
    schema = document["paths"][path][method.lower()]["responses"][str(status)]["content"]["application/json"]["schema"]
    return Draft202012Validator({**schema, "components": document["components"]})


def test_the_trimmed_class_is_what_str_strip_trims() -> None:
    """common._TRIMMED, written out, is exactly Python's white space (what the services trim)."""
    import re
    import sys

    trimmed = re.compile(f"[{common._TRIMMED}]")
    assert [c for c in map(chr, range(sys.maxunicode + 1)) if trimmed.fullmatch(c)] == \
        [c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()]


def test_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1.")
    assert document["info"]["title"]
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "An API key of the workspace (`mkt keys create`)."}
    validate_openapi(document)  # raises on any violation of the OpenAPI 3.1 schema


def test_every_route_of_the_app_is_documented_and_declared(app: Any, document: dict[str, Any]) -> None:
    documented = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    left_out = []
    for route in app.routes:
        if not isinstance(route, Route):
            continue
        if not route.include_in_schema:  # the dashboard's pages are not the API: nothing else is left out
            assert route.path == "/" or route.path.startswith("/dashboard"), route.path
            continue
        if schemas.is_alias(route.path):
            left_out.append(route.path)
            continue
        for method in route.methods - {"HEAD"}:
            assert (method, openapi_path(route.path)) in documented, (method, route.path)
            assert (method, openapi_path(route.path)) in schemas.OPERATIONS, \
                f"declare {method} {route.path} in its area's module of marketing_cli/api/schemas/"
    # Aliases are only the empty-id and prefixed-tracking forms of documented operations.
    for path in left_out:
        plain = path.replace("/{prefix:path}", "").replace("//", "/{campaign_id}/")
        assert any(p == openapi_path(plain) for _, p in documented), path
    undeclared = [(m, p) for p, ops in document["paths"].items() for m, op in ops.items() if op.get("x-mkt-undeclared")]
    assert undeclared == []


def test_a_new_route_appears_by_itself_and_is_flagged_until_declared(app: Any) -> None:
    async def endpoint(request: Any) -> None: ...

    app.router.routes.append(Route("/v1/brand-new/{thing_id:int}", endpoint, methods=["DELETE"]))
    operation = openapi_document(app)["paths"]["/v1/brand-new/{thing_id}"]["delete"]
    assert operation["x-mkt-undeclared"] is True
    assert operation["parameters"][0]["name"] == "thing_id"
    assert operation["security"] == [{"bearer": []}]


def test_no_declaration_without_a_route(app: Any) -> None:
    routes = {(m, openapi_path(r.path)) for r in app.routes if isinstance(r, Route) for m in r.methods}
    assert [key for key in schemas.OPERATIONS if key not in routes] == []


def test_each_operation_is_declared_by_one_area() -> None:
    """schemas/__init__ merges the areas' declarations: a key in two of them would be one silently lost."""
    keys = [key for area in schemas.AREAS for key in area.OPERATIONS]
    assert len(keys) == len(set(keys)) == len(schemas.OPERATIONS)


def test_security_per_operation(document: dict[str, Any]) -> None:
    paths = document["paths"]
    assert paths["/v1/tags"]["get"]["security"] == [{"bearer": []}]
    assert paths["/v1/sms-rates"]["get"]["security"] == [{}, {"bearer": []}]
    for public in ("/v1/openapi.json", "/docs", "/t/o/{token}", "/t/u/{token}", "/t/v/{token}"):
        assert paths[public]["get"]["security"] == [], public
    keyless = [p for p, ops in paths.items() for op in ops.values() if not op["security"]]
    assert all(p.startswith(("/t/", "/s/", "/webhooks/", "/docs", "/v1/openapi.json")) for p in keyless), keyless


def test_constraints_come_from_the_services(document: dict[str, Any]) -> None:
    from marketing_cli.services.contacts import segments, tags
    from marketing_cli.services.email import campaigns

    tag_body = document["paths"]["/v1/tags"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert tag_body["properties"]["name"]["maxLength"] == tags.MAX_NAME
    query = {p["name"]: p["schema"] for p in document["paths"]["/v1/campaigns"]["get"]["parameters"]}
    assert query["status"]["enum"] == ["", *campaigns.STATUSES]
    assert f"1-{campaigns.MAX_LIMIT}" in query["limit"]["description"]
    members = {p["name"]: p["schema"] for p in document["paths"]["/v1/segments/{segment_id}/members"]["get"]["parameters"]}
    assert members["limit"]["maximum"] == segments.MAX_PAGE_SIZE
    path_params = document["paths"]["/v1/contacts/{contact_id}"]["get"]["parameters"]
    assert path_params == [{"name": "contact_id", "in": "path", "required": True, "schema": common.HEX_ID}]


def test_every_documented_collection_path_exists(client: Any, auth: dict[str, str], document: dict[str, Any]) -> None:
    for path, operations in document["paths"].items():
        if "{" in path:
            continue
        for method in operations:
            response = client.request(method.upper(), path, headers=auth)
            assert response.status_code not in (404, 405), (method, path, response.text[:200])


def test_real_responses_match_the_document(client: Any, auth: dict[str, str], conn: Any,
                                           workspace: dict[str, Any], document: dict[str, Any]) -> None:
    vip = factories.tag(conn, workspace["id"], "vip")
    factories.field(conn, workspace["id"], "city")
    person = factories.contact(conn, workspace["id"], "ann@example.com", tags=[vip], city="Lyon")
    calls = [
        ("GET", "/v1/workspace", "/v1/workspace", None, 200),
        ("GET", "/v1/tags", "/v1/tags", None, 200),
        ("POST", "/v1/tags", "/v1/tags", {"name": "new"}, 201),
        ("GET", "/v1/fields", "/v1/fields", None, 200),
        ("POST", "/v1/contacts", "/v1/contacts", {"status": "SUBSCRIBED", "fields": {"email_address": "b@example.com"}},
         201),
        ("GET", "/v1/contacts/{contact_id}", f"/v1/contacts/{person['id']}", None, 200),
        ("POST", "/v1/campaigns", "/v1/campaigns", {"name": "Launch"}, 201),
        ("GET", "/v1/sms-rates", "/v1/sms-rates", None, 200),
        ("GET", "/v1/domains", "/v1/domains", None, 200),
        ("GET", "/v1/segments", "/v1/segments", None, 200),
    ]
    for method, template, url, body, status in calls:
        response = client.request(method, url, headers=auth, json=body)
        assert response.status_code == status, (url, response.text)
        validator = response_validator(document, method, template, status)
        assert list(validator.iter_errors(response.json())) == [], (url, response.json())
    # An error body matches the Error component, and a success body of the wrong envelope does not.
    error = client.get("/v1/tags")
    assert error.status_code == 401
    error_schema = Draft202012Validator({"$ref": "#/components/schemas/Error", "components": document["components"]})
    assert list(error_schema.iter_errors(error.json())) == []
    tags_validator = response_validator(document, "GET", "/v1/tags", 200)
    assert not tags_validator.is_valid({"error": None, "data": [{"id": 1, "name": "x"}]} | {"data": "x"})
    assert not tags_validator.is_valid({"data": [{"id": "1", "name": "x"}]})


def test_docs_page_renders_the_document_with_the_vendored_renderer(client: Any) -> None:
    page = client.get("/docs")  # no key
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'spec-url="/v1/openapi.json"' in page.text
    assert '<script src="/docs/redoc.standalone.js"></script>' in page.text
    script = client.get("/docs/redoc.standalone.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert len(script.content) > 500_000 and b"Redoc" in script.content


def test_mkt_openapi_prints_the_served_document(cli: Any, client: Any) -> None:
    result = cli("openapi")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == client.get("/v1/openapi.json").json()


def test_405_allow_lists_every_method_of_the_path(client: Any, auth: dict[str, str]) -> None:
    # Found by the fuzzing: one route per method made Allow name only the first route's methods.
    response = client.request("OPTIONS", "/v1/workspace", headers=auth)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, PATCH"
    assert client.put("/v1/sms-campaigns/" + "a" * 24, headers=auth).headers["allow"] == "DELETE, GET, HEAD, PATCH"


def test_links_point_at_documented_operations(document: dict[str, Any]) -> None:
    operations = {op["operationId"] for ops in document["paths"].values() for op in ops.values()}
    links = [link for ops in document["paths"].values() for op in ops.values()
             for response in op["responses"].values() for link in response.get("links", {}).values()]
    assert len(links) >= 10
    for link in links:
        assert link["operationId"] in operations, link
        target = [p for p, ops in document["paths"].items() for op in ops.values()
                  if op["operationId"] == link["operationId"]][0]
        assert all("{" + name + "}" in target for name in link["parameters"]), (target, link)


def test_configure_answer_matches_the_document(client: Any, auth: dict[str, str], document: dict[str, Any]) -> None:
    # Found by the stateful fuzzing: configure answers the configuration view, without `status`.
    created = client.post("/v1/campaigns", headers=auth, json={"name": "Launch"}).json()["data"]
    response = client.patch(f"/v1/campaigns/{created['id']}/configure", headers=auth, json={"sender": None})
    assert response.status_code == 200, response.text
    validator = response_validator(document, "PATCH", "/v1/campaigns/{campaign_id}/configure", 200)
    assert list(validator.iter_errors(response.json())) == []

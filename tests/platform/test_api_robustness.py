"""No user input yields a 500: every route, fed bodies and members of every wrong JSON type.

Routes are discovered from the app, so endpoints added later are covered too. Each answer
must be a 4xx (or a 2xx where the input happens to be acceptable) with the error shape of
CONTRACT section 4.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.routing import Route

from tests.factories import error_of

MEMBERS = [
    "name", "fields", "tags", "status", "sms_status", "email_address", "phone_number", "partial_update",
    "tag_ids", "filters", "condition", "label", "merge_tag", "type", "definition", "default_value", "required",
    "default_region", "event_name", "properties", "page", "limit", "sort_by", "sort_order",
    "conversion_tracking", "interaction_tracking", "audience", "field_id", "operator", "value",
]
BAD_VALUES = [2**70, -(2**70), 1.5e308, [], {}, "", "x" * 300, True, [2**70], {"a": [2**70]}, [[{"b": None}]]]
BAD_BODIES = ["[]", '"text"', "12", "null", "{", "\x00", '{"a": NaN}', "[" * 5000 + "]" * 5000,
              '{"fields": {"email_address": 5}}']
QUERIES = ["?page=abc&limit=1e99", "?phone_number=%00", "?limit=99999999999999999999999&after_id=-1",
           "?status=DRAFT&type=x&contact_id=zz"]


def concrete(path: str) -> list[str]:
    """Paths to try for a route template: path parameters filled with valid-looking and odd values."""
    paths = []
    for value in ("0123456789abcdef01234567", "1", "99999999999999999999999", "abc"):
        filled = path
        for name in ("contact_id", "id", "field_id", "segment_id", "campaign_id", "type"):
            filled = filled.replace("{" + name + "}", value if name != "type" else "A")
        while "{" in filled:  # any other parameter name
            start, end = filled.index("{"), filled.index("}")
            filled = filled[:start] + value + filled[end + 1:]
        paths.append(filled)
    return sorted(set(paths))


def api_routes(app: Any) -> list[tuple[str, str]]:
    found = []
    for route in app.routes:
        # The tracking paths answer a person's browser with small pages, not the API's
        # error body (tests/email/test_api_email_sending.py checks them); so do SMS short links
        # (tests/sms/test_api_sms_links.py).
        # So does the dashboard (include_in_schema=False; tests/platform/test_api_dashboard.py).
        if isinstance(route, Route) and "/t/" not in route.path and not route.path.endswith("/s/{token}") \
                and route.include_in_schema:
            for method in sorted(route.methods or []):
                if method != "HEAD":
                    found.append((method, route.path))
    return found


def check(response: Any) -> None:
    assert response.status_code < 500, (response.request.method, response.request.url, response.text)
    if response.status_code >= 400:
        error_of(response)


def test_routes_are_discovered(app: Any) -> None:
    assert len(api_routes(app)) >= 10


def members_to_send(method: str, template: str) -> list[str]:
    """The MEMBERS the operation's body declares (all of them where it declares none by name).

    An undeclared member is refused by api/strict.py as soon as the body is decoded, by its
    name alone (kernel/inputs.check_members never reads its value), the same Python on both
    engines: test_an_undeclared_member_is_refused_whatever_its_value sends one of each
    BAD_VALUES to every operation, and tests/platform/test_api_strict_input.py one at every
    depth of a valid body. Sending every undeclared member with every bad value as well (some
    30,000 more requests, half the sweep) repeated that one refusal."""
    from marketing_cli.api import schemas
    from marketing_cli.api.strict import plain_path

    body = schemas.OPERATIONS.get((method, plain_path(template)), {}).get("body")
    if not isinstance(body, dict) or not isinstance(body.get("properties"), dict):
        return MEMBERS
    return [name for name in MEMBERS if name in body["properties"]]


def declared_properties(method: str, template: str) -> dict[str, Any] | None:
    from marketing_cli.api import schemas
    from marketing_cli.api.strict import plain_path

    body = schemas.OPERATIONS.get((method, plain_path(template)), {}).get("body")
    if isinstance(body, dict) and isinstance(body.get("properties"), dict):
        return body["properties"]
    return None


# The sweep in shards: pytest-xdist hands them to both workers (one test of 30,000 requests
# kept one worker busy for minutes while the other ran out of tests). Each shard sweeps every
# SHARDS-th route of the app, so together they sweep every route, later ones included.
SHARDS = 6


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_input_yields_a_500(client: Any, auth: dict, app: Any, shard: int) -> None:
    headers = {**auth, "Content-Type": "application/json"}
    for method, template in api_routes(app)[shard::SHARDS]:
        members = members_to_send(method, template)
        for path in concrete(template):
            if method == "GET":
                for query in QUERIES:
                    check(client.get(path + query, headers=auth))
                continue
            for body in BAD_BODIES:
                check(client.request(method, path, headers=headers, content=body))
            for name in members:
                for value in BAD_VALUES:
                    check(client.request(method, path, headers=headers, json={name: value}))


def test_an_undeclared_member_is_refused_whatever_its_value(client: Any, auth: dict, app: Any) -> None:
    """What lets the sweep above send each operation only the members it declares: on every
    path the sweep tries, an undeclared member gets the same answer whatever its value (the 400
    that names it; where the path itself is refused first, that refusal)."""
    headers = {**auth, "Content-Type": "application/json"}
    name, refused = "zz_undeclared", 0
    for method, template in api_routes(app):
        properties = declared_properties(method, template)
        if properties is None or method == "GET":
            continue
        assert name not in properties
        for path in concrete(template):
            first = client.request(method, path, headers=headers, json={name: 1})
            check(first)
            expected = error_of(first) if first.status_code >= 400 else (first.status_code, None)
            refused += expected == (400, f"Unknown member '{name}'")
            for value in BAD_VALUES:
                response = client.request(method, path, headers=headers, json={name: value})
                check(response)
                got = error_of(response) if response.status_code >= 400 else (response.status_code, None)
                assert got == expected, (method, path, value)
    assert refused >= 30  # the body is read (and the member refused) on most of them


def test_a_nul_character_in_a_query_parameter_or_a_path_is_never_a_500(client: Any, auth: dict, app: Any) -> None:
    """U+0000, which PostgreSQL's text cannot hold (JSON bodies refuse it: kernel/inputs), sent
    in each query parameter every operation declares, and in place of every path parameter:
    each answer is a 4xx with the error body or a success, never a 500, on both engines."""
    from marketing_cli.api import schemas
    from marketing_cli.api.strict import plain_path

    sent = 0
    for method, template in api_routes(app):
        for name in schemas.OPERATIONS.get((method, plain_path(template)), {}).get("query", {}):
            for path in concrete(template):
                check(client.request(method, path, params={name: "a\x00b"}, headers=auth))
                sent += 1
        if "{" in template:
            check(client.request(method, re.sub(r"\{[^}]+\}", "a%00b", template), headers=auth))
            sent += 1
    assert sent > 100

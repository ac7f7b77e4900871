"""Every route, public and authenticated, answers arbitrary path segments and query values
with something other than a 5xx (issue: a tracking URL whose link id was a superscript
digit answered 500).

The routes come from the app itself, so a new route is fuzzed the day it is added. Each
path parameter and a few query members (`page`, `limit`, `status`, `phone_number`, `type`,
and one the route does not know) get text drawn by hypothesis: any Unicode (superscript,
Arabic-Indic and full-width digits included), empty, very long, and percent-encoded forms
of all of these, then are sent with and without the workspace's key.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.routing import Mount

from marketing_cli.api.app import create_app
from marketing_cli.services.account import workspaces
from marketing_cli.storage.db import connect
from tests.asgi_client import InlineClient
from tests.engines import new_database

pytestmark = pytest.mark.slow

_PARAM = re.compile(r"\{([a-z_]+)(?::[a-z_]+)?\}")
QUERY_MEMBERS = ("page", "limit", "status", "phone_number", "type", "x")
TRICKY = ["", "0", "-1", "¹", "²", "٣", "１", "9" * 40, "1e3", " 1", "%", "%00", "%FF", "..", "\x00", "\ud7ff",
          "a" * 3000, "%E2%82%81", "𝟙", "0x10"]

_text = st.one_of(st.sampled_from(TRICKY), st.text(max_size=60),
                  st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=25))


def _routes(app: Any) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def walk(routes: Any, prefix: str) -> None:
        for route in routes:
            if isinstance(route, Mount):
                walk(route.routes, prefix + route.path)
            elif getattr(route, "methods", None):
                path = (prefix + route.path).replace("{prefix:path}", "base")
                found.extend((method, path) for method in sorted(route.methods) if method != "HEAD")

    walk(app.routes, "")
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> dict[str, Any]:
    db_path = new_database(postgres_server, tmp_path_factory.mktemp("paths"))
    conn = connect(db_path)
    created = workspaces.create_workspace(conn, "Paths")
    conn.close()
    app = create_app(db_path)
    client = InlineClient(app)
    client.__enter__()
    yield {"client": client, "key": created["api_key"], "routes": _routes(app)}
    client.__exit__(None, None, None)
    if postgres_server is not None:
        postgres_server.drop(db_path)


def _encoded(text: str, raw: bool) -> str:
    """As written when it is printable ASCII a URL can carry (malformed escapes such as `%` or
    `%FF` included), else percent-encoded: what arrives is then the text itself."""
    printable = all(32 < ord(c) < 127 for c in text) and not any(c in text for c in "/?#&=")
    return text if raw and printable else quote(text, safe="")


def test_the_routes_are_found(world: dict[str, Any]) -> None:
    paths = {path for _, path in world["routes"]}
    assert {"/t/c/{token}/{link_id}", "/v1/contacts/{contact_id}", "/s/{token}"} <= {
        _PARAM.sub(lambda m: "{" + m.group(1) + "}", p) for p in paths}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(segment=_text, query=_text, raw=st.booleans(), with_key=st.booleans())
@example(segment="¹", query="²", raw=True, with_key=True)
@example(segment="٣", query="１", raw=False, with_key=False)
def test_no_route_answers_5xx(world: dict[str, Any], segment: str, query: str, raw: bool, with_key: bool) -> None:
    client: InlineClient = world["client"]
    headers = {"Authorization": f"Bearer {world['key']}"} if with_key else {}
    failures = []
    for method, path in world["routes"]:
        url = _PARAM.sub(lambda m: _encoded(segment, raw), path)
        params = "&".join(f"{name}={_encoded(query, raw)}" for name in QUERY_MEMBERS)
        kwargs: dict[str, Any] = {"headers": headers}
        if method in ("POST", "PATCH", "PUT"):
            kwargs["content"] = b"{}"
            kwargs["headers"] = {**headers, "Content-Type": "application/json"}
        answer = client.request(method, f"{url}?{params}", **kwargs)
        if answer.status_code >= 500:
            failures.append((method, url[:120], answer.status_code))
    assert failures == []

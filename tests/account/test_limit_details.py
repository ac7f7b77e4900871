"""Errors that say what to do: a plan-limit error keeps the specification's message and adds
the allowance, the usage and the command that raises it (the CLI's second line; the API's
`X-Error-Detail` header, the body keeping CONTRACT's fixed shape)."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import segments
from tests import factories

FILTERS = {"condition": "AND", "filters": [{"type": "tags", "operator": "contains", "value": []}]}


def _segment_body(conn: Any, ws: int) -> dict[str, Any]:
    tag = factories.tag(conn, ws, "vip")
    return {"name": "Vips", "filters": {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [tag]}]}}


def test_the_segment_limit_says_the_allowance_usage_and_fix(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "segments", 0)
    with pytest.raises(MktError) as caught:
        segments.create_segment(conn, ws, _segment_body(conn, ws))
    assert caught.value.message == "Billing limit error"
    detail = caught.value.detail
    assert "segments: the free plan (with the operator's override) allows 0 and 0 are used" in detail
    assert "mkt billing allowance set segments N" in detail and "mkt billing plan set PLAN" in detail


def test_the_contacts_limit_detail(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    factories.contact(conn, ws, "a@example.com")
    billing.set_allowance(conn, ws, "contacts", 1)
    with pytest.raises(MktError) as caught:
        factories.contact(conn, ws, "b@example.com")
    assert caught.value.message == "Billing limit error"
    assert "contacts:" in caught.value.detail and "allows 1 and 1 are used" in caught.value.detail


def test_http_keeps_the_body_and_sends_the_detail_in_a_header(client: Any, auth: dict[str, str], conn: Any,
                                                                workspace: dict[str, Any]) -> None:
    billing.set_allowance(conn, workspace["id"], "segments", 0)
    answer = client.post("/v1/segments", headers=auth, json=_segment_body(conn, workspace["id"]))
    assert factories.error_of(answer) == (400, "Billing limit error")  # the body: CONTRACT's exact shape
    assert "mkt billing allowance set segments N" in answer.headers["X-Error-Detail"]
    error = client.get("/v1/openapi.json").json()["components"]["responses"]["Error"]
    assert "X-Error-Detail" in error["headers"]


def test_cli_prints_the_message_then_the_detail(cli: Any, conn: Any, workspace: dict[str, Any]) -> None:
    billing.set_allowance(conn, workspace["id"], "domains", 0)
    result = cli("domains", "add", "example.com")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Billing limit error"
    assert "domains: the free plan" in result.stderr and "mkt billing allowance set domains N" in result.stderr

"""Counts that tell the truth: a segment carries when its count was taken (`counted_at`) and
whether a recount is on its way (`counting`), in JSON (both faces) and in the tables."""

from __future__ import annotations

import time
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.contacts import segments
from tests import factories


def _segment(conn: Any, ws: int) -> dict[str, Any]:
    tag = factories.tag(conn, ws, "vip")
    factories.contact(conn, ws, "a@example.com", tags=[tag])
    return segments.create_segment(conn, ws, {"name": "Vips", "filters": {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [tag]}]}})


def test_counted_at_and_counting_follow_the_count_job(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    made = _segment(conn, ws)
    assert made["counted_at"] is None and made["counting"] is True and made["contact_count"] == 0
    before = clock.now()
    jobs.run_due(conn)
    counted = segments.get_segment(conn, ws, made["id"])
    assert counted["contact_count"] == 1 and counted["counting"] is False
    assert counted["counted_at"] >= before and counted["counted_at"].endswith("Z")
    segments.refresh_segment(conn, ws, made["id"])
    assert segments.list_segments(conn, ws)[0]["counting"] is True


def test_http_carries_the_extension_members(client: Any, auth: dict[str, str], conn: Any,
                                            workspace: dict[str, Any]) -> None:
    made = _segment(conn, workspace["id"])
    jobs.run_due(conn)
    body = client.get(f"/v1/segments/{made['id']}", headers=auth).json()["data"]
    assert body["counted_at"] is not None and body["counting"] is False
    listed = client.get("/v1/segments", headers=auth).json()["data"]
    assert listed[0]["counted_at"] == body["counted_at"]


def test_cli_tables_say_when_the_count_was_taken(cli: Any, cli_json: Any, client: Any, auth: dict[str, str],
                                                 conn: Any, workspace: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    made = _segment(conn, workspace["id"])
    assert "counting…" in cli("segments", "list").stdout
    jobs.run_due(conn)
    monkeypatch.setenv("TZ", "Europe/Paris")
    time.tzset()
    try:
        at = clock.parse_ts(segments.get_segment(conn, workspace["id"], made["id"])["counted_at"])
        local = at.astimezone()
        listed = cli("segments", "list").stdout
        assert f"{at:%Y-%m-%d %H:%M} UTC" in listed and f"{local:%Y-%m-%d %H:%M} {local.tzname()}" in listed
        shown = cli("segments", "show", str(made["id"])).stdout
        assert "counted at" in shown and f"{local:%Y-%m-%d %H:%M} {local.tzname()}" in shown
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert cli_json("segments", "show", str(made["id"])) == \
        client.get(f"/v1/segments/{made['id']}", headers=auth).json()["data"]

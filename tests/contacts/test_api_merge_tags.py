from __future__ import annotations

from typing import Any

from tests.factories import error_of


def test_merge_tags(client: Any, auth: dict, conn: Any, workspace: dict) -> None:
    r = client.get("/v1/merge-tags", headers=auth)
    assert r.status_code == 200 and r.json()["error"] is None
    tags = r.json()["data"]
    assert {"tag": "{{contact.first_name}}", "label": "First name", "category": "contact"} in tags
    assert {t["category"] for t in tags} == {"contact", "workspace", "actions", "system"}


def test_merge_tags_need_a_key(client: Any) -> None:
    assert error_of(client.get("/v1/merge-tags")) == (401, "Please provide an API key.")

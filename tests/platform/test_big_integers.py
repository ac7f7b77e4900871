"""A JSON document the API keeps as it was sent may hold an integer past 64 bits (a draft flow
naming segment 10**26, an editor template's body_json): the answer writes it back instead of
failing with a 500 (orjson writes no such integer; found by tests/platform/test_api_fuzz.py)."""

from __future__ import annotations

import json

import pytest

from marketing_cli.storage.encoding import dumps, dumps_bytes

BIG = 161309270959389133580009472


@pytest.mark.engine_neutral
def test_the_encoder_writes_integers_past_64_bits_in_its_own_layout() -> None:
    value = {"a": [1, BIG, {"b": "é", "c": []}], "d": {}, "e": 1.5}
    assert dumps_bytes(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert dumps(value, pretty=True) == json.dumps(value, ensure_ascii=False, indent=2)
    small = {**value, "a": [1, 2, {"b": "é", "c": []}]}  # orjson's own answer has the same layout
    assert dumps_bytes(small) == json.dumps(small, ensure_ascii=False, separators=(",", ":")).encode()
    assert dumps(small, pretty=True) == json.dumps(small, ensure_ascii=False, indent=2)


@pytest.mark.engine_neutral
def test_other_encoding_errors_stand() -> None:
    with pytest.raises(TypeError):
        dumps({"a": object()})


def test_documents_holding_big_integers_are_answered(client, auth) -> None:
    flow = {"name": "Big", "triggers": [{"type": "segment_left", "segment_id": BIG}],
            "steps": [{"type": "split", "id": "s", "condition": {"kind": "tag", "tag": "vip"}}]}
    response = client.post("/v1/automations", headers=auth, json=flow)
    assert response.status_code == 201, response.text[:300]
    template = client.post("/v1/templates", headers=auth, json={"name": "Editor", "type": "editor",
                                                                "body_json": {"rows": [BIG]}})
    assert template.status_code == 201, template.text[:300]
    assert template.json()["data"]["body_json"] == {"rows": [BIG]}
    got = client.get(f"/v1/templates/{template.json()['data']['id']}", headers=auth)
    assert got.status_code == 200 and got.json()["data"]["body_json"] == {"rows": [BIG]}

"""Both faces of the frequency caps: `mkt automations caps show|set` --json prints the data of
GET/PUT /v1/automations/caps, errors carry the same message, and a refused request writes
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests import factories as f


def test_show_and_set_on_both_faces(cli_json: Any, client: Any, auth: dict[str, str],
                                    workspace: dict[str, Any]) -> None:
    empty = {"email": None, "sms": None}
    assert cli_json("automations", "caps", "show") == empty
    assert client.get("/v1/automations/caps", headers=auth).json() == {"data": empty, "error": None}
    set_cli = cli_json("automations", "caps", "set", "email", "--max", "3", "--window", "1d12h")
    assert set_cli["email"] == {"max_messages": 3, "window": {"days": 1, "hours": 12}, "window_seconds": 129600}
    answer = client.put("/v1/automations/caps", headers=auth, json={"sms": {"max_messages": 1, "window": {"hours": 12}}})
    assert answer.status_code == 200
    both = answer.json()["data"]
    assert both["email"] == set_cli["email"] and both["sms"]["window"] == {"hours": 12}
    assert cli_json("automations", "caps", "show") == both
    assert cli_json("automations", "caps", "set", "sms", "--off")["sms"] is None
    assert client.put("/v1/automations/caps", headers=auth, json={"email": None}).json()["data"] == empty


def test_the_human_table(cli: Any, workspace: dict[str, Any]) -> None:
    cli("automations", "caps", "set", "sms", "--max", "2", "--window", "7d")
    out = cli("automations", "caps", "show").stdout
    assert "Frequency caps" in out and "2" in out and "7 days" in out and "no cap" in out


@pytest.mark.parametrize(("args", "body", "message"), [
    (("email", "--max", "0", "--window", "1d"), {"email": {"max_messages": 0, "window": {"days": 1}}},
     "The member 'email.max_messages' must be a whole number from 1 to 1000."),
    (("sms", "--max", "2", "--window", "400d"), {"sms": {"max_messages": 2, "window": {"days": 400}}},
     "The duration 'sms.window' must be more than 0 and at most 366 days."),
    (("sms", "--max", "2", "--window", "0h"), {"sms": {"max_messages": 2, "window": {"hours": 0}}},
     "The duration 'sms.window' must be more than 0 and at most 366 days."),
    (("push", "--max", "2", "--window", "1d"), {"push": {"max_messages": 2, "window": {"days": 1}}},
     "Unknown member 'push'"),
])
def test_refusals_match_and_write_nothing(cli: Any, client: Any, auth: dict[str, str], args: tuple[str, ...],
                                          body: dict[str, Any], message: str) -> None:
    result = cli("automations", "caps", "set", *args)
    assert result.exit_code == 1 and message in result.stderr
    answer = client.put("/v1/automations/caps", headers=auth, json=body)
    assert f.error_of(answer) == (400, message)
    assert client.get("/v1/automations/caps", headers=auth).json()["data"] == {"email": None, "sms": None}


@pytest.mark.parametrize(("args", "message"), [
    (("email", "--max", "2"), "Give --max and --window (for example --max 2 --window 1d), or --off."),
    (("email", "--off", "--max", "2"), "Give either --off, or --max and --window."),
    (("email", "--max", "2", "--window", "tomorrow"),
     "--window takes a duration such as 1d, 12h, 1d12h or 90m, not 'tomorrow'."),
    (("email", "--max", "2", "--window", "1d1d"),
     "--window takes a duration such as 1d, 12h, 1d12h or 90m, not '1d1d'."),
])
def test_cli_only_refusals(cli: Any, workspace: dict[str, Any], args: tuple[str, ...], message: str) -> None:
    result = cli("automations", "caps", "set", *args)
    assert result.exit_code == 1 and message in result.stderr


@pytest.mark.parametrize("body", [b"", b"[1]", b"{}", b"not json"])
def test_a_bad_body_is_a_400(client: Any, auth: dict[str, str], body: bytes) -> None:
    answer = client.put("/v1/automations/caps", headers={**auth, "Content-Type": "application/json"}, content=body)
    assert answer.status_code == 400
    assert client.get("/v1/automations/caps", headers=auth).json()["data"] == {"email": None, "sms": None}

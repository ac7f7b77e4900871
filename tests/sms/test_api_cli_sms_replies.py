"""SMS replies on both faces: GET /v1/sms-replies (envelope A, checked against the OpenAPI
document) and `mkt sms replies` (whose --json is the API's data), a reply arriving through the
signed Twilio webhook; and the operator's `mkt sms revocation-phrases show|check|test`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from marketing_cli.services.sms import providers, revocation
from marketing_cli.services.sms import webhooks as sms_webhooks
from tests import factories as f

BASE = "https://t.example.com"
US = ["+14155550101", "+14155550102"]


@pytest.fixture
def world(conn: sqlite3.Connection, workspace: dict[str, Any]) -> Any:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (BASE, ws))
    f.sms_contacts(conn, ws, US)
    with f.TwilioStandIn() as server:
        providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                               base_url=server.base_url)
        yield {"ws": ws, "server": server}


def reply(client: Any, body: str, number: str) -> Any:
    params = {"From": number, "To": "+15005550006", "Body": body, "AccountSid": f.TWILIO_SID,
              "MessageSid": "SM" + "1" * 32}
    signature = sms_webhooks.signature(f.TWILIO_TOKEN, BASE + sms_webhooks.INBOUND_PATH, params)
    return client.post(sms_webhooks.INBOUND_PATH, data=params, headers={"X-Twilio-Signature": signature})


def test_replies_through_the_webhook_are_listed_on_both_faces(client: Any, auth: dict[str, str], world: Any,
                                                              cli_json: Callable[..., Any]) -> None:
    for body, number in [("Stop please", US[0]), ("when do you stop selling bread?", US[1]), ("START", US[0])]:
        response = reply(client, body, number)
        assert response.status_code == 200 and response.text.endswith("<Response/>")
    [confirmation] = world["server"].received  # one text: the revocation's confirmation, at once
    assert confirmation["form"]["To"] == US[0] and "START to resubscribe" in confirmation["form"]["Body"]
    response = client.get("/v1/sms-replies", headers=auth)
    assert response.status_code == 200
    document = client.get("/v1/openapi.json").json()
    schema = document["paths"]["/v1/sms-replies"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    Draft202012Validator({**schema, "components": document["components"]}).validate(response.json())
    body = response.json()
    assert body["error"] is None
    assert [(r["body"], r["action"], r["rule"], r["contacts_changed"]) for r in body["data"]["replies"]] == [
        ("START", "resubscribed", "start:start", 1), ("when do you stop selling bread?", "none", None, 0),
        ("Stop please", "revoked", "keyword:stop", 1)]
    stop = body["data"]["replies"][2]
    assert stop["confirmation"]["status"] == "sent" and stop["confirmation"]["handed_at"]
    assert cli_json("sms", "replies") == body["data"]
    assert cli_json("sms", "replies", "--action", "none", "--limit", "1")["replies"] == [body["data"]["replies"][1]]
    only = client.get("/v1/sms-replies?action=revoked&limit=1&page=1", headers=auth).json()["data"]
    assert [r["body"] for r in only["replies"]] == ["Stop please"] and only["pagination"]["total_count"] == 1


def test_bad_requests_are_refused_with_the_message(client: Any, auth: dict[str, str], world: Any,
                                                   cli: Callable[..., Any]) -> None:
    response = client.get("/v1/sms-replies?action=stopped", headers=auth)
    assert f.error_of(response) == (400, "Invalid action 'stopped'. Valid actions are: revoked, resubscribed, none.")
    assert f.error_of(client.get("/v1/sms-replies?acton=none", headers=auth))[0] == 400  # a typo is not "no filter"
    assert f.error_of(client.get("/v1/sms-replies"))[0] == 401
    result = cli("sms", "replies", "--action", "stopped")
    assert result.exit_code == 1
    assert "Invalid action 'stopped'. Valid actions are: revoked, resubscribed, none." in result.stderr


def test_the_human_table_names_what_each_reply_did(conn: sqlite3.Connection, client: Any, world: Any,
                                                   cli: Callable[..., Any]) -> None:
    reply(client, "No más mensajes", US[1])
    result = cli("sms", "replies")
    assert result.exit_code == 0
    assert "No más mensajes" in result.stdout and "phrase:es:no mas mensajes" in result.stdout
    assert "revoked" in result.stdout and "(1 replies)" in result.stdout


def test_the_operator_reads_checks_and_tries_the_rules(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       db_path: Any) -> None:
    monkeypatch.delenv(revocation.TABLE_ENV, raising=False)
    assert cli_json("sms", "revocation-phrases", "show") == revocation.show_table()
    shown = cli("sms", "revocation-phrases", "show")
    assert shown.exit_code == 0 and "Table: built-in" in shown.stdout and "47 CFR 64.1200(a)(10)" in shown.stdout
    copy = tmp_path / "mine.csv"
    copy.write_text(cli("sms", "revocation-phrases", "show", "--csv").stdout, encoding="utf-8")
    assert copy.read_text(encoding="utf-8") == revocation.BUILT_IN.read_text(encoding="utf-8")
    checked = cli_json("sms", "revocation-phrases", "check", str(copy))
    assert checked["languages"] == ["en", "es", "fr"]
    assert cli_json("sms", "revocation-phrases", "test", "Can you stop texting me?") == {
        "action": "revoked", "rule": "phrase:en:stop texting", "language": "en"}
    tried = cli("sms", "revocation-phrases", "test", "don't stop the deals")
    assert tried.exit_code == 0 and tried.stdout.strip() == "none"
    copy.write_text("kind,language,text,source\nkeyword,en,,x\n", encoding="utf-8")
    bad = cli("sms", "revocation-phrases", "check", str(copy))
    assert bad.exit_code == 1 and f"{copy} line 2: '' has no word to match." in bad.stderr
    monkeypatch.setenv(revocation.TABLE_ENV, str(copy))  # a broken table in effect: the runners refuse to start
    run = cli("jobs", "run")
    assert run.exit_code == 1 and "line 2: '' has no word to match." in run.stderr
    shown = cli("sms", "revocation-phrases", "show", "--json")
    assert shown.exit_code == 1 and shown.stdout == ""

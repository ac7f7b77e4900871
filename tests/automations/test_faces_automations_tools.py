"""Both faces of the flow tools: `simulate` (POST /v1/automations/:id/simulate), `test`
(POST /v1/automations/:id/test, through a real SMTP server and the Twilio stand-in) and YAML
flow files (`create` / `update --file flow.yaml`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.automations.simulate.test_sends import _send_test_texts
from marketing_cli.services.automations.simulate.walk import CONTACT_NOT_FOUND
from marketing_cli.services.sms import providers
from tests import factories as f
from tests.smtp_server import SmtpServer

START = datetime(2026, 1, 14, 7, 0, tzinfo=UTC)


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(clock, "utcnow", lambda: START)
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    return {"ws": ws, "sender": f.verified_sender(conn, ws), "vip": f.tag(conn, ws, "vip"),
            "ann": f.contact(conn, ws, "ann@example.com", first_name="Ann")["id"]}


def _doc(sender: int) -> dict[str, Any]:
    return {"name": "Cart", "triggers": [{"type": "manual"}],
            "steps": [f.email_step("hello", sender, "cart"),
                      {"id": "cart", "type": "wait_for_event", "event": {"type": "custom_event", "name": "cart"},
                       "timeout": {"days": 1}, "next": "thanks", "timeout_next": "nudge"},
                      f.email_step("thanks", sender), f.email_step("nudge", sender)]}


def test_simulate_on_both_faces(cli_json: Any, cli: Any, client: Any, auth: dict[str, str], conn: Any,
                                world: dict[str, Any], tmp_path: Path) -> None:
    aid = f.automation(conn, world["ws"], _doc(world["sender"]))["id"]
    events = [{"name": "cart", "properties": {"sku": "A1"}, "at": "2026-01-14T09:00:00Z"}]
    (tmp_path / "events.json").write_text(json.dumps(events))
    (tmp_path / "events.yaml").write_text("- name: cart\n  properties: {sku: A1}\n  at: 2026-01-14T09:00:00Z\n")
    api = client.post(f"/v1/automations/{aid}/simulate", headers=auth,
                      json={"contact_id": world["ann"], "events": events, "until": "2026-02-01"})
    assert api.status_code == 200, api.text
    data = api.json()["data"]
    assert [s["step_id"] for s in data["steps"] if s["outcome"] == "would send"] == ["hello", "thanks"]
    for name in ("events.json", "events.yaml"):
        assert cli_json("automations", "simulate", str(aid), "--contact", world["ann"], "--events",
                        str(tmp_path / name), "--until", "2026-02-01") == data
    shown = cli("automations", "simulate", str(aid), "--contact", world["ann"])
    assert shown.exit_code == 0
    assert "nudge" in shown.stdout and "timeout" in shown.stdout and "UTC" in shown.stdout
    assert conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM automation_enrollments").fetchone()[0] == 0
    assert f.error_of(client.post(f"/v1/automations/{aid}/simulate", headers=auth,
                                  json={"contact_id": world["ann"], "until": "2020-01-01"})) == (
        400, "The member 'until' must be in the future.")
    result = cli("automations", "simulate", str(aid), "--contact", "0" * 24)
    assert result.exit_code == 1 and CONTACT_NOT_FOUND in result.stderr


def test_test_sends_each_email_once_through_smtp_on_both_faces(
        cli_json: Any, client: Any, auth: dict[str, str], conn: Any, world: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_TEST_EMAIL_LIMITS", "10,30,100")
    aid = f.automation(conn, world["ws"], _doc(world["sender"]))["id"]
    with SmtpServer() as server:
        sent = cli_json("automations", "test", str(aid), "--to", "qa@example.org", "--contact", world["ann"],
                        "--smtp-url", server.url)
        assert [(s["step_id"], s["channel"], s["status"]) for s in sent["sent"]] == [
            ("hello", "email", "sent"), ("thanks", "email", "sent"), ("nudge", "email", "sent")]
        assert [m.rcpt_tos for m in server.messages] == [["qa@example.org"]] * 3
        first = server.messages[0].message
        assert first["Subject"] == "Step hello" and first["X-Mkt-Test"] == "1"
        assert first["Message-ID"] == sent["sent"][0]["message_id"]
        assert "Hi Ann, this is hello" in first.get_body(("plain",)).get_content()
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        api = client.post(f"/v1/automations/{aid}/test", headers=auth, json={"to": "qa@example.org"})
        assert api.status_code == 200, api.text
        assert [s["step_id"] for s in api.json()["data"]["sent"]] == ["hello", "thanks", "nudge"]
        assert len(server.messages) == 6
    # Nothing of the flow itself is written: no campaign, no message, no enrollment.
    assert conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM test_email_sends").fetchone()[0] == 6


def test_test_refusals_on_both_faces(cli: Any, client: Any, auth: dict[str, str], conn: Any,
                                     world: dict[str, Any]) -> None:
    aid = f.automation(conn, world["ws"], _doc(world["sender"]))["id"]
    response = client.post(f"/v1/automations/{aid}/test", headers=auth, json={"to": "nobody"})
    assert f.error_of(response)[0] == 400 and "neither an email address nor a phone number" in f.error_of(response)[1]
    result = cli("automations", "test", str(aid), "--to", "nobody")
    assert result.exit_code == 1 and "neither an email address nor a phone number" in result.stderr
    # Five emails a minute by default: a flow of three fits once, not twice.
    conn.execute("INSERT INTO test_email_sends (workspace_id, recipient, sent_at) VALUES (?, 'x@example.org', ?)",
                 (world["ws"], clock.now()))
    conn.execute("INSERT INTO test_email_sends (workspace_id, recipient, sent_at) VALUES (?, 'x@example.org', ?)",
                 (world["ws"], clock.now()))
    conn.execute("INSERT INTO test_email_sends (workspace_id, recipient, sent_at) VALUES (?, 'x@example.org', ?)",
                 (world["ws"], clock.now()))
    conn.commit()
    assert f.error_of(client.post(f"/v1/automations/{aid}/test", headers=auth, json={"to": "qa@example.org"}))[0] == 429
    assert conn.execute("SELECT count(*) FROM test_email_sends").fetchone()[0] == 3
    # A phone number: the email steps are listed as not sent (no test email address).
    answer = client.post(f"/v1/automations/{aid}/test", headers=auth, json={"to": "+14155550100"}).json()["data"]
    assert {s["status"] for s in answer["sent"]} == {"not sent: no test email address"}


def test_sms_steps_go_to_the_test_phone_through_the_provider(conn: Any, world: dict[str, Any]) -> None:
    texts = [{"id": "text", "type": "send_sms", "body": "Hi {{contact.first_name}}"}]
    contact = conn.execute("SELECT * FROM contacts WHERE id = ?", (world["ann"],)).fetchone()
    outbox = _send_test_texts(conn, world["ws"], 1, texts, "+14155550100", contact)
    assert outbox[0]["status"].startswith("not sent: the workspace's SMS provider is the outbox")
    with f.TwilioStandIn() as server:
        providers.set_provider(conn, world["ws"], "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                               base_url=server.base_url)
        sent = _send_test_texts(conn, world["ws"], 1, texts, "+14155550100", contact)
        assert (sent[0]["status"], sent[0]["body"]) == ("sent", "Hi Ann")
        assert sent[0]["message_id"]
        assert [(r["form"]["To"], r["form"]["Body"]) for r in server.received] == [("+14155550100", "Hi Ann")]


YAML_FLOW = """\
name: Welcome (YAML)
triggers:
  - type: manual
steps:
  - id: vip?
    type: split
    condition: {kind: tag, tag: vip}
    yes: wait
    no: bye
  - id: wait
    type: wait
    duration: {days: 2}
    next: bye
  - id: bye
    type: exit
"""


def test_yaml_flow_files(cli_json: Any, cli: Any, client: Any, auth: dict[str, str], world: dict[str, Any],
                         tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(YAML_FLOW)
    created = cli_json("automations", "create", "--file", str(path))
    flow = client.get(f"/v1/automations/{created['id']}", headers=auth).json()["data"]["flow"]
    assert flow["steps"][0] == {"id": "vip?", "type": "split", "condition": {"kind": "tag", "tag": "vip"},
                                "yes": "wait", "no": "bye"}  # yes/no stay the pointers' names, not booleans
    other = tmp_path / "flow.yml"
    other.write_text(YAML_FLOW.replace("Welcome (YAML)", "Renamed"))
    assert cli_json("automations", "update", str(created["id"]), "--file", str(other))["name"] == "Renamed"
    assert cli_json("automations", "publish", str(created["id"]))["status"] == "ACTIVE"
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\ntriggers:\n  - type: manual\n steps: [\n")
    result = cli("automations", "create", "--file", str(broken))
    assert result.exit_code == 2 and "is not valid YAML at line 4" in result.stderr
    keys = tmp_path / "keys.yaml"
    keys.write_text("name: x\n1: y\n")
    result = cli("automations", "create", "--file", str(keys))
    assert result.exit_code == 2 and "the key 1 is not a string" in result.stderr
    shape = tmp_path / "shape.yaml"
    shape.write_text("- just a list\n")
    result = cli("automations", "create", "--file", str(shape))
    assert result.exit_code == 1 and "The automation must be a JSON object" in result.stderr
    assert [a["name"] for a in client.get("/v1/automations", headers=auth).json()["data"]] == ["Renamed"]

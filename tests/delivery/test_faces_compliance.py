"""The compliance gate through both faces: `mkt domains check` / GET /v1/domains/{id}/compliance
(--json is the API's data), scheduling refused over HTTP and on the command line, and the
operator's --override-compliance (CLI only)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from marketing_cli.services.email import domains
from tests import factories as f
from tests.conftest import error_of

NAME = "acme-shop.com"


@pytest.fixture
def failing(conn: Any, workspace: dict[str, Any], dns_server: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A campaign ready to schedule from a verified domain that publishes its DKIM key and no
    SPF or DMARC record; an https tracking base and a TLS relay."""
    monkeypatch.setenv("MKT_PUBLIC_URL", "https://t.acme-shop.com")
    monkeypatch.setenv("MKT_SMTP_URL", "smtps://smtp.acme-relay.net:465")
    ws = workspace["id"]
    added = domains.add_domain(conn, ws, NAME)
    dns_server.publish(added, only={f"TXT {r['host']}" for r in added["dns_records"] if "._domainkey." in r["host"]})
    domains.verify_domain(conn, ws, added["id"])
    f.contact(conn, ws, "reader@example.org")
    campaign = f.ready_campaign(conn, ws, html="<p>Hi <a href='{{unsubscribe_url}}'>unsubscribe</a></p>", domain=NAME)
    return {"domain": added, "campaign": campaign["id"], "dns": dns_server}


def test_check_json_equals_the_api_data(cli_json: Any, client: Any, auth: dict[str, str], failing: dict[str, Any]) -> None:
    path = f"/v1/domains/{failing['domain']['id']}/compliance"
    answer = client.get(path, headers=auth)
    assert answer.status_code == 200 and answer.json()["error"] is None
    rows = answer.json()["data"]
    assert [r["rule"] for r in rows] == ["spf", "dkim", "dmarc", "dmarc_aligned", "one_click", "https_unsubscribe",
                                         "relay_tls", "free_mail_from"]
    assert {r["rule"]: r["status"] for r in rows if r["status"] != "pass"} == {"spf": "fail", "dmarc": "fail"}
    assert cli_json("domains", "check", str(failing["domain"]["id"])) == rows


def test_check_for_a_person_and_for_a_bad_id(cli: Any, client: Any, auth: dict[str, str], failing: dict[str, Any]) -> None:
    out = cli("domains", "check", str(failing["domain"]["id"])).stdout
    assert "dmarc" in out and "fail" in out and "a fail refuses scheduling" in out
    assert error_of(client.get("/v1/domains/abc/compliance", headers=auth)) == (400, "Please provide a valid domain ID.")
    assert error_of(client.get("/v1/domains/999/compliance", headers=auth)) == (404, "We were unable to find the domain.")
    missing = cli("domains", "check", "999")
    assert missing.exit_code == 1 and "We were unable to find the domain." in missing.stderr


def test_scheduling_over_http_is_refused_and_cannot_be_overridden(client: Any, auth: dict[str, str],
                                                                  failing: dict[str, Any]) -> None:
    path = f"/v1/campaigns/{failing['campaign']}/schedule"
    status, message = error_of(client.post(path, headers=auth, json={"schedule_type": "NOW"}))
    assert status == 400 and "spf:" in message and "dmarc:" in message and NAME in message
    status, message = error_of(client.post(path, headers=auth, json={"schedule_type": "NOW",
                                                                     "override_compliance": True}))
    assert status == 400


def test_the_command_line_refuses_then_the_operator_overrides(cli: Any, cli_json: Any, conn: Any,
                                                              failing: dict[str, Any]) -> None:
    refused = cli("campaigns", "schedule", failing["campaign"], "--now")
    assert refused.exit_code == 1 and "dmarc:" in refused.stderr
    scheduled = cli("campaigns", "schedule", failing["campaign"], "--now", "--override-compliance", "--json")
    assert scheduled.exit_code == 0, scheduled.stderr
    assert json.loads(scheduled.stdout) == {"id": failing["campaign"], "status": "QUEUED",
                                            "compliance_override": ["spf", "dmarc"]}
    assert "--override-compliance" in scheduled.stderr and "operator log" in scheduled.stderr
    logged = conn.execute("SELECT action, detail FROM operator_log").fetchall()
    assert [r["action"] for r in logged] == ["email.compliance.override"] and failing["campaign"] in logged[0]["detail"]


def test_once_the_records_are_published_the_campaign_schedules(client: Any, auth: dict[str, str],
                                                               failing: dict[str, Any]) -> None:
    failing["dns"].publish(failing["domain"], only={f"TXT {r['host']}" for r in failing["domain"]["dns_records"]
                                                    if "._domainkey." not in r["host"]} |
                           {f"CNAME {r['host']}" for r in failing["domain"]["dns_records"]})
    answer = client.post(f"/v1/campaigns/{failing['campaign']}/schedule", headers=auth, json={"schedule_type": "NOW"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == {"id": failing["campaign"], "status": "QUEUED"}


def test_a_recurring_series_is_gated_too_and_has_no_override(cli: Any, client: Any, auth: dict[str, str],
                                                             failing: dict[str, Any]) -> None:
    status, message = error_of(client.post(f"/v1/campaigns/{failing['campaign']}/series", headers=auth,
                                           json={"rrule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"}))
    assert status == 400 and "recurring campaign" in message and "dmarc:" in message
    refused = cli("campaigns", "schedule", failing["campaign"], "--every", "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9")
    assert refused.exit_code == 1 and "dmarc:" in refused.stderr
    usage = cli("campaigns", "schedule", failing["campaign"], "--every", "FREQ=WEEKLY", "--override-compliance")
    assert usage.exit_code == 2

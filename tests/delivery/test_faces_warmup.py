"""The warm-up through both faces: `mkt domains warmup start|status|stop` (--json is the API's
data) and POST/GET/DELETE /v1/domains/{id}/warmup, a schedule file or body refused with a
clear 400 and nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.email import domains
from tests.conftest import error_of


@pytest.fixture
def domain(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    return domains.add_domain(conn, workspace["id"], "news.example.com")


def test_start_status_stop_over_http_equal_the_cli(cli_json: Any, client: Any, auth: dict[str, str],
                                                   domain: dict[str, Any], tmp_path: Path) -> None:
    path = f"/v1/domains/{domain['id']}/warmup"
    assert client.get(path, headers=auth).json()["data"]["status"] == "none"
    started = client.post(path, headers=auth, json={"schedule": [{"day": 1, "lane": "gmail", "cap": 100},
                                                                 {"day": 2, "lane": "gmail", "cap": 300}]})
    assert started.status_code == 200, started.text
    data = started.json()["data"]
    assert (data["status"], data["day"], data["days"], data["origin"]) == ("active", 1, 2, "the request's schedule")
    assert {r["lane"]: r["cap"] for r in data["today"]} == {"gmail": 100, "yahoo": None, "microsoft": None,
                                                            "apple": None, "other": None}
    assert cli_json("domains", "warmup", "status", str(domain["id"])) == client.get(path, headers=auth).json()["data"]
    shipped = client.post(path, headers=auth)  # no body: the shipped schedule
    assert shipped.status_code == 200 and shipped.json()["data"]["origin"] == "built-in"
    assert shipped.json()["data"]["days"] == 14
    stopped = client.delete(path, headers=auth)
    assert stopped.status_code == 200 and stopped.json()["data"]["status"] == "stopped"
    assert error_of(client.delete(path, headers=auth)) == (409, f"Domain {domain['id']} has no warm-up running "
                                                                "(it is stopped).")
    mine = tmp_path / "warmup.csv"
    mine.write_text("day,lane,cap\n1,yahoo,50\n")
    answer = cli_json("domains", "warmup", "start", str(domain["id"]), "--schedule", str(mine))
    assert (answer["status"], answer["origin"], answer["schedule"]) == ("active", "warmup.csv",
                                                                         [{"day": 1, "lane": "yahoo", "cap": 50}])
    assert cli_json("domains", "warmup", "stop", str(domain["id"]))["status"] == "stopped"


def test_for_a_person(cli: Any, domain: dict[str, Any]) -> None:
    assert "no warm-up" in cli("domains", "warmup", "status", str(domain["id"])).stdout
    out = cli("domains", "warmup", "start", str(domain["id"])).stdout
    assert "warm-up day 1 of 14" in out and "gmail" in out and "200" in out


@pytest.mark.parametrize(("body", "says"), [
    ({"schedule": [{"day": 1, "lane": "hotmail", "cap": 10}]},
     "schedule[0]: 'hotmail' is not a lane (gmail, yahoo, microsoft, apple, other)."),
    ({"schedule": [{"day": 0, "lane": "gmail", "cap": 10}]}, "schedule[0]: day 0 is out of range (1 to 365)."),
    ({"schedule": [{"day": 1, "lane": "gmail", "cap": 10}, {"day": 1, "lane": "gmail", "cap": 5}]},
     "the request's schedule: day 1 gives the gmail lane two caps."),
    ({"schedule": [{"day": 1, "lane": "gmail"}]}, 'schedule[0]: expected {"day", "lane", "cap"}.'),
])
def test_a_bad_schedule_is_a_400_and_nothing_is_written(client: Any, auth: dict[str, str], domain: dict[str, Any],
                                                        body: Any, says: str) -> None:
    path = f"/v1/domains/{domain['id']}/warmup"
    status, message = error_of(client.post(path, headers=auth, json=body))
    assert status == 400 and says in message, message
    assert client.get(path, headers=auth).json()["data"]["status"] == "none"


def test_a_bad_file_or_id_on_the_command_line(cli: Any, client: Any, auth: dict[str, str], domain: dict[str, Any],
                                              tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("day,lane,cap\n1,gmail,many\n")
    failed = cli("domains", "warmup", "start", str(domain["id"]), "--schedule", str(bad))
    assert failed.exit_code == 1 and "bad.csv line 2: cap 'many' is not a whole number of messages." in failed.stderr
    missing = cli("domains", "warmup", "start", str(domain["id"]), "--schedule", str(tmp_path / "none.csv"))
    assert missing.exit_code == 1 and "Cannot read the schedule file" in missing.stderr
    assert cli("domains", "warmup", "status", "999").exit_code == 1
    assert error_of(client.get("/v1/domains/abc/warmup", headers=auth)) == (400, "Please provide a valid domain ID.")
    assert error_of(client.post("/v1/domains/999/warmup", headers=auth)) == (404, "We were unable to find the domain.")


def _ready(conn: Any, ws: int) -> tuple[str, int]:
    from marketing_cli.services.delivery import warmup_gate
    from tests import factories

    campaign = factories.ready_campaign(conn, ws, html="<p>Hi <a href='{{unsubscribe_url}}'>unsubscribe</a></p>",
                                        domain="example.com")
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    domain_id = warmup_gate.domain_of(conn, campaign["id"])
    assert domain_id is not None
    return campaign["id"], domain_id


def test_a_large_send_from_an_idle_domain_is_offered_a_warm_up(
        conn: Any, workspace: dict[str, Any], client: Any, auth: dict[str, str], cli: Any, verified_dns: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.kernel import clock
    from marketing_cli.services.delivery import warmup
    from marketing_cli.services.email import schedule
    from tests import factories

    ws = workspace["id"]
    monkeypatch.setattr(warmup, "IDLE_OFFER_FROM", 3)  # (5,000 in production)
    for i in range(4):
        factories.contact(conn, ws, f"reader{i}@example.org")
    first, domain_id = _ready(conn, ws)
    answer = client.post(f"/v1/campaigns/{first}/schedule", headers=auth, json={"schedule_type": "NOW"})
    assert answer.status_code == 200, answer.text
    [warning] = answer.json()["data"]["warnings"]
    assert warning.startswith("example.com has sent nothing in the last 30 days and this campaign goes to 4 "
                              "recipients") and f"`mkt domains warmup start {domain_id}`" in warning
    schedule.unschedule_campaign(conn, ws, first)
    printed = cli("campaigns", "schedule", first, "--now")
    assert printed.exit_code == 0 and "Warning: example.com has sent nothing" in printed.stderr
    schedule.unschedule_campaign(conn, ws, first)

    warmup.start_warmup(conn, ws, domain_id)  # a warm-up running: no offer
    answer = client.post(f"/v1/campaigns/{first}/schedule", headers=auth, json={"schedule_type": "NOW"})
    assert "warnings" not in answer.json()["data"]
    schedule.unschedule_campaign(conn, ws, first)
    warmup.stop_warmup(conn, ws, domain_id)
    conn.execute("UPDATE campaigns SET status = 'SENT', sent_at = ? WHERE id = ?", (clock.now(), first))
    conn.commit()
    second = factories.campaign(conn, ws)["id"]  # from the same sender; the domain sent 0 days ago: no offer
    sender_id = conn.execute("SELECT sender_identity_id FROM campaigns WHERE id = ?", (first,)).fetchone()[0]
    from marketing_cli.services.email import campaigns, variant_html

    campaigns.configure_campaign(conn, ws, second, {"sender": {"sender_identity_id": sender_id},
                                                    "audience": {"type": "ENTIRE_AUDIENCE"},
                                                    "variants": [{"type": "A", "subject": "Hello"}]})
    variant_html.set_variant_html(conn, ws, second, "A", {"html": "<p><a href='{{unsubscribe_url}}'>u</a></p>"})
    answer = client.post(f"/v1/campaigns/{second}/schedule", headers=auth, json={"schedule_type": "NOW"})
    assert answer.status_code == 200 and "warnings" not in answer.json()["data"]

"""Counts that tell the truth: before an SMS campaign is queued, who it reaches and who it
skips and why (service, the extension endpoint, `mkt sms reach` and `mkt sms schedule`)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli.services.sms import reach
from tests import factories as f

US = ["+14155550101", "+14155550102", "+14155550103"]
IN = ["+919876543210"]  # enabled, but no rate published


@pytest.fixture
def world(conn: sqlite3.Connection, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    f.sms_contacts(conn, ws, US + IN, first_name="Ann")
    f.contact(conn, ws, "nophone@example.com", first_name="Bo")
    f.contact(conn, ws, "nophone2@example.com", first_name="Cy")
    f.sms_contacts(conn, ws, ["+14155550199"], first_name="Out")
    conn.execute("UPDATE contacts SET sms_status = 'UNSUBSCRIBED' WHERE phone = '+14155550199'")
    return {"ws": ws, "campaign": f.sms_campaign(conn, ws)}


def test_reach_counts_each_reason(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    found = reach.campaign_reach(conn, world["ws"], world["campaign"]["id"])
    assert found == {"id": world["campaign"]["id"], "audience": 7, "recipients": 3,
                     "skipped": {"no_phone_number": 2, "unsubscribed": 1, "cleaned": 0, "blocked": 0,
                                 "no_published_rate": 1},
                     "skipped_total": 4, "countries_without_rate": [{"country": "IN", "count": 1}]}
    assert reach.reach_line(found) == (
        "7 contacts in the audience: 3 will get the message, 4 will be skipped (no phone number: 2; "
        "unsubscribed from SMS: 1; no published rate for their country: 1 (IN 1)).")


def test_reach_agrees_with_what_expansion_sends(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    from marketing_cli import jobs
    from marketing_cli.services.sms import campaigns, schedule

    found = reach.campaign_reach(conn, world["ws"], world["campaign"]["id"])
    schedule.schedule_campaign(conn, world["ws"], world["campaign"]["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    stats = campaigns.get_campaign(conn, world["ws"], world["campaign"]["id"])["statistics"]
    assert stats["sent"] == found["recipients"]
    assert stats["suppressed"] == found["skipped"]["no_published_rate"]


def test_a_campaign_without_audience_reaches_nobody(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    from marketing_cli.services.sms import campaigns

    empty = campaigns.create_campaign(conn, world["ws"], {"name": "Empty"})
    assert reach.campaign_reach(conn, world["ws"], empty["id"])["audience"] == 0


def test_http_reach(client: Any, auth: dict[str, str], conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    answer = client.get(f"/v1/sms-campaigns/{world['campaign']['id']}/reach", headers=auth)
    assert answer.status_code == 200 and answer.json()["error"] is None
    assert answer.json()["data"]["skipped_total"] == 4
    assert f.error_of(client.get("/v1/sms-campaigns/nothex/reach", headers=auth))[0] == 400
    assert "/v1/sms-campaigns/{campaign_id}/reach" in client.get("/v1/openapi.json").json()["paths"]


def test_cli_reach_and_schedule_say_who_is_skipped(cli: Any, cli_json: Any, client: Any, auth: dict[str, str],
                                                   world: dict[str, Any]) -> None:
    cid = world["campaign"]["id"]
    assert cli_json("sms", "reach", cid) == client.get(f"/v1/sms-campaigns/{cid}/reach", headers=auth).json()["data"]
    human = cli("sms", "reach", cid).stdout
    assert "4 will be skipped" in human and "no phone number" in human
    scheduled = cli("sms", "schedule", cid, "--now")
    assert scheduled.exit_code == 0
    lines = scheduled.stdout.strip().splitlines()
    assert lines[0].startswith("7 contacts in the audience: 3 will get the message, 4 will be skipped")
    assert "queued" in lines[-1]
    assert set(cli_json("sms", "show", cid)) >= {"id", "status"}


# --- sms quote --to reads numbers as contacts do --------------------------------------------

def test_quote_reads_national_numbers_in_the_phone_fields_region(conn: sqlite3.Connection, world: dict[str, Any],
                                                                  cli_json: Any, client: Any,
                                                                  auth: dict[str, str]) -> None:
    from marketing_cli.services.contacts import fields
    from marketing_cli.services.sms import schedule

    ws = world["ws"]
    phone = next(x for x in fields.list_fields(conn, ws) if x["merge_tag"] == "phone_number")
    fields.update_field(conn, ws, phone["id"], {"label": phone["label"], "merge_tag": "phone_number",
                                                "type": phone["type"], "default_region": "US"})
    for written in ("(415) 200-0001", "415.200.0001", "+1 415 200 0001", "+1-415-200-0001"):
        quote = schedule.quote_message(conn, ws, {"message": "Hi", "to": written})
        assert quote["to"] == "+14152000001" and quote["country"] == "US" and quote["sendable"] is True
    assert cli_json("sms", "quote", "Hi", "--to", "(415) 200-0001")["to"] == "+14152000001"
    answer = client.post("/v1/sms/quote", headers=auth, json={"message": "Hi", "to": "(415) 200-0001"})
    assert answer.json()["data"]["to"] == "+14152000001"


def test_quote_refusal_says_which_region_read_the_number(conn: sqlite3.Connection, world: dict[str, Any],
                                                          cli: Any) -> None:
    from marketing_cli.errors import MktError
    from marketing_cli.services.contacts import fields
    from marketing_cli.services.sms import schedule

    ws = world["ws"]
    with pytest.raises(MktError) as caught:  # no default region: a national number cannot be read
        schedule.quote_message(conn, ws, {"message": "Hi", "to": "(415) 200-0001"})
    assert "default region" in caught.value.detail
    phone = next(x for x in fields.list_fields(conn, ws) if x["merge_tag"] == "phone_number")
    fields.update_field(conn, ws, phone["id"], {"label": phone["label"], "merge_tag": "phone_number",
                                                "type": phone["type"], "default_region": "GB"})
    refused = cli("sms", "quote", "Hi", "--to", "12345")
    assert refused.exit_code == 1
    assert "'12345' is not a valid phone number" in refused.stderr and "a number of GB" in refused.stderr

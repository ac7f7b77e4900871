"""Twilio inbound replies: STOP words unsubscribe (event log, `unsubscribed` of the last campaign),
START words resubscribe, the signature is checked, and a STOPped contact gets no further SMS."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.sms import campaigns, providers, recipients, schedule, stats
from marketing_cli.services.sms import webhooks as sms_webhooks
from tests import factories as f

US = ["+14155550101", "+14155550102"]
BASE = "https://t.example.com"
INBOUND_URL = BASE + "/webhooks/twilio/inbound"


def run_campaign(conn: sqlite3.Connection, ws: int, server: f.TwilioStandIn, name: str) -> dict[str, Any]:
    campaign = f.sms_campaign(conn, ws, name)
    schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn)["failed"] == 0  # (and a revocation's confirmation, when one is queued)
    return campaign


@pytest.fixture
def world(conn: sqlite3.Connection, workspace: dict[str, Any]) -> Any:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (BASE, ws))
    contacts = f.sms_contacts(conn, ws, US)
    with f.TwilioStandIn() as server:
        providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                                   base_url=server.base_url)
        first = run_campaign(conn, ws, server, "First")
        yield {"ws": ws, "server": server, "first": first, "contacts": contacts}


def reply(client: Any, body: str, number: str = US[0], *, signed: bool = True) -> Any:
    params = {"From": number, "To": "+15005550006", "Body": body, "AccountSid": f.TWILIO_SID,
              "MessageSid": "SM" + "1" * 32, "NumMedia": "0"}
    headers = {"X-Twilio-Signature": sms_webhooks.signature(f.TWILIO_TOKEN, INBOUND_URL, params)} if signed else {}
    return client.post("/webhooks/twilio/inbound", data=params, headers=headers)


def sms_status(conn: sqlite3.Connection, number: str) -> str | None:
    return conn.execute("SELECT sms_status FROM contacts WHERE phone = ?", (number,)).fetchone()[0]


@pytest.mark.parametrize("word", ["STOP", "stop", "  Stopall ", "UNSUBSCRIBE", "cancel", "End", "QUIT\n"])
def test_stop_words_unsubscribe_and_count_in_the_last_campaign(client: Any, conn: sqlite3.Connection, world: Any,
                                                               word: str) -> None:
    response = reply(client, word)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/xml")
    assert response.text.endswith("<Response/>")
    assert sms_status(conn, US[0]) == "UNSUBSCRIBED" and sms_status(conn, US[1]) is None
    figures = stats.campaign_statistics(conn, world["ws"], world["first"]["id"])["aggregate"]
    assert figures["unsubscribed"] == 1
    logged = conn.execute("SELECT type, payload FROM contact_events WHERE contact_id = ? AND type LIKE 'CONTACT_%'",
                          (world["contacts"][0]["id"],)).fetchall()
    assert [r[0] for r in logged] == ["CONTACT_UNSUBSCRIBED"]
    assert '"channel":"sms"' in logged[0][1]
    assert reply(client, word).status_code == 200  # again: counted once, logged once
    assert stats.campaign_statistics(conn, world["ws"], world["first"]["id"])["aggregate"]["unsubscribed"] == 1


def test_other_replies_change_nothing(client: Any, conn: sqlite3.Connection, world: Any) -> None:
    """(Before issue 38 "please stop" and "STOP NOW" were in this list: the rules now read both as
    revocations, tests/sms/test_services_sms_replies.py.)"""
    for body in ["when do you stop selling bread?", "don't stop the deals", "", "hello", "stopover"]:
        assert reply(client, body).status_code == 200
    assert sms_status(conn, US[0]) is None


def test_an_unsigned_or_wrongly_signed_reply_is_refused(client: Any, conn: sqlite3.Connection, world: Any) -> None:
    response = reply(client, "STOP", signed=False)
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "Invalid Twilio signature."
    params = {"From": US[0], "Body": "STOP", "AccountSid": f.TWILIO_SID}
    bad = sms_webhooks.signature("wrong", INBOUND_URL, params)
    assert client.post("/webhooks/twilio/inbound", data=params, headers={"X-Twilio-Signature": bad}).status_code == 403
    assert sms_status(conn, US[0]) is None


@pytest.mark.parametrize("path", ["/webhooks/twilio/inbound", "/webhooks/twilio/status"])
@pytest.mark.parametrize("member", ["AccountSid", "From", "MessageSid", "Zz\x00"])
def test_a_webhook_holding_a_nul_character_is_refused_as_unsigned(client: Any, conn: sqlite3.Connection,
                                                                 world: Any, path: str, member: str) -> None:
    """Twilio never sends U+0000 and PostgreSQL's text cannot hold it (before, an AccountSid
    holding it was a 500 there, signature or not): refused as unsigned (403), nothing changed,
    even when it is signed with the workspace's token."""
    params = {"From": US[0], "To": "+15005550006", "Body": "STOP", "AccountSid": f.TWILIO_SID,
              "MessageSid": "SM" + "1" * 32, "MessageStatus": "delivered"}
    params[member] = (params.get(member) or "x") + "\x00"
    signature = sms_webhooks.signature(f.TWILIO_TOKEN, BASE + path, params)
    response = client.post(path, data=params, headers={"X-Twilio-Signature": signature})
    assert (response.status_code, response.json()["error"]["message"]) == (403, "Invalid Twilio signature.")
    assert sms_status(conn, US[0]) is None
    assert conn.execute("SELECT count(*) FROM sms_messages WHERE delivered_at IS NOT NULL").fetchone()[0] == 0


def test_a_stopped_contact_gets_no_further_sms_and_start_brings_it_back(client: Any, conn: sqlite3.Connection,
                                                                       world: Any) -> None:
    server = world["server"]
    before = len(server.received)
    assert reply(client, "STOP").status_code == 200
    [confirmation] = server.received[before:]  # handed over by the reply's own request
    assert confirmation["form"]["To"] == US[0] and "You are unsubscribed" in confirmation["form"]["Body"]
    before = len(server.received)
    second = run_campaign(conn, world["ws"], server, "Second")
    assert [r["form"]["To"] for r in server.received[before:]] == [US[1]]
    phones = [r[0] for r in conn.execute("SELECT phone FROM sms_messages WHERE campaign_id = ? AND handed_at IS NOT"
                                         " NULL", (second["id"],))]
    assert phones == [US[1]]
    assert reply(client, " start ").status_code == 200
    assert sms_status(conn, US[0]) == "SUBSCRIBED"
    types = [r[0] for r in conn.execute("SELECT type FROM contact_events WHERE contact_id = ? AND type LIKE"
                                        " 'CONTACT_%' ORDER BY id", (world["contacts"][0]["id"],))]
    assert types == ["CONTACT_UNSUBSCRIBED", "CONTACT_SUBSCRIBED"]
    before = len(server.received)
    run_campaign(conn, world["ws"], server, "Third")
    assert sorted(r["form"]["To"] for r in server.received[before:]) == US
    assert reply(client, "UNSTOP").status_code == 200  # already subscribed: nothing changes
    assert conn.execute("SELECT COUNT(*) FROM contact_events WHERE type = 'CONTACT_SUBSCRIBED'").fetchone()[0] == 1


@pytest.mark.sqlite_only  # SQLite's statement trace and EXPLAIN QUERY PLAN (the same partial indexes exist on PostgreSQL)
def test_every_message_lookup_of_a_campaign_and_its_webhooks_is_an_index_search(conn: sqlite3.Connection,
                                                                                world: Any) -> None:
    """What keeps a STOP reply, a status callback and each hand-off batch cheap at millions of
    messages: no statement of the flow scans sms_messages (the STOP reply used to)."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        campaign = run_campaign(conn, world["ws"], world["server"], "Second")
        ref = conn.execute("SELECT provider_ref FROM sms_messages WHERE campaign_id = ? LIMIT 1",
                           (campaign["id"],)).fetchone()[0]
        status = {"MessageSid": ref, "MessageStatus": "delivered", "AccountSid": f.TWILIO_SID}
        sms_webhooks.twilio_status(conn, status, sms_webhooks.signature(
            f.TWILIO_TOKEN, BASE + sms_webhooks.STATUS_PATH, status))
        stop = {"From": US[0], "To": "+15005550006", "Body": "STOP", "AccountSid": f.TWILIO_SID}
        assert sms_webhooks.twilio_inbound(conn, stop, sms_webhooks.signature(
            f.TWILIO_TOKEN, BASE + sms_webhooks.INBOUND_PATH, stop))["action"] == "revoked"
        third = f.sms_campaign(conn, world["ws"], "Third")
        schedule.schedule_campaign(conn, world["ws"], third["id"], {"schedule_type": "NOW"})
        assert recipients.expand_recipients(conn, conn.execute("SELECT * FROM sms_campaigns WHERE id = ?",
                                                         (third["id"],)).fetchone())
        assert campaigns.cancel_campaign(conn, world["ws"], third["id"])["refunded_messages"] == 1
    finally:
        conn.set_trace_callback(None)
    # (statements on the expansion's temporary tables are gone with them; bench/bench_sms.py times those)
    queries = [q for q in seen if "sms_messages" in q
               and not re.search(r"\bsms_(?:snapshot|keys|prices|numbers|held)_[0-9a-f]{32}\b", q)]
    expected = {  # a pattern of the statement -> the index its lookup must use
        r"m\.phone = ": "sms_messages_phone",  # the STOP reply's last message to the number
        r"m\.provider_ref = ": "sms_messages_provider_ref",  # the status callback
        r"status = 'pending' ORDER BY id LIMIT": "sms_messages_pending",  # a hand-off batch's claim
        r"WHERE campaign_id = '\w+' AND status = 'sending'": "sms_messages_sending",
    }
    found = dict.fromkeys(expected, 0)
    for query in queries:
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + query))  # parameters expanded
        assert "SCAN sms_messages" not in plan and "SCAN m" not in plan, (query, plan)
        for pattern, index in expected.items():
            if re.search(pattern, query):
                found[pattern] += 1
                assert f"INDEX {index} " in plan, (query, plan)
    assert all(found.values()), found

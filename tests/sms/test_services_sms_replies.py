"""SMS replies (services/sms/replies.py, confirmation.py, handoff.py): every reply kept with what
it did, one charged confirmation per revocation, and a revocation that stops the messages not yet
handed over."""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns, confirmation, handoff, ledger, providers, replies
from marketing_cli.storage.db import connect
from tests import factories as f

US = ["+14155550101", "+14155550102", "+14155550103"]


@pytest.fixture
def world(conn: sqlite3.Connection, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    return {"ws": ws, "contacts": f.sms_contacts(conn, ws, US)}


def sms_status(conn: sqlite3.Connection, number: str) -> str | None:
    return conn.execute("SELECT sms_status FROM contacts WHERE phone = ?", (number,)).fetchone()[0]


def outbox(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in conn.execute("SELECT recipient, body FROM sms_outbox ORDER BY id")]


def test_a_revocation_is_kept_applied_and_confirmed_once_charged_like_any_text(conn: sqlite3.Connection,
                                                                               world: dict[str, Any]) -> None:
    ws, first = world["ws"], world["contacts"][0]
    balance = ledger.balance(conn, ws)
    kept = f.sms_reply(conn, ws, "Please stop texting me 🙏", US[0])
    assert kept["action"] == "revoked" and kept["rule"] == "keyword:stop" and kept["contacts_changed"] == 1
    assert (kept["contact_id"], kept["phone"], kept["body"]) == (first["id"], US[0], "Please stop texting me 🙏")
    assert kept["confirmation"]["status"] == "sent" and kept["confirmation"]["handed_at"] >= kept["received_at"]
    assert sms_status(conn, US[0]) == "UNSUBSCRIBED" and sms_status(conn, US[1]) is None
    [(to, text)] = outbox(conn)
    assert to == US[0] and text == ("Test workspace: You are unsubscribed and will get no more texts from us. "
                                    "Reply START to resubscribe.")
    [charge] = [e for e in ledger.ledger_history(conn, ws) if e["reason"] == "Revocation confirmation: 1 message"]
    price = conn.execute("SELECT price_units FROM sms_messages WHERE id = ?",
                         (kept["confirmation"]["message_id"],)).fetchone()[0]
    assert Decimal(charge["amount"]) == -ledger.from_units(price) < 0
    assert ledger.balance(conn, ws) == balance + Decimal(charge["amount"])
    event = conn.execute("SELECT type, payload FROM contact_events WHERE contact_id = ? AND type LIKE 'CONTACT_%'",
                         (first["id"],)).fetchone()
    assert event[0] == "CONTACT_UNSUBSCRIBED" and '"rule":"keyword:stop"' in event[1]
    # Already unsubscribed: kept, read as a revocation, nothing changed, no second confirmation.
    again = f.sms_reply(conn, ws, "STOP", US[0])
    assert (again["action"], again["contacts_changed"], again["confirmation"]) == ("revoked", 0, None)
    assert len(outbox(conn)) == 1
    assert jobs.run_due(conn)["failed"] == 0  # the queued job finds nothing left to hand over
    assert len(outbox(conn)) == 1


def test_start_resubscribes_and_a_new_revocation_earns_a_new_confirmation(conn: sqlite3.Connection,
                                                                          world: dict[str, Any]) -> None:
    ws = world["ws"]
    f.sms_reply(conn, ws, "STOP", US[0])
    back = f.sms_reply(conn, ws, "start", US[0])
    assert (back["action"], back["rule"], back["contacts_changed"], back["confirmation"]) == \
        ("resubscribed", "start:start", 1, None)
    assert sms_status(conn, US[0]) == "SUBSCRIBED"
    second = f.sms_reply(conn, ws, "opt-out", US[0])
    assert second["confirmation"]["status"] == "sent" and len(outbox(conn)) == 2
    names = [r[0] for r in conn.execute("SELECT name FROM sms_campaigns WHERE purpose = 'confirmation' ORDER BY name")]
    assert names == ["Revocation confirmations", "Revocation confirmations (2)"]  # one message per contact each
    assert all(c["name"] not in names for c in campaigns.list_campaigns(conn, ws)["campaigns"])  # hidden


def test_the_confirmation_speaks_the_language_of_the_reply(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    ws = world["ws"]
    assert f.sms_reply(conn, ws, "No más mensajes, gracias", US[1])["rule"] == "phrase:es:no mas mensajes"
    assert f.sms_reply(conn, ws, "Je ne veux plus recevoir vos SMS", US[2])["action"] == "revoked"
    texts = dict(outbox(conn))
    assert texts[US[1]].startswith("Test workspace: te hemos dado de baja")
    assert texts[US[2]].startswith("Test workspace : désinscription confirmée")


def test_replies_that_do_nothing_are_kept_for_the_operator(conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    ws = world["ws"]
    for body, number in [("when do you stop selling bread?", US[0]), ("Don't stop texting me!", US[1]),
                         ("Hello", "+14155550199")]:
        f.sms_reply(conn, ws, body, number)
    listed = replies.list_replies(conn, ws, action="none")
    assert [(r["body"], r["rule"], r["contact_id"] is None) for r in listed["replies"]] == [
        ("Hello", None, True), ("Don't stop texting me!", "negated:en:stop texting", False),
        ("when do you stop selling bread?", None, False)]
    assert all(sms_status(conn, n) is None for n in US) and outbox(conn) == []


def test_the_list_pages_filters_and_refuses_an_unknown_action(conn: sqlite3.Connection,
                                                              world: dict[str, Any]) -> None:
    ws = world["ws"]
    for body in ["hello", "STOP", "START", "thanks"]:
        f.sms_reply(conn, ws, body, US[0])
    page = replies.list_replies(conn, ws, limit=3, page=2)
    assert [r["body"] for r in page["replies"]] == ["hello"]
    assert page["pagination"] == {"current_page": 2, "per_page": 3, "total_pages": 2, "total_count": 4}
    assert [r["body"] for r in replies.list_replies(conn, ws, action=" Revoked ")["replies"]] == ["STOP"]
    assert replies.list_replies(conn, ws, action="")["pagination"]["total_count"] == 4
    assert replies.list_replies(conn, ws, limit="500")["pagination"]["per_page"] == 100
    with pytest.raises(MktError) as caught:
        replies.list_replies(conn, ws, action="stopped")
    assert (caught.value.status, caught.value.message) == (
        400, "Invalid action 'stopped'. Valid actions are: revoked, resubscribed, none.")
    other = f.workspace(conn, "Other")["id"]
    assert replies.list_replies(conn, other)["replies"] == []


def test_no_price_for_the_country_means_no_confirmation_but_the_revocation_holds(
        conn: sqlite3.Connection, world: dict[str, Any]) -> None:
    from marketing_cli.services.account import rates

    rates.remove_rate(conn, "US")
    kept = f.sms_reply(conn, world["ws"], "STOP", US[0])
    assert (kept["action"], kept["contacts_changed"], kept["confirmation"]) == ("revoked", 1, None)
    assert sms_status(conn, US[0]) == "UNSUBSCRIBED" and outbox(conn) == []


def test_a_confirmation_goes_out_in_quiet_hours(conn: sqlite3.Connection, world: dict[str, Any], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    closed = tmp_path / "closed.csv"
    closed.write_text("region,days,hours,source\nUS,Mon-Sun,closed,test\n", encoding="utf-8")
    monkeypatch.setenv("MKT_SMS_QUIET_HOURS", str(closed))
    kept = f.sms_reply(conn, world["ws"], "STOP", US[0])
    assert kept["confirmation"]["status"] == "sent" and len(outbox(conn)) == 1


def test_the_claim_cancels_and_refunds_the_messages_of_contacts_who_revoked(conn: sqlite3.Connection,
                                                                            world: dict[str, Any]) -> None:
    ws = world["ws"]
    campaign = f.expanded_sms_campaign(conn, ws)
    charged = ledger.campaign_cost(conn, campaign["id"])
    f.sms_reply(conn, ws, "remove me", US[1])  # after the campaign's messages were written and charged
    assert handoff.hand_off(conn, campaign) is True
    rows = {r["phone"]: r for r in conn.execute("SELECT * FROM sms_messages WHERE campaign_id = ?", (campaign["id"],))}
    assert {n: rows[n]["status"] for n in US} == {US[0]: "sent", US[1]: "cancelled", US[2]: "sent"}
    assert rows[US[1]]["error_message"] == handoff.REVOKED and rows[US[1]]["handed_at"] is None
    assert ledger.campaign_cost(conn, campaign["id"]) == charged - ledger.from_units(rows[US[1]]["price_units"])
    assert sorted(to for to, text in outbox(conn) if "autumn sale" in text) == [US[0], US[2]]


def test_a_network_batch_stops_for_a_contact_who_revokes_while_it_is_handed_over(
        conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One batch of 40 messages to a slow Twilio stand-in, one request at a time: a STOP from the
    last number arrives while the batch is half way. Its message goes back in line untouched
    (RevocationWatch, within RECHECK_SECONDS), and the next claim cancels and refunds it."""
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    numbers = [f"+1415555{i:04d}" for i in range(40)]
    f.sms_contacts(conn, ws, numbers)
    monkeypatch.setenv("MKT_SMS_CONCURRENCY", "1")
    with f.TwilioStandIn(delay=0.02) as server:
        providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                               base_url=server.base_url)
        campaign = f.expanded_sms_campaign(conn, ws)
        last = conn.execute("SELECT phone FROM sms_messages WHERE campaign_id = ? ORDER BY id DESC LIMIT 1",
                            (campaign["id"],)).fetchone()[0]
        sender = connect(db_path)
        try:
            done = threading.Thread(target=lambda: handoff.hand_off(sender, campaign))
            done.start()
            while len(server.received) < 10:
                done.join(0.01)
            replies.receive(conn, ws, {"From": last, "Body": "Stop texting me"})  # (its confirmation waits)
            revoked_at = len(server.received)
            done.join(60)
        finally:
            sender.close()
        tos = [r["form"]["To"] for r in server.received]
        assert revoked_at < 30 and last not in tos and len(tos) == 39
    row = conn.execute("SELECT status, uncertain, error_message FROM sms_messages WHERE campaign_id = ? AND phone = ?",
                       (campaign["id"], last)).fetchone()
    assert (row["status"], row["uncertain"], row["error_message"]) == ("cancelled", None, handoff.REVOKED)
    refunds = [e for e in ledger.ledger_history(conn, ws, campaign_id=campaign["id"]) if e["kind"] == "refund"]
    assert len(refunds) == 1 and "1 messages to contacts who revoked consent" in refunds[0]["reason"]


def test_the_watch_reads_the_batch_at_most_every_recheck_interval(conn: sqlite3.Connection) -> None:
    from tests.engines import Recording

    recording = Recording(conn)
    now = [0.0]
    watch = handoff.RevocationWatch(recording, "no-such-token", threading.Lock(), clock=lambda: now[0])
    asked = []
    for moment in (0.1, 0.2, 0.25, 0.3, 0.45, 0.5, 0.9):
        now[0] = moment
        assert watch.stopped(1) is False
        asked.append(sum("sms_messages" in sql for sql, _ in recording.seen))
    assert asked == [0, 0, 1, 1, 1, 2, 3]  # read again at 0.25, 0.5 and 0.9: never more than one read per 0.25 s


def test_a_confirmation_that_cannot_be_handed_over_at_once_is_left_to_its_job(
        conn: sqlite3.Connection, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    ws = world["ws"]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the provider is down")

    monkeypatch.setattr(handoff, "hand_off", broken)
    kept = f.sms_reply(conn, ws, "STOP", US[0])
    assert kept["confirmation"]["status"] == "pending" and outbox(conn) == []
    monkeypatch.undo()
    assert jobs.run_due(conn)["failed"] == 0
    assert [to for to, _ in outbox(conn)] == [US[0]]
    message = conn.execute("SELECT handed_at, created_at FROM sms_messages WHERE id = ?",
                           (kept["confirmation"]["message_id"],)).fetchone()
    assert clock.parse_ts(message["handed_at"]) - clock.parse_ts(message["created_at"]) < timedelta(minutes=5)
    assert confirmation.JOB == "sms.confirmation"

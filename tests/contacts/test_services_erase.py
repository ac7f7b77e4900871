"""Erasing a contact (services/privacy/erase.py, hand_offs.py) and the personal-data export
(personal_data.py): what goes, what is dropped, what a sending worker still holds, what is kept."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from datetime import timedelta
from email import message_from_bytes
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.delivery.transport import OutboxTransport
from marketing_cli.services.email import preparation
from marketing_cli.services.email import stats as email_stats
from marketing_cli.services.privacy import erase, personal_data
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms import schedule as sms_schedule
from marketing_cli.storage.db import connect, transaction
from tests import factories as f

ANN, BOB = "ann@example.org", "bob@example.org"


def _error(call: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as caught:
        call()
    return caught.value.status, caught.value.message


def _recipients(folder: Path) -> list[str]:
    return sorted(message_from_bytes(p.read_bytes())["To"].strip("<>") for p in folder.glob("*.eml"))


def _outbox() -> Path:
    import os

    return Path(os.environ["MKT_OUTBOX"])


# --- the answer and its errors ---------------------------------------------------------------

def test_a_deleted_contact_is_gone_and_a_second_delete_is_not_found(conn: sqlite3.Connection,
                                                                     workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    ann = f.contact(conn, ws, ANN)
    used = billing.remaining(conn, ws, "contacts")
    assert erase.delete_contact(conn, ws, ann["id"]) == {"id": ann["id"], "deleted": True}
    assert billing.remaining(conn, ws, "contacts") == used + 1  # the allowance counts it no more
    assert _error(lambda: erase.delete_contact(conn, ws, ann["id"])) == (404, "Not found.")
    assert conn.execute("SELECT count(*) FROM suppressions").fetchone()[0] == 0  # no suppression asked
    f.contact(conn, ws, ANN)  # so the person may come back


def test_another_workspaces_contact_and_bad_input(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    other = f.workspace(conn, "Other")["id"]
    theirs = f.contact(conn, other, ANN)
    assert _error(lambda: erase.delete_contact(conn, workspace["id"], theirs["id"])) == (404, "Not found.")
    assert _error(lambda: erase.delete_contact(conn, workspace["id"], "nope")) == (
        400, "The contact ID you provided is not valid.")
    assert _error(lambda: erase.delete_contact(conn, other, theirs["id"], "maybe")) == (400, erase.SUPPRESS_INVALID)
    assert _error(lambda: erase.erase_person(conn, workspace["id"], ANN)) == (
        404, f"We couldn't find a contact with the email address {ANN}.")
    assert _error(lambda: erase.erase_person(conn, workspace["id"], " ")) == (
        400, "Please name the contact: its ID, email address or phone number.")
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 1


def test_erase_names_the_person_by_id_email_or_phone(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.field(conn, ws, "phone_number", label="Phone", default_region="FR")
    people = [f.contact(conn, ws, f"p{i}@example.org", phone_number=f"+3361234567{i}") for i in range(3)]
    assert erase.erase_person(conn, ws, people[0]["id"].upper())["id"] == people[0]["id"]
    assert erase.erase_person(conn, ws, "P1@Example.org")["id"] == people[1]["id"]
    assert erase.erase_person(conn, ws, "06 12 34 56 72")["id"] == people[2]["id"]  # the field's region
    assert conn.execute("SELECT count(*) FROM suppressions").fetchone()[0] == 6  # erase always suppresses


# --- messages: not yet handed over, in a worker's hands, abandoned --------------------------

def _sending_campaign(conn: sqlite3.Connection, ws: int) -> dict[str, Any]:
    """A campaign to Ann and Bob frozen into queued messages, its send job queued, nothing sent."""
    made = f.sendable_campaign(conn, ws, [ANN, BOB])
    with transaction(conn):
        conn.execute("UPDATE campaigns SET status = 'QUEUED' WHERE id = ?", (made["id"],))
    preparation.preprocess(conn, {"campaign_id": made["id"]})
    assert conn.execute("SELECT count(*) FROM email_messages WHERE status = 'queued'").fetchone()[0] == 2
    return made


def test_messages_not_yet_handed_over_are_dropped_and_never_sent(conn: sqlite3.Connection,
                                                                  workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    made = _sending_campaign(conn, ws)
    ann = conn.execute("SELECT contact_id, id FROM email_messages WHERE email = ?", (ANN,)).fetchone()
    erase.delete_contact(conn, ws, ann["contact_id"])
    row = conn.execute("SELECT status, email, contact_id FROM email_messages WHERE id = ?", (ann["id"],)).fetchone()
    assert tuple(row) == ("cancelled", "", None)
    assert jobs.run_due(conn)["failed"] == 0
    assert _recipients(_outbox()) == [BOB]
    counters = email_stats.campaign_counters(conn, made["id"])
    assert (counters["recipients"], counters["delivered"]) == (2, 1)
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (made["id"],)).fetchone()[0] == "SENT"


def test_a_message_a_worker_is_handing_over_is_answered_before_the_erase_returns(
        db_path: Any, conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The real sender, one message at a time: Ann's is in the transport's hands (held there) when
    the erase runs; the erase waits for the worker's answer, so nothing goes to Ann afterwards."""
    ws = workspace["id"]
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "1")
    made = _sending_campaign(conn, ws)
    ann_id = conn.execute("SELECT contact_id FROM email_messages WHERE email = ?", (ANN,)).fetchone()[0]
    in_hands, release, sent = threading.Event(), threading.Event(), {}
    real_send = OutboxTransport.send

    def held_send(self: OutboxTransport, message: Any, sender: str, recipients: list[str]) -> str:
        if recipients == [ANN]:
            in_hands.set()
            release.wait(30)
        sent[recipients[0]] = time.monotonic()
        return real_send(self, message, sender, recipients)

    monkeypatch.setattr(OutboxTransport, "send", held_send)
    outcome: dict[str, Any] = {}

    def work() -> None:
        with closing(connect(db_path)) as worker:
            outcome["jobs"] = jobs.run_due(worker)

    def wipe() -> None:
        with closing(connect(db_path)) as eraser:
            outcome["erase"] = erase.delete_contact(eraser, ws, ann_id)
            outcome["erased_at"] = time.monotonic()

    worker = threading.Thread(target=work)
    worker.start()
    assert in_hands.wait(30)
    eraser = threading.Thread(target=wipe)
    eraser.start()
    eraser.join(0.5)
    assert eraser.is_alive()  # waiting for the worker's answer about Ann's message
    release.set()
    eraser.join(30)
    worker.join(30)
    assert outcome["erase"] == {"id": ann_id, "deleted": True} and outcome["jobs"]["failed"] == 0
    assert sent[ANN] < outcome["erased_at"]  # handed over before the erase answered, nothing after
    assert _recipients(_outbox()) == [ANN, BOB]
    row = conn.execute("SELECT status, email FROM email_messages WHERE campaign_id = ? AND contact_id IS NULL",
                       (made["id"],)).fetchone()
    assert tuple(row) == ("delivered", "")  # recorded by its worker, stripped of the person
    assert email_stats.campaign_counters(conn, made["id"])["delivered"] == 2


def test_a_message_a_dead_worker_claimed_is_cancelled_and_its_reservation_given_back(
        conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    _sending_campaign(conn, ws)
    ann = conn.execute("SELECT id, contact_id FROM email_messages WHERE email = ?", (ANN,)).fetchone()
    hour = billing.period_of("hourly_emails")
    with transaction(conn):  # as a worker's claim does, before it died: reserved, claimed, expired
        assert billing.reserve(conn, ws, ("monthly_emails", "hourly_emails"), 1)[0] == 1
        conn.execute("UPDATE email_messages SET status = 'sending', claim_token = 'dead', claim_expires_at = ?,"
                     " reserved_hour = ? WHERE id = ?",
                     (clock.format_ts(clock.utcnow() - timedelta(seconds=5)), hour, ann["id"]))
    erase.delete_contact(conn, ws, ann["contact_id"])
    assert conn.execute("SELECT status, reserved_hour FROM email_messages WHERE id = ?",
                        (ann["id"],)).fetchone()[:] == ("cancelled", None)
    held = conn.execute("SELECT resource, held FROM usage_counters WHERE workspace_id = ? AND resource IN"
                        " ('monthly_emails', 'hourly_emails') ORDER BY resource", (ws,)).fetchall()
    assert [tuple(r) for r in held] == [("hourly_emails", 0), ("monthly_emails", 0)]


@pytest.fixture
def sms_ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    f.sms_contacts(conn, workspace["id"], ["+33612345601", "+33612345602"])
    return workspace["id"]


def _queued_sms(conn: sqlite3.Connection, ws: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An SMS campaign to both numbers, expanded and charged, every message held by quiet hours."""
    now = clock.utcnow() + timedelta(hours=11)  # France's texting window: one minute, hours away
    minute = min(now.minute, 58)  # (at minute 59 the window was 08:59-08:59: no window, a broken table)
    window = f"{now:%H}:{minute:02d}-{now:%H}:{minute + 1:02d}"
    table = tmp_path / "quiet.csv"
    table.write_text(f"region,days,hours,source\nFR,Mon-Sun,{window},a test\n", encoding="utf-8")
    monkeypatch.setenv("MKT_SMS_QUIET_HOURS", str(table))
    campaign = f.sms_campaign(conn, ws, message="Autumn sale today. Reply STOP to opt out.")
    sms_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    assert [r[0] for r in conn.execute("SELECT status FROM sms_messages")] == ["held", "held"]
    return campaign["id"]


def test_held_texts_are_dropped_and_refunded(conn: sqlite3.Connection, sms_ws: int, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cid = _queued_sms(conn, sms_ws, tmp_path, monkeypatch)
    charged = ledger.campaign_cost(conn, cid)
    first = conn.execute("SELECT id, contact_id, price_units FROM sms_messages ORDER BY id").fetchone()
    erase.erase_person(conn, sms_ws, "+33612345601")
    row = conn.execute("SELECT status, phone, contact_id FROM sms_messages WHERE id = ?", (first["id"],)).fetchone()
    assert tuple(row) == ("cancelled", "", f"erased-{first['id']}")
    assert ledger.campaign_cost(conn, cid) == charged - ledger.from_units(first["price_units"])
    refund = conn.execute("SELECT reason FROM sms_ledger WHERE kind = 'refund'").fetchone()[0]
    assert refund == "Campaign 'Autumn sale': 1 message(s) never handed to a provider: the recipient was erased"


def test_a_text_a_worker_holds_is_waited_for(db_path: Any, conn: sqlite3.Connection, sms_ws: int, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A network provider's batch is claimed (`sending`, its claim renewed) while the provider is
    called: the erase strips the row but answers only once the worker recorded the receipt."""
    _queued_sms(conn, sms_ws, tmp_path, monkeypatch)
    first = conn.execute("SELECT id, contact_id FROM sms_messages ORDER BY id").fetchone()
    with transaction(conn):
        conn.execute("UPDATE sms_messages SET status = 'sending', claim_token = 'live', claim_expires_at = ?"
                     " WHERE id = ?", (clock.format_ts(clock.utcnow() + timedelta(seconds=30)), first["id"]))
    done: dict[str, Any] = {}

    def wipe() -> None:
        with closing(connect(db_path)) as eraser:
            done["erase"] = erase.delete_contact(eraser, sms_ws, first["contact_id"])

    eraser = threading.Thread(target=wipe)
    eraser.start()
    eraser.join(0.5)
    assert eraser.is_alive()
    with transaction(conn):  # the worker's receipt (services/sms/handoff.py _record)
        conn.execute("UPDATE sms_messages SET status = 'sent', handed_at = ?, provider_ref = 'SM1'"
                     " WHERE id = ? AND status = 'sending' AND claim_token = 'live'", (clock.now(), first["id"]))
    eraser.join(10)
    assert not eraser.is_alive() and done["erase"]["deleted"]
    assert conn.execute("SELECT status, phone FROM sms_messages WHERE id = ?", (first["id"],)).fetchone()[:] == (
        "sent", "")


def test_a_text_waiting_its_turn_in_a_batch_being_posted_is_never_posted(
        db_path: Any, conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of 30 texts posted to Twilio one at a time (a stand-in answering in 50 ms): the
    person's text is the batch's last. The erase, mid-batch, strips it; the claim's next renewal
    (every second with a 3 s lease) tells the worker, which skips it; the erase answers after that
    renewal, and the person's number never reaches the provider."""
    from marketing_cli.services.sms import providers

    ws = workspace["id"]
    monkeypatch.setenv("MKT_SMS_CONCURRENCY", "1")
    f.sms_ready(conn, ws)
    phones = [f"+3361234{i:04d}" for i in range(30)]
    people = f.sms_contacts(conn, ws, phones)
    with f.TwilioStandIn(delay=0.05) as server:
        providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                               base_url=server.base_url + "/")
        campaign = f.sms_campaign(conn, ws, message="Autumn sale today. Reply STOP to opt out.")
        sms_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
        outcome: dict[str, Any] = {}

        def work() -> None:
            with closing(connect(db_path)) as worker:
                outcome["jobs"] = jobs.run_due(worker, lease_seconds=3)

        worker = threading.Thread(target=work)
        worker.start()
        deadline = time.monotonic() + 30
        while len(server.received) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        assert erase.erase_person(conn, ws, phones[-1])["id"] == people[-1]["id"]
        waited = time.monotonic() - started
        posted_then = len(server.received)
        worker.join(60)
    assert outcome["jobs"]["failed"] == 0 and 3 <= posted_then < 30 and waited < 10
    assert phones[-1] not in [r["form"]["To"] for r in server.received]
    assert sorted(r["form"]["To"] for r in server.received) == phones[:-1]
    statuses = dict(conn.execute("SELECT phone, status FROM sms_messages WHERE campaign_id = ?", (campaign["id"],)))
    assert statuses.pop("") == "cancelled" and set(statuses.values()) == {"sent"}


# --- the personal-data export ---------------------------------------------------------------

def test_the_export_holds_everything_about_the_person(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    world = f.person_with_everything(conn, ws)
    by_id = personal_data.export_person(conn, ws, world["person"])
    assert personal_data.export_person(conn, ws, f.PERSON_EMAIL.upper())["contact"] == by_id["contact"]
    assert personal_data.export_person(conn, ws, f.PERSON_PHONE)["contact"]["id"] == world["person"]
    assert (by_id["format"], by_id["version"], by_id["contact"]["id"]) == ("mkt.personal-data", 1, world["person"])
    assert by_id["contact"]["data"]["city"] == f"{f.PERSON_VALUE} Nord" and by_id["contact"]["tags"][0]["name"] == "vip"
    assert [e["type"] for e in by_id["events"]] == ["CONTACT_SUBSCRIBED_PENDING", "FIELD_UPDATED", "CUSTOM_EVENT",
                                                    "CONTACT_UNSUBSCRIBED"]  # the SMS reply's revocation
    assert by_id["events"][2]["payload"]["properties"]["ship_to"].startswith(f.PERSON_VALUE)  # decoded JSON
    assert sorted(m["status"] for m in by_id["email_messages"]) == ["delivered", "failed"]
    opened = [m for m in by_id["email_messages"] if m["status"] == "delivered"][0]
    assert opened["opened_at"] and opened["clicked_at"] and opened["email"] == f.PERSON_EMAIL
    clicks = [(k["url"], k["device_type"]) for k in by_id["email_clicks"]]
    assert clicks == [("https://shop.example.org/sale", "mobile")]
    assert f.PERSON_VALUE in by_id["sms_messages"][0]["body"] and by_id["sms_messages"][0]["phone"] == f.PERSON_PHONE
    assert len(by_id["sms_messages"]) == 2  # the campaign's text and the confirmation of the revocation
    assert by_id["sms_clicks"][0]["url"].startswith(f"https://shop.example.org/?c={f.PERSON_VALUE}")
    assert [e["status"] for e in by_id["automation_enrollments"]] == ["active"]
    assert [r["step_id"] for r in by_id["automation_step_runs"]] == ["hook", "pause"]
    assert by_id["automation_webhooks"][0]["body"]["contact"]["email_address"] == f.PERSON_EMAIL
    assert [t["recipient"] for t in by_id["test_emails"]] == [f.PERSON_EMAIL]
    assert by_id["suppressions"] == []
    assert [(c["channel"], c["consent"], c["source"]) for c in by_id["consents"]][-1] == ("sms", "revoked",
                                                                                          "sms_keyword")
    assert [(r["action"], r["body"]) for r in by_id["sms_replies"]] == [
        ("revoked", f"Stop texting me, {f.PERSON_VALUE} is far")]
    assert _error(lambda: personal_data.export_person(conn, ws, "nobody@example.org")) == (
        404, "We couldn't find a contact with the email address nobody@example.org.")


def test_the_consent_ledger_is_exported_and_goes_with_the_erase(conn: sqlite3.Connection,
                                                                 workspace: dict[str, Any]) -> None:
    """The ledger's rows (never changed otherwise) are in the export and go with the erase."""
    from marketing_cli.services.contacts import records

    ws = workspace["id"]
    ann = records.create_contact(conn, ws, {"fields": {"email_address": ANN}, "status": "SUBSCRIBED",
                                            "consent_text": "Yes, send me news"})
    exported = personal_data.export_person(conn, ws, ann["id"])
    assert [(c["channel"], c["consent"], c["consent_text"]) for c in exported["consents"]] == [
        ("email", "given", "Yes, send me news")]
    erase.delete_contact(conn, ws, ann["id"])
    assert conn.execute("SELECT count(*) FROM contact_consents WHERE contact_id = ?", (ann["id"],)).fetchone()[0] == 0

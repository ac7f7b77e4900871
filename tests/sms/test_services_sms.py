"""SMS services: ledger, sender ID, quote, expansion (charges, suppression, rendering,
crash safety), cancel with refunds, statistics."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns, handoff, pricing, recipients, schedule, stats
from marketing_cli.services.sms import ledger as sms_ledger
from marketing_cli.storage.db import transaction
from tests import factories as f
from tests.engines import Recording, reads_by_key

US = ["+14155550101", "+14155550102", "+14155550103"]
GB = ["+447400123456"]
IN = ["+919876543210"]  # enabled, but no rate published: suppressed


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    return workspace["id"]


def ledger_sum(conn: sqlite3.Connection, campaign_id: str) -> Decimal:
    return sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ?",
                                                     (campaign_id,))), Decimal(0))


def message_sum(conn: sqlite3.Connection, campaign_id: str, statuses: tuple[str, ...] = ("sent",)) -> Decimal:
    marks = ", ".join("?" * len(statuses))
    units = conn.execute(f"SELECT COALESCE(SUM(price_units), 0) FROM sms_messages WHERE campaign_id = ?"
                         f" AND status IN ({marks})", (campaign_id, *statuses)).fetchone()[0]
    return Decimal(units).scaleb(-5)


# --- ledger and sender ID ---------------------------------------------------------------

def test_a_new_workspace_has_a_zero_balance(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    assert sms_ledger.show_balance(conn, workspace["id"]) == {"balance": "0.00"}


def test_top_ups_add_up_and_history_shows_the_balance_after_each(conn: sqlite3.Connection, ws: int) -> None:
    assert sms_ledger.add_balance(conn, ws, "0.10") == {"balance": "50.10"}
    assert sms_ledger.add_balance(conn, ws, "$0.20", "wire 42") == {"balance": "50.30"}
    history = sms_ledger.ledger_history(conn, ws)
    assert [(h["amount"], h["balance_after"], h["reason"]) for h in history] == [
        ("0.20", "50.30", "wire 42"), ("0.10", "50.10", "Top-up by the operator"),
        ("50.00", "50.00", "Top-up by the operator")]


@pytest.mark.parametrize("amount", ["0", "-5", "abc", "1.234", "NaN", "1e9", ""])
def test_a_bad_top_up_is_refused_and_writes_nothing(conn: sqlite3.Connection, ws: int, amount: str) -> None:
    with pytest.raises(MktError) as err:
        sms_ledger.add_balance(conn, ws, amount)
    assert err.value.status == 400 and "is not an amount" in err.value.message
    assert sms_ledger.show_balance(conn, ws) == {"balance": "50.00"}


def test_the_ledger_is_append_only(conn: sqlite3.Connection, ws: int) -> None:
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE sms_ledger SET amount = '1000'")


@pytest.mark.parametrize(("value", "stored"), [("ACME", "ACME"), ("Shop 24", "Shop 24"), ("+1 415 555 0100", "+14155550100")])
def test_sender_ids(conn: sqlite3.Connection, ws: int, value: str, stored: str) -> None:
    assert sms_ledger.set_sender_id(conn, ws, value) == {"sms_sender_id": stored}
    assert sms_ledger.get_sender_id(conn, ws) == {"sms_sender_id": stored}


@pytest.mark.parametrize("value", ["", "TWELVE CHARS", "12345", "ACME!", "+1234"])
def test_bad_sender_ids_are_refused(conn: sqlite3.Connection, ws: int, value: str) -> None:
    with pytest.raises(MktError) as err:
        sms_ledger.set_sender_id(conn, ws, value)
    assert err.value.status == 400
    assert sms_ledger.get_sender_id(conn, ws) == {"sms_sender_id": "ACME"}


def test_the_scheduling_minimum_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sms_ledger.scheduling_minimum() == Decimal("5.00")
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "12.5")
    assert sms_ledger.scheduling_minimum() == Decimal("12.5")
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "0")
    with pytest.raises(MktError):
        sms_ledger.scheduling_minimum()


# --- quote ------------------------------------------------------------------------------

def test_quote_prices_segments_at_the_workspace_price(conn: sqlite3.Connection, ws: int) -> None:
    from marketing_cli.services.account import workspaces

    workspaces.update_operator_settings(conn, ws, sms_markup="1.5")
    quote = schedule.quote_message(conn, ws, {"message": "x" * 161, "to": "+447400123456"})
    assert quote["encoding"] == "GSM-7" and quote["segments"] == 2 and quote["country"] == "GB"
    assert quote["price_per_segment"] == "0.06000" and quote["price"] == "0.12000" and quote["sendable"] is True


def test_quote_says_when_a_country_cannot_be_sent_to(conn: sqlite3.Connection, ws: int) -> None:
    quote = schedule.quote_message(conn, ws, {"message": "Hi", "to": IN[0]})
    assert quote["sendable"] is False and quote["price"] is None and "cannot be sent to IN" in quote["note"]


def test_quote_errors(conn: sqlite3.Connection, ws: int) -> None:
    for body, message in [({}, campaigns.QUOTE_MESSAGE_REQUIRED), ({"message": ""}, campaigns.QUOTE_MESSAGE_REQUIRED),
                          ({"message": "Hi", "to": "12345"}, "'12345' is not a valid phone number in E.164 form "
                                                             "(+14155550100)."),
                          ({"message": 5}, "The member 'message' must be a string."), ([], campaigns.INVALID_BODY)]:
        with pytest.raises(MktError) as err:
            schedule.quote_message(conn, ws, body)
        assert (err.value.status, err.value.message) == (400, message)


# --- expansion --------------------------------------------------------------------------

def schedule_now(conn: sqlite3.Connection, ws: int, campaign: dict[str, Any]) -> None:
    assert schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})["status"] == "QUEUED"


def test_expansion_charges_each_recipient_its_country_price_and_suppresses_unpriced(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    f.sms_contacts(conn, ws, US + GB + IN, first_name="Ann")
    f.contact(conn, ws, "nophone@example.com", first_name="Bo")  # no number: not a recipient
    f.sms_contacts(conn, ws, ["+14155550199"], first_name="Out")
    conn.execute("UPDATE contacts SET sms_status = 'UNSUBSCRIBED' WHERE phone = '+14155550199'")
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    view = campaigns.get_campaign(conn, ws, campaign["id"])
    assert view["status"] == "COMPLETED"
    assert view["statistics"] == {"sent": 4, "delivered": 0, "clicked": 0, "failed": 0, "unsubscribed": 0,
                                  "suppressed": 1}
    rows = {r["phone"]: r for r in conn.execute("SELECT * FROM sms_messages WHERE campaign_id = ?", (campaign["id"],))}
    assert set(rows) == set(US + GB + IN)
    assert rows[US[0]]["price_units"] == 830 and rows[GB[0]]["price_units"] == 4000
    assert rows[IN[0]]["status"] == "suppressed" and rows[IN[0]]["price_units"] == 0
    cost = Decimal("0.00830") * 3 + Decimal("0.04000")
    assert -ledger_sum(conn, campaign["id"]) == cost == message_sum(conn, campaign["id"])
    figures = stats.campaign_statistics(conn, ws, campaign["id"])
    assert Decimal(figures["total_cost"]) == cost
    assert Decimal(sms_ledger.show_balance(conn, ws)["balance"]) == Decimal(50) - cost
    outbox = conn.execute("SELECT recipient, sender, body FROM sms_outbox ORDER BY recipient").fetchall()
    assert [tuple(r) for r in outbox][-1] == (
        GB[0], "ACME", "Hi Ann, our autumn sale starts today. Reply STOP to opt out.")
    assert len(outbox) == 4


def test_merge_tags_render_per_recipient_and_segments_follow(conn: sqlite3.Connection, ws: int) -> None:
    f.sms_contacts(conn, ws, [US[0]], first_name="Al")
    f.sms_contacts(conn, ws, [US[1]], first_name="Zoë")  # not GSM-7: UCS-2 for this recipient
    f.sms_contacts(conn, ws, [US[2]], first_name="B" * 150)  # two segments
    campaign = f.sms_campaign(conn, ws, message="Hi {{contact.first_name}}, sale today. Reply STOP to opt out.")
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    rows = {r["phone"]: r for r in conn.execute("SELECT * FROM sms_messages")}
    assert (rows[US[0]]["encoding"], rows[US[0]]["segments"], rows[US[0]]["price_units"]) == ("GSM-7", 1, 830)
    assert (rows[US[1]]["encoding"], rows[US[1]]["segments"]) == ("UCS-2", 1)
    assert (rows[US[2]]["segments"], rows[US[2]]["price_units"]) == (2, 1660)
    assert rows[US[1]]["body"] == "Hi Zoë, sale today. Reply STOP to opt out."
    assert -ledger_sum(conn, campaign["id"]) == Decimal("0.03320")


def test_a_message_without_merge_tags_is_stored_once(conn: sqlite3.Connection, ws: int) -> None:
    f.sms_contacts(conn, ws, US)
    campaign = f.sms_campaign(conn, ws, message="Sale today. Reply STOP to opt out.")
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    assert {r[0] for r in conn.execute("SELECT body FROM sms_messages")} == {None}
    assert {r[0] for r in conn.execute("SELECT body FROM sms_outbox")} == {"Sale today. Reply STOP to opt out."}


def test_a_later_campaign_waits_until_it_is_due(conn: sqlite3.Connection, ws: int) -> None:
    f.sms_contacts(conn, ws, US)
    campaign = f.sms_campaign(conn, ws)
    when = clock.format_ts(clock.utcnow().replace(microsecond=0) + __import__("datetime").timedelta(hours=1))
    result = schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "LATER", "scheduled_at": when})
    assert result == {"id": campaign["id"], "status": "QUEUED", "scheduled_at": when}
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}
    assert campaigns.get_campaign(conn, ws, campaign["id"])["status"] == "QUEUED"
    conn.execute("UPDATE jobs SET run_at = ?", (clock.now(),))
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert campaigns.get_campaign(conn, ws, campaign["id"])["status"] == "COMPLETED"


def _expansion_killed_after_two_batches(conn: sqlite3.Connection, ws: int,
                                        monkeypatch: pytest.MonkeyPatch) -> tuple[dict, Any]:
    """Seven recipients in batches of two, the job killed at its second heartbeat (two batches
    written): (the campaign, the real heartbeat, for the test to put back)."""
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(1, 8)])
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    calls = {"n": 0}
    real = jobs.heartbeat

    def dying_heartbeat(c: sqlite3.Connection) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("worker killed")
        real(c)

    monkeypatch.setattr(jobs, "heartbeat", dying_heartbeat)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    assert conn.execute("SELECT COUNT(*) FROM sms_messages").fetchone()[0] == 4  # two batches written
    return campaign, real


def test_a_crashed_expansion_resumes_without_charging_anyone_twice(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign, real = _expansion_killed_after_two_batches(conn, ws, monkeypatch)
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # off only inside a batch
    conn.execute("UPDATE jobs SET run_at = ?", (clock.now(),))
    monkeypatch.setattr(jobs, "heartbeat", real)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT contact_id) FROM sms_messages").fetchone()[:] == (7, 7)
    assert conn.execute("SELECT COUNT(*) FROM sms_outbox").fetchone()[0] == 7
    assert -ledger_sum(conn, campaign["id"]) == message_sum(conn, campaign["id"]) == Decimal("0.00830") * 7


@pytest.mark.postgresql_only  # SQLite writes each batch with ON CONFLICT DO NOTHING only
def test_a_batch_whose_plain_insert_meets_written_rows_runs_again_with_on_conflict(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL tries each batch's INSERT without ON CONFLICT first (its NOT EXISTS leaves out the
    rows written before). Should that insert still meet a written row (here: its NOT EXISTS taken
    out), the batch runs again from a savepoint with ON CONFLICT DO NOTHING: nobody is written or
    charged twice, and the rest of the batch's transaction stands."""
    campaign, real = _expansion_killed_after_two_batches(conn, ws, monkeypatch)
    statement = recipients._batch_statement
    careless = []

    def without_not_exists(*args: Any, **kwargs: Any) -> str:
        sql = statement(*args, **kwargs)
        if args[4] == recipients.NOT_EXISTS:  # (the resumed run's form)
            careless.append(sql)
            sql = sql.replace(" AND NOT EXISTS (SELECT 1 FROM sms_messages w WHERE w.campaign_id = :cid"
                              " AND w.contact_id = c.id)", "")
            assert "NOT EXISTS" not in sql and "ON CONFLICT" not in sql
        return sql

    monkeypatch.setattr(recipients, "_batch_statement", without_not_exists)
    conn.execute("UPDATE jobs SET run_at = ?", (clock.now(),))
    monkeypatch.setattr(jobs, "heartbeat", real)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert careless  # the plain form was used
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT contact_id) FROM sms_messages").fetchone()[:] == (7, 7)
    assert -ledger_sum(conn, campaign["id"]) == message_sum(conn, campaign["id"]) == Decimal("0.00830") * 7


@pytest.mark.postgresql_only  # SQLite turns its foreign keys off per batch (PRAGMA foreign_keys)
def test_sms_messages_has_no_insert_trigger_that_a_batch_would_skip(conn: sqlite3.Connection) -> None:
    """A PostgreSQL batch writes with session_replication_role = replica (recipients'
    _rows_of_one_campaign), which skips every ordinary trigger of the statement, not only the
    foreign key check of campaign_id that the batch's lock of the campaign row replaces. A
    trigger added on INSERT to sms_messages would be skipped there: it must be made ALWAYS, or
    the batch changed."""
    rows = conn.execute("SELECT t.tgisinternal, p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
                        " WHERE t.tgrelid = 'sms_messages'::regclass AND t.tgtype & 4 = 4"  # 4: on INSERT
                        " AND t.tgenabled <> 'A'").fetchall()
    assert sorted(tuple(r) for r in rows) == [(1, "RI_FKey_check_ins")]  # the campaign_id check only


@pytest.mark.postgresql_only
@pytest.mark.parametrize("may_skip", [True, False])
def test_a_role_without_the_setting_keeps_the_per_row_check_and_the_same_rows(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch, may_skip: bool) -> None:
    """With or without the right to set session_replication_role, the expansion writes the same
    rows and charges; with it, the batch's triggers are off only for its one statement and the
    campaign row is locked instead; the foreign key stands afterwards (a message of a missing
    campaign is refused)."""
    from marketing_cli.storage import dialect

    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    monkeypatch.setattr(dialect, "sms_may_skip_row_triggers", lambda c: may_skip)
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(1, 6)])
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    conn.set_trace_callback(None)
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT contact_id) FROM sms_messages").fetchone()[:] == (5, 5)
    assert -ledger_sum(conn, campaign["id"]) == message_sum(conn, campaign["id"]) == Decimal("0.00830") * 5
    replica = [s for s in seen if "session_replication_role" in s]
    assert len(replica) == (6 if may_skip else 0)  # on and back to DEFAULT around each of three batches
    assert any("FOR KEY SHARE" in s for s in seen)
    assert conn.execute("SHOW session_replication_role").fetchone()[0] == "origin"
    with pytest.raises(sqlite3.IntegrityError):
        with transaction(conn):
            conn.execute("INSERT INTO sms_messages (campaign_id, contact_id, batch, phone, encoding, segments, status,"
                         " created_at) VALUES ('no such campaign', 'x', 1, '+14155550100', 'GSM-7', 1, 'pending', ?)",
                         (clock.now(),))


def test_contacts_changed_during_the_expansion_are_taken_as_they_now_are(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audience is frozen at the start; a later batch reads each contact again: one deleted or
    STOPped since is skipped (not charged), one whose number moved abroad is priced there."""
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    contacts = f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(1, 7)])
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    real, calls = jobs.heartbeat, {"n": 0}

    def change_after_the_first_batch(c: sqlite3.Connection) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            c.execute("DELETE FROM contacts WHERE id = ?", (contacts[3]["id"],))
            c.execute("UPDATE contacts SET sms_status = 'UNSUBSCRIBED' WHERE id = ?", (contacts[4]["id"],))
            c.execute("UPDATE contacts SET phone = ? WHERE id = ?", (GB[0], contacts[5]["id"]))
        real(c)

    monkeypatch.setattr(jobs, "heartbeat", change_after_the_first_batch)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    rows = {r["contact_id"]: r for r in conn.execute("SELECT * FROM sms_messages")}
    assert set(rows) == {contacts[i]["id"] for i in (0, 1, 2, 5)}
    moved = rows[contacts[5]["id"]]
    assert (moved["phone"], moved["country"], moved["price_units"]) == (GB[0], "GB", 4000)
    assert -ledger_sum(conn, campaign["id"]) == message_sum(conn, campaign["id"]) == Decimal("0.00830") * 3 + \
        Decimal("0.04000")


def test_a_prefix_whose_first_number_does_not_parse_still_prices_the_others(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Countries are resolved once per prefix from one example number; when that example is not a
    valid number (a row older than input validation), the prefix's other numbers are still priced.
    (The invalid one takes its prefix's country once a valid number taught it: prefixes decide.)"""
    contacts = f.sms_contacts(conn, ws, US[:2])
    conn.execute("UPDATE contacts SET phone = '+14150000000' WHERE id = ?", (contacts[0]["id"],))  # not valid
    campaign = f.sms_campaign(conn, ws)
    monkeypatch.setattr(pricing, "_PREFIXES", {})  # nothing learnt yet: the example number is parsed
    cost, recipients = schedule.estimate_cost(conn, ws, campaign["message"], campaign["audience"])
    # the invalid number has no price in this pass: not counted, as the reach and the estimate do not
    assert recipients == 1 and cost >= Decimal("0.0083")
    monkeypatch.setattr(pricing, "_PREFIXES", {})
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    rows = {r["phone"]: r for r in conn.execute("SELECT * FROM sms_messages")}
    assert (rows[US[1]]["country"], rows[US[1]]["price_units"]) == ("US", 830)


def test_the_prefix_key_is_the_same_in_python_and_in_sql(conn: sqlite3.Connection) -> None:
    """The seeks find keys with phone_key and the batches join on PHONE_KEY: were they to differ,
    every number would silently fall back to a Python call (prices right, speed gone)."""
    for number in [*US, *GB, *IN, "+1", "+12", "+3", "", "123", "+9198765432101", "+1é2345"]:
        assert conn.execute(f"SELECT {pricing.PHONE_KEY.format(number='?1')}", (number,)).fetchone()[0] \
            == pricing.phone_key(number), number


@pytest.mark.parametrize("seeks", [1, 1_000])
def test_prices_follow_each_number_whether_prefixes_are_sought_or_scanned(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch, seeks: int) -> None:
    """Distinct prefixes come from seeks on the phone index, or (past the budget) one pass over the
    audience: both price every number by its own country."""
    monkeypatch.setattr(pricing, "KEY_SEEKS", seeks)
    monkeypatch.setattr(pricing, "_PREFIXES", {})
    guernsey = "+447911123456"  # +44 like GB, told apart by its prefix; no price published
    f.sms_contacts(conn, ws, [*US, "+12125550147", *GB, "+447912345678", guernsey, *IN])
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    rows = {r["phone"]: (r["country"], r["price_units"], r["status"]) for r in conn.execute("SELECT * FROM sms_messages")}
    assert rows == {**{p: ("US", 830, "sent") for p in [*US, "+12125550147"]},
                    **{p: ("GB", 4000, "sent") for p in [*GB, "+447912345678"]},
                    guernsey: ("GG", 0, "suppressed"), IN[0]: ("IN", 0, "suppressed")}


def test_a_batchs_fencing_reads_its_ids_through_an_index(conn: sqlite3.Connection, ws: int) -> None:
    """The SMS twin of the email round's fencing read (tests/delivery/test_send_query_plans.py):
    the claimed ids still ours, and only those, read through an index (the claimed rows' or
    the key), never a scan of every message. (The json_each form it replaced read the same
    index here, with a JSON decode per id: this guards the plan, it does not tell the forms apart.)"""
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(1, 21)])
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (campaign["id"],)).fetchone()
    assert recipients.expand_recipients(conn, row) is True
    claim = jobs.current_run()
    with transaction(conn):
        assert handoff._claim_batch(conn, campaign["id"], " ORDER BY id LIMIT :size", 5, claim) == 5
    ids = [r[0] for r in conn.execute("SELECT id FROM sms_messages WHERE claim_token = ? ORDER BY id", (claim.token,))]
    recording = Recording(conn)
    with transaction(conn):
        assert handoff._owned(recording, claim.token, [*ids, ids[-1] + 1_000]) == set(ids)
    assert handoff._owned(conn, claim.token, []) == set()
    (sql, params), = [seen for seen in recording.seen if "WHERE id IN (" in seen[0]]
    reads_by_key(conn, sql, params, "sms_messages")


def test_cancel_refunds_every_message_never_handed_over(conn: sqlite3.Connection, ws: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(1, 6)])
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (campaign["id"],)).fetchone()
    assert recipients.expand_recipients(conn, row) is True  # charged, not handed over yet
    conn.execute("UPDATE sms_messages SET status = 'sent', handed_at = ? WHERE id IN "
                 "(SELECT id FROM sms_messages ORDER BY id LIMIT 2)", (clock.now(),))  # two reached the carrier
    result = campaigns.cancel_campaign(conn, ws, campaign["id"])
    assert result == {"id": campaign["id"], "status": "CANCELLED", "refunded": "0.0249", "refunded_messages": 3}
    assert stats.campaign_statistics(conn, ws, campaign["id"])["total_cost"] == "0.0166"
    assert -ledger_sum(conn, campaign["id"]) == message_sum(conn, campaign["id"]) == Decimal("0.0166")
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}  # the queued job went with the cancel
    assert campaigns.get_campaign(conn, ws, campaign["id"])["status"] == "CANCELLED"
    with pytest.raises(MktError) as err:
        campaigns.cancel_campaign(conn, ws, campaign["id"])
    assert err.value.message == campaigns.ONLY_QUEUED_CANCEL


def test_a_cancel_during_expansion_stops_it_at_the_next_batch(conn: sqlite3.Connection, ws: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(1, 8)])
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    real = jobs.heartbeat
    done = {"n": 0}

    def cancel_after_first(c: sqlite3.Connection) -> None:
        done["n"] += 1
        if done["n"] == 1:
            campaigns.cancel_campaign(c, ws, campaign["id"])
        real(c)

    monkeypatch.setattr(jobs, "heartbeat", cancel_after_first)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert conn.execute("SELECT COUNT(*) FROM sms_messages").fetchone()[0] == 2
    assert ledger_sum(conn, campaign["id"]) == 0
    assert stats.campaign_statistics(conn, ws, campaign["id"])["total_cost"] == "0.00"


# --- statistics -------------------------------------------------------------------------

def test_statistics_count_each_recipients_first_click(conn: sqlite3.Connection, ws: int) -> None:
    f.sms_contacts(conn, ws, US)
    campaign = f.sms_campaign(conn, ws)
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    ids = [r[0] for r in conn.execute("SELECT id FROM sms_messages ORDER BY id")]
    clicks = [(ids[0], "https://a.example", "US", "mobile", "iOS"), (ids[0], "https://a.example", "FR", "desktop", "Windows"),
              (ids[0], "https://b.example", "FR", "desktop", "Windows"), (ids[1], "https://a.example", "FR", "mobile", "Android")]
    conn.executemany("INSERT INTO sms_clicks (message_id, url, country, device_type, operating_system, clicked_at)"
                     " VALUES (?, ?, ?, ?, ?, '2026-01-01T00:00:00.000Z')", clicks)
    conn.execute("UPDATE sms_messages SET status = 'delivered' WHERE id = ?", (ids[0],))
    conn.execute("UPDATE sms_messages SET status = 'failed' WHERE id = ?", (ids[2],))
    figures = stats.campaign_statistics(conn, ws, campaign["id"])
    assert figures["aggregate"] == {"sent": 3, "delivered": 1, "clicked": 2, "failed": 1, "unsubscribed": 0,
                                  "suppressed": 0}
    assert figures["clicks_by_country"] == [{"country": "FR", "click_count": 1}, {"country": "US", "click_count": 1}]
    assert figures["clicks_by_device_type"] == [{"device_type": "mobile", "click_count": 2}]
    assert figures["clicks_by_os"] == [{"operating_system": "Android", "click_count": 1},
                                     {"operating_system": "iOS", "click_count": 1}]
    assert figures["link_activity"] == [{"url": "https://a.example", "total_clicks": 3, "unique_clicks": 2},
                                      {"url": "https://b.example", "total_clicks": 1, "unique_clicks": 1}]
    assert figures["total_cost"] == "0.0249"


def test_a_network_provider_gets_batches_and_its_refusals_are_recorded(
        conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.sms import providers as sms_providers

    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    f.sms_contacts(conn, ws, US)
    sent: list[list[str]] = []

    class FakeCarrier:
        name = "fake"
        in_database = False

        def send(self, c: sqlite3.Connection, workspace_id: int,
                 messages: list[sms_providers.Outgoing]) -> list[sms_providers.Receipt]:
            assert not c.in_transaction  # called between two transactions
            sent.append([m.to for m in messages])
            return [sms_providers.Receipt(m.message_id, m.to != US[1], f"SM{m.message_id}") for m in messages]

    monkeypatch.setattr(sms_providers, "get_provider", lambda c, w: FakeCarrier())
    campaign = f.sms_campaign(conn, ws, message="Sale today. Reply STOP to opt out.")
    schedule_now(conn, ws, campaign)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert [len(batch) for batch in sent] == [2, 1] and sorted(sum(sent, [])) == US
    rows = {r["phone"]: r for r in conn.execute("SELECT * FROM sms_messages")}
    assert rows[US[0]]["status"] == "sent" and rows[US[0]]["provider"] == "fake"
    assert rows[US[0]]["provider_ref"] == f"SM{rows[US[0]]['id']}"
    assert rows[US[1]]["status"] == "failed"
    assert campaigns.get_campaign(conn, ws, campaign["id"])["statistics"] == {
        "sent": 2, "delivered": 0, "clicked": 0, "failed": 1, "unsubscribed": 0, "suppressed": 0}
    assert stats.campaign_statistics(conn, ws, campaign["id"])["total_cost"] == "0.0166"  # the refusal is refunded
    assert -ledger_sum(conn, campaign["id"]) == message_sum(conn, campaign["id"])


def test_fields_sql_cannot_render_fall_back_to_python_and_defaults_apply(conn: sqlite3.Connection, ws: int) -> None:
    f.field(conn, ws, "vip", "BOOLEAN")
    f.field(conn, ws, "city", "TEXT", default_value="your city")
    f.sms_contacts(conn, ws, [US[0]], vip=True, city="Lyon")
    f.sms_contacts(conn, ws, [US[1]], vip=False)
    campaign = f.sms_campaign(conn, ws, message="VIP {{contact.vip}} in {{contact.city}}. Reply STOP to opt out.")
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    bodies = {r["phone"]: r["body"] for r in conn.execute("SELECT phone, body FROM sms_messages")}
    assert bodies == {US[0]: "VIP true in Lyon. Reply STOP to opt out.",
                      US[1]: "VIP false in your city. Reply STOP to opt out."}
    campaign = f.sms_campaign(conn, ws, "Second", message="In {{contact.city}}. Reply STOP to opt out.")
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    bodies = {r["phone"]: r["body"] for r in conn.execute("SELECT phone, body FROM sms_messages WHERE campaign_id = ?",
                                                         (campaign["id"],))}
    assert bodies == {US[0]: "In Lyon. Reply STOP to opt out.", US[1]: "In your city. Reply STOP to opt out."}


@pytest.mark.parametrize("message", [
    "Hi {{contact.first_name}}, see you. Reply STOP to opt out.",
    "{{contact.first_name}}{{contact.city}}",  # two tags, no written text; the city has a default
    "Bonjour {{contact.first_name}}, à bientôt. STOP au 36180",  # written text outside the SQL fast path
    "{{contact.email_address}} / {{contact.first_name}} [{{contact.city}}]",  # an extension character written
    "X" * 155 + "{{contact.first_name}}",  # around the single-segment boundary
])
def test_every_rendered_message_is_measured_like_the_segment_counter(conn: sqlite3.Connection, ws: int,
                                                                     message: str) -> None:
    from marketing_cli.services.sms.segments import count_segments

    f.field(conn, ws, "city", "TEXT", default_value="Zürich")

    names = ["Al", "B" * 120, "C" * 121, "D" * 274, "E" * 275, "Zoë", "F`g", "H[i]", "J\nK", "L\r\nM", "€" * 60,
             "😀" * 40, "a" * 50 + "😀" + "b" * 40, "Ω" * 10, "Chloé", "é" * 150, "a-b", "x]y", "^", "ê",
             "\x1b", "¤£¥§¿¡ÄÖÑÜäöñüà", "ÅåΔΦΓΛΩΠΨΣΘΞÆæßÉ" * 9]
    names += ["n" * k for k in range(0, 330, 3)] + ["n" * k for k in range(100, 140)]  # every boundary crossed
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(len(names))])
    first_name = str(conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'first_name'",
                                  (ws,)).fetchone()[0])
    for i, name in enumerate(names):
        phone = f"+1415555{i:04d}"
        data = json.loads(conn.execute("SELECT data FROM contacts WHERE phone = ?", (phone,)).fetchone()[0])
        conn.execute("UPDATE contacts SET data = ? WHERE phone = ?", (json.dumps({**data, first_name: name}), phone))
    campaign = f.sms_campaign(conn, ws, message=message)
    schedule_now(conn, ws, campaign)
    jobs.run_due(conn)
    rows = conn.execute("SELECT body, encoding, segments, price_units FROM sms_messages").fetchall()
    assert len(rows) == len(names)
    for row in rows:
        expected = count_segments(row["body"])
        assert (row["encoding"], row["segments"]) == (expected.encoding, expected.segments), row["body"]
        assert row["price_units"] == 830 * expected.segments

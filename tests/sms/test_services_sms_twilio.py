"""The Twilio provider against a local stand-in for Twilio's Messages API: what is sent, the sid kept,
4xx failures refunded with Twilio's code and message, 429/5xx retried, the token never shown."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.services.sms import campaigns, schedule, stats
from marketing_cli.services.sms import ledger as sms_ledger
from marketing_cli.services.sms import providers as sms_providers
from tests import factories as f

US = ["+14155550101", "+14155550102", "+14155550103"]


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sms_providers, "BACKOFF_SECONDS", 0.01)
    f.sms_ready(conn, workspace["id"])
    return workspace["id"]


def use_twilio(conn: sqlite3.Connection, ws: int, server: f.TwilioStandIn) -> dict[str, Any]:
    return sms_providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                                      base_url=server.base_url + "/")


def send(conn: sqlite3.Connection, ws: int, phones: list[str]) -> dict[str, Any]:
    f.sms_contacts(conn, ws, phones)
    campaign = f.sms_campaign(conn, ws)
    schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    return campaign


def ledger_sum(conn: sqlite3.Connection, campaign_id: str) -> Decimal:
    return sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ?",
                                                     (campaign_id,))), Decimal(0))


def test_the_default_provider_is_the_outbox(conn: sqlite3.Connection, ws: int) -> None:
    assert sms_providers.show_provider(conn, ws) == {"provider": "outbox", "account_sid": None, "base_url": None}
    assert isinstance(sms_providers.get_provider(conn, ws), sms_providers.OutboxProvider)


def test_set_twilio_then_outbox_and_the_token_is_never_answered(conn: sqlite3.Connection, ws: int) -> None:
    shown = sms_providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN)
    assert shown == {"provider": "twilio", "account_sid": f.TWILIO_SID, "base_url": "https://api.twilio.com"}
    assert sms_providers.show_provider(conn, ws) == shown
    provider = sms_providers.get_provider(conn, ws)
    assert provider.url == f"https://api.twilio.com/2010-04-01/Accounts/{f.TWILIO_SID}/Messages.json"
    assert f.TWILIO_TOKEN not in repr(provider)
    assert provider.status_callback == "http://127.0.0.1:8000/webhooks/twilio/status"
    assert sms_providers.set_provider(conn, ws, "outbox")["provider"] == "outbox"
    assert conn.execute("SELECT COUNT(*) FROM sms_provider_settings").fetchone()[0] == 0


@pytest.mark.parametrize(("args", "message"), [
    (("carrier-pigeon",), "The provider must be outbox or twilio, not 'carrier-pigeon'."),
    (("twilio",), "The Twilio account SID must be AC followed by 32 hexadecimal characters."),
    (("twilio", "ACnothex"), "The Twilio account SID must be AC followed by 32 hexadecimal characters."),
    (("twilio", f.TWILIO_SID), "The Twilio auth token must be a non-empty string without spaces."),
    (("twilio", f.TWILIO_SID, "a b"), "The Twilio auth token must be a non-empty string without spaces."),
    (("twilio", f.TWILIO_SID, "tok", "ftp://x"), "The Twilio base URL must be an http:// or https:// URL without a query."),
    (("outbox", f.TWILIO_SID), "The outbox provider takes no account SID, auth token or base URL."),
])
def test_bad_provider_settings_are_refused_and_write_nothing(conn: sqlite3.Connection, ws: int, args: tuple[Any, ...],
                                                             message: str) -> None:
    names = ("provider", "account_sid", "auth_token", "base_url")
    values = dict(zip(names, args, strict=False))
    with pytest.raises(MktError) as err:
        sms_providers.set_provider(conn, ws, values.pop("provider"), **values)
    assert (err.value.status, err.value.message) == (400, message)
    assert conn.execute("SELECT COUNT(*) FROM sms_provider_settings").fetchone()[0] == 0


def test_a_campaign_goes_out_through_twilio_and_keeps_each_sid(conn: sqlite3.Connection, ws: int) -> None:
    with f.TwilioStandIn() as server:
        use_twilio(conn, ws, server)
        conn.execute("UPDATE workspaces SET tracking_url = 'https://t.example.com' WHERE id = ?", (ws,))
        campaign = send(conn, ws, US)
    assert len(server.received) == 3
    for request in server.received:
        assert request["path"] == f"/2010-04-01/Accounts/{f.TWILIO_SID}/Messages.json"
        assert request["auth"] == f"{f.TWILIO_SID}:{f.TWILIO_TOKEN}"
        assert request["form"]["From"] == "ACME"
        assert request["form"]["Body"] == f.SMS_TEXT.replace("{{contact.first_name}}", "")  # rendered, as written
        assert request["form"]["StatusCallback"] == "https://t.example.com/webhooks/twilio/status"
    assert sorted(r["form"]["To"] for r in server.received) == US
    rows = conn.execute("SELECT status, provider, provider_ref FROM sms_messages WHERE campaign_id = ?",
                        (campaign["id"],)).fetchall()
    assert {(r[0], r[1]) for r in rows} == {("sent", "twilio")}
    assert all(r[2].startswith("SM") and len(r[2]) == 34 for r in rows)
    assert len({r[2] for r in rows}) == 3
    assert campaigns.get_campaign(conn, ws, campaign["id"])["status"] == "COMPLETED"
    assert conn.execute("SELECT COUNT(*) FROM sms_outbox").fetchone()[0] == 0


def test_a_4xx_fails_the_message_at_once_refunds_it_and_keeps_twilios_error(conn: sqlite3.Connection,
                                                                             ws: int) -> None:
    before = Decimal(sms_ledger.show_balance(conn, ws)["balance"])
    with f.TwilioStandIn({US[1]: [(400, 21211)]}) as server:
        use_twilio(conn, ws, server)
        campaign = send(conn, ws, US)
    assert [r["form"]["To"] for r in server.received].count(US[1]) == 1  # not retried
    failed = conn.execute("SELECT phone, status, error_code, error_message, price_units FROM sms_messages"
                          " WHERE campaign_id = ? AND status = 'failed'", (campaign["id"],)).fetchall()
    assert [tuple(r)[:4] for r in failed] == [(US[1], "failed", "21211", "Stand-in error 21211")]
    figures = stats.campaign_statistics(conn, ws, campaign["id"])
    assert figures["aggregate"]["sent"] == 2 and figures["aggregate"]["failed"] == 1
    sent_units = conn.execute("SELECT SUM(price_units) FROM sms_messages WHERE campaign_id = ? AND status = 'sent'",
                              (campaign["id"],)).fetchone()[0]
    assert ledger_sum(conn, campaign["id"]) == -Decimal(sent_units).scaleb(-5)  # the failed one refunded
    assert Decimal(figures["total_cost"]) == Decimal(sent_units).scaleb(-5)
    refunds = [h for h in sms_ledger.ledger_history(conn, ws) if h["kind"] == "refund"]
    assert len(refunds) == 1 and "refused by twilio" in refunds[0]["reason"]
    after = Decimal(sms_ledger.show_balance(conn, ws)["balance"])
    assert before - after == Decimal(sent_units).scaleb(-5)


def test_429_and_5xx_are_retried_with_backoff_until_accepted(conn: sqlite3.Connection, ws: int) -> None:
    with f.TwilioStandIn({US[0]: [(429, 20429), (503, 20500), (201, None)]}) as server:
        use_twilio(conn, ws, server)
        campaign = send(conn, ws, US[:1])
    assert [r["form"]["To"] for r in server.received] == [US[0]] * 3
    row = conn.execute("SELECT status, provider_ref FROM sms_messages WHERE campaign_id = ?",
                       (campaign["id"],)).fetchone()
    assert row[0] == "sent" and row[1].startswith("SM")


def test_a_retry_after_a_try_that_may_have_reached_twilio_is_recorded_uncertain(
        conn: sqlite3.Connection, ws: int, caplog: pytest.LogCaptureFixture) -> None:
    """A 5xx (or no answer once the request was sent) may come after Twilio created the message:
    the retry may text the recipient twice, so the message is recorded uncertain, and the log
    says so (one line a message, as a take-over of a dead worker's messages is said); a 429
    is safe."""
    with caplog.at_level("WARNING", logger="mkt.sms"), \
            f.TwilioStandIn({US[0]: [(500, 20500), (201, None)], US[1]: [(429, 20429), (201, None)]}) as server:
        use_twilio(conn, ws, server)
        campaign = send(conn, ws, US[:2])
    assert sorted(r["form"]["To"] for r in server.received) == [US[0], US[0], US[1], US[1]]
    rows = dict(conn.execute("SELECT phone, status || ' ' || coalesce(uncertain, 0) FROM sms_messages"
                             " WHERE campaign_id = ?", (campaign["id"],)).fetchall())
    assert rows == {US[0]: "sent 1", US[1]: "sent 0"}
    uncertain_id = conn.execute("SELECT id FROM sms_messages WHERE campaign_id = ? AND uncertain = 1",
                                (campaign["id"],)).fetchone()[0]
    said = [r.getMessage() for r in caplog.records if "recorded uncertain" in r.getMessage()]
    assert said == [f"SMS message {uncertain_id}: a request that may have reached Twilio got no usable answer and "
                    "was tried again or given up (recorded uncertain)"]


def test_retries_that_run_out_fail_the_message_and_refund_it(conn: sqlite3.Connection, ws: int) -> None:
    with f.TwilioStandIn({US[0]: [(500, 20500)]}) as server:
        use_twilio(conn, ws, server)
        campaign = send(conn, ws, US[:1])
    assert len(server.received) == sms_providers.RETRIES + 1
    row = conn.execute("SELECT status, error_code FROM sms_messages WHERE campaign_id = ?",
                       (campaign["id"],)).fetchone()
    assert tuple(row) == ("failed", "20500")
    assert ledger_sum(conn, campaign["id"]) == 0


def test_an_unreachable_twilio_fails_the_messages_without_charging(conn: sqlite3.Connection, ws: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sms_providers, "RETRIES", 1)
    with f.TwilioStandIn() as server:
        url = server.base_url
    sms_providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN, base_url=url)
    campaign = send(conn, ws, US[:2])
    sms_providers.close_clients()
    rows = conn.execute("SELECT status, error_code FROM sms_messages WHERE campaign_id = ?",
                        (campaign["id"],)).fetchall()
    assert {tuple(r) for r in rows} == {("failed", "network")}
    assert ledger_sum(conn, campaign["id"]) == 0


# --- rate and concurrency (MKT_SMS_RATE, MKT_SMS_CONCURRENCY; kernel/pacing.py) -----------

MANY = [f"+141555501{i:02d}" for i in range(50)]


def test_the_rate_is_honoured(conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("MKT_SMS_RATE", "50")
    with f.TwilioStandIn() as server:
        use_twilio(conn, ws, server)
        f.sms_contacts(conn, ws, MANY)
        campaign = f.sms_campaign(conn, ws)
        schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
        started = time.monotonic()
        assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
        elapsed = time.monotonic() - started
    assert len(server.received) == 50
    assert elapsed >= 0.9  # 50 messages at 50 per second: the 50th starts 0.98 s after the first
    assert campaigns.get_campaign(conn, ws, campaign["id"])["statistics"]["sent"] == 50


@pytest.mark.parametrize(("setting", "expected"), [(None, 8), ("3", 3)])
def test_concurrency_is_honoured(conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch,
                                 setting: str | None, expected: int) -> None:
    if setting is None:
        monkeypatch.delenv("MKT_SMS_CONCURRENCY", raising=False)
    else:
        monkeypatch.setenv("MKT_SMS_CONCURRENCY", setting)
    # Each answer is held 0.25 s, so that all the requests of a round overlap even on a loaded
    # machine (with 0.03 s, a worker thread started late under load saw 6-7 in flight, not 8).
    with f.TwilioStandIn(delay=0.25) as server:
        use_twilio(conn, ws, server)
        send(conn, ws, MANY[:40])
    assert len(server.received) == 40
    assert server.max_in_flight == expected


def test_a_pacer_spaces_messages_across_threads(conn: sqlite3.Connection, ws: int) -> None:
    import time
    from concurrent.futures import ThreadPoolExecutor

    from marketing_cli.services.account.pace import SMS, SharedPacer

    pacer = SharedPacer(ws, SMS, 500)
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:  # the threads share the one connection (the pacer's lock)
        list(pool.map(lambda _: pacer.wait(conn), range(101)))
    assert time.monotonic() - started >= 0.19  # the 101st starts 100 / 500 s after the first
    unlimited = SharedPacer(ws, SMS, 0)
    started = time.monotonic()
    for _ in range(10_000):
        unlimited.wait(conn)
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize(("name", "value", "message"), [
    ("MKT_SMS_CONCURRENCY", "0", "MKT_SMS_CONCURRENCY must be a whole number from 1 to 100, not '0'."),
    ("MKT_SMS_CONCURRENCY", "101", "MKT_SMS_CONCURRENCY must be a whole number from 1 to 100, not '101'."),
    ("MKT_SMS_CONCURRENCY", "eight", "MKT_SMS_CONCURRENCY must be a whole number from 1 to 100, not 'eight'."),
    ("MKT_SMS_RATE", "-1", "MKT_SMS_RATE must be a number of messages per second from 0 (unlimited) to 100,000,"
                           " not '-1'."),
    ("MKT_SMS_RATE", "nan", "MKT_SMS_RATE must be a number of messages per second from 0 (unlimited) to 100,000,"
                            " not 'nan'."),
    ("MKT_SMS_RATE", "fast", "MKT_SMS_RATE must be a number of messages per second from 0 (unlimited) to 100,000,"
                             " not 'fast'."),
    ("MKT_SEND_RATE", "inf", "MKT_SEND_RATE must be a number of messages per second from 0 (unlimited) to 100,000,"
                             " not 'inf'."),
    ("MKT_SEND_CONCURRENCY", "2.5", "MKT_SEND_CONCURRENCY must be a whole number from 1 to 100, not '2.5'."),
])
def test_bad_pacing_values_are_refused_by_name(monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                               message: str) -> None:
    from marketing_cli.kernel import pacing

    monkeypatch.setenv(name, value)
    with pytest.raises(MktError) as err:
        pacing.check_environment()
    assert (err.value.status, err.value.message) == (400, message)


def test_pacing_defaults_and_good_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.kernel import pacing

    for name in ("MKT_SMS_CONCURRENCY", "MKT_SMS_RATE", "MKT_SEND_CONCURRENCY", "MKT_SEND_RATE"):
        monkeypatch.delenv(name, raising=False)
    assert pacing.read_pace(pacing.SMS) == pacing.Pace(8, 0.0)
    assert pacing.read_pace(pacing.EMAIL) == pacing.Pace(10, 0.0)
    monkeypatch.setenv("MKT_SMS_CONCURRENCY", " 100 ")
    monkeypatch.setenv("MKT_SMS_RATE", "2.5")
    assert pacing.read_pace(pacing.SMS) == pacing.Pace(100, 2.5)


def test_the_rate_holds_for_two_workers_together(conn: sqlite3.Connection, ws: int, db_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two hand-off workers (threads, each on its own connection, as two `mkt jobs run` processes)
    share MKT_SMS_RATE: the workspace's rate, booked in the database (services/account/pace.py)."""
    import threading
    import time

    from marketing_cli.services.sms import expansion, recipients
    from marketing_cli.storage import db

    rate, count = 100, 60
    monkeypatch.setenv("MKT_SMS_RATE", str(rate))
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "6")  # batches small enough for both workers to take some
    phones = [f"+1415555{i:04d}" for i in range(count)]
    with f.TwilioStandIn() as server:
        use_twilio(conn, ws, server)
        f.sms_contacts(conn, ws, phones)
        campaign = f.sms_campaign(conn, ws)
        sms_ledger.add_balance(conn, ws, "100")
        schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
        row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (campaign["id"],)).fetchone()
        assert recipients.expand_recipients(conn, row)
        errors: list[BaseException] = []

        def work() -> None:
            own = db.connect(db_path)
            try:
                expansion.help_hand_off(own, {"campaign_id": campaign["id"]})
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
            finally:
                own.close()

        threads = [threading.Thread(target=work) for _ in range(2)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        elapsed = time.monotonic() - started
    assert not errors, errors
    assert sorted(r["form"]["To"] for r in server.received) == phones  # each once
    assert elapsed >= (count - 1) / rate, elapsed  # for the two together: one pacer each would take half
    assert conn.execute("SELECT count(DISTINCT claim_token) FROM sms_messages WHERE campaign_id = ?",
                        (campaign["id"],)).fetchone()[0] == 2
    assert [tuple(r) for r in conn.execute("SELECT channel FROM pace_slots WHERE workspace_id = ?", (ws,))] == \
        [("sms",)]

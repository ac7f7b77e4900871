"""Twilio's StatusCallback: the signature check, states that only move forward, statistics
`delivered` / `failed`, refunds of failures the carrier never accepted, and a ledger that reconciles."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.sms import providers, schedule, stats
from marketing_cli.services.sms import webhooks as sms_webhooks
from tests import factories as f

US = ["+14155550101", "+14155550102", "+14155550103", "+14155550104"]
BASE = "https://t.example.com/mkt"
STATUS_URL = BASE + "/webhooks/twilio/status"


@pytest.fixture
def sent(conn: sqlite3.Connection, workspace: dict[str, Any]) -> dict[str, Any]:
    """A campaign of four messages handed to the Twilio stand-in: {campaign, sids (by phone), ws}."""
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (BASE, ws))
    with f.TwilioStandIn() as server:
        providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                                   base_url=server.base_url)
        f.sms_contacts(conn, ws, US)
        campaign = f.sms_campaign(conn, ws)
        schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
        assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    sids = dict(conn.execute("SELECT phone, provider_ref FROM sms_messages WHERE campaign_id = ?",
                             (campaign["id"],)).fetchall())
    return {"campaign": campaign, "sids": sids, "ws": ws}


def post(client: Any, params: dict[str, str], *, token: str = f.TWILIO_TOKEN, url: str = STATUS_URL,
         signed: bool = True, path: str = "/webhooks/twilio/status") -> Any:
    headers = {"X-Twilio-Signature": sms_webhooks.signature(token, url, params)} if signed else {}
    return client.post(path, data=params, headers=headers)


def report(sid: str, status: str, **extra: str) -> dict[str, str]:
    return {"MessageSid": sid, "MessageStatus": status, "AccountSid": f.TWILIO_SID, "SmsSid": sid,
            "To": "+14155550101", "ApiVersion": "2010-04-01", **extra}


def aggregate(conn: sqlite3.Connection, sent: dict[str, Any]) -> dict[str, int]:
    return stats.campaign_statistics(conn, sent["ws"], sent["campaign"]["id"])["aggregate"]


def state(conn: sqlite3.Connection, sid: str) -> tuple[Any, ...]:
    return tuple(conn.execute("SELECT status, carrier_at IS NOT NULL, delivered_at IS NOT NULL, failed_at IS NOT NULL"
                              " FROM sms_messages WHERE provider_ref = ?", (sid,)).fetchone())


def test_the_signature_is_twilios_documented_algorithm() -> None:
    # Twilio's own example (its security documentation): token 12345, this URL and these parameters.
    params = {"CallSid": "CA1234567890ABCDE", "Caller": "+12349013030", "Digits": "1234", "From": "+12349013030",
              "To": "+18005551212"}
    assert sms_webhooks.signature("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", params) \
        == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="


@pytest.mark.parametrize("how", ["missing", "wrong token", "wrong url", "tampered", "unknown account"])
def test_a_missing_or_wrong_signature_is_refused_and_changes_nothing(client: Any, conn: sqlite3.Connection,
                                                                    sent: dict[str, Any], how: str) -> None:
    sid = sent["sids"][US[0]]
    params = report(sid, "delivered")
    if how == "missing":
        response = post(client, params, signed=False)
    elif how == "wrong token":
        response = post(client, params, token="not-the-token")
    elif how == "wrong url":
        response = post(client, params, url="http://testserver/webhooks/twilio/status")
    elif how == "tampered":
        headers = {"X-Twilio-Signature": sms_webhooks.signature(f.TWILIO_TOKEN, STATUS_URL, params)}
        response = client.post("/webhooks/twilio/status", data={**params, "MessageStatus": "failed"}, headers=headers)
    else:
        response = post(client, {**params, "AccountSid": "AC" + "f" * 32})
    assert response.status_code == 403
    assert response.json()["error"] == {"status": 403, "message": "Invalid Twilio signature."}
    assert state(conn, sid) == ("sent", 0, 0, 0)
    assert aggregate(conn, sent)["delivered"] == 0


def test_signed_reports_move_delivered_and_failed_and_the_ledger_reconciles(client: Any, conn: sqlite3.Connection,
                                                                           sent: dict[str, Any]) -> None:
    sids = sent["sids"]
    cid = sent["campaign"]["id"]
    charged = Decimal(conn.execute("SELECT SUM(price_units) FROM sms_messages WHERE campaign_id = ?",
                                   (cid,)).fetchone()[0]).scaleb(-5)
    # US[0]: sent then delivered; US[1]: sent by the carrier, then undelivered (charged: the carrier took it);
    # US[2]: failed before any carrier accepted it (refunded); US[3]: only queued.
    for phone, status in [(US[0], "sent"), (US[0], "delivered"), (US[1], "sent"), (US[1], "undelivered"),
                          (US[2], "failed"), (US[3], "queued")]:
        response = post(client, report(sids[phone], status, ErrorCode="30008") if status == "failed"
                        else report(sids[phone], status), path="/mkt/webhooks/twilio/status")
        assert response.status_code == 200
    assert state(conn, sids[US[0]]) == ("delivered", 1, 1, 0)
    assert state(conn, sids[US[1]]) == ("undelivered", 1, 0, 1)
    assert state(conn, sids[US[2]]) == ("failed", 0, 0, 1)
    assert state(conn, sids[US[3]]) == ("sent", 0, 0, 0)
    assert conn.execute("SELECT error_code FROM sms_messages WHERE provider_ref = ?", (sids[US[2]],)).fetchone()[0] \
        == "30008"
    figures = aggregate(conn, sent)
    assert (figures["sent"], figures["delivered"], figures["failed"]) == (4, 1, 2)
    per_message = Decimal(conn.execute("SELECT price_units FROM sms_messages WHERE provider_ref = ?",
                                       (sids[US[2]],)).fetchone()[0]).scaleb(-5)
    ledger = sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ?", (cid,))),
                 Decimal(0))
    assert ledger == -(charged - per_message)  # to the cent: one refund, for the message no carrier took
    assert Decimal(stats.campaign_statistics(conn, sent["ws"], cid)["total_cost"]) == charged - per_message


def test_repeated_and_earlier_callbacks_change_nothing_and_answer_2xx(client: Any, conn: sqlite3.Connection,
                                                                     sent: dict[str, Any]) -> None:
    sids = sent["sids"]
    cid = sent["campaign"]["id"]
    assert post(client, report(sids[US[0]], "delivered")).status_code == 200
    before = state(conn, sids[US[0]])
    for status in ["delivered", "sent", "queued", "failed", "undelivered"]:
        assert post(client, report(sids[US[0]], status)).status_code == 200
    assert state(conn, sids[US[0]]) == before == ("delivered", 1, 1, 0)
    assert post(client, report(sids[US[1]], "failed")).status_code == 200
    assert post(client, report(sids[US[1]], "failed")).status_code == 200  # the same callback twice refunds once
    refunds = conn.execute("SELECT COUNT(*) FROM sms_ledger WHERE campaign_id = ? AND kind = 'refund'",
                           (cid,)).fetchone()[0]
    assert refunds == 1
    assert (aggregate(conn, sent)["delivered"], aggregate(conn, sent)["failed"]) == (1, 1)
    # unknown messages and statuses: answered 2xx, nothing changed
    assert post(client, report("SM" + "0" * 32, "delivered")).status_code == 200
    assert post(client, report(sids[US[2]], "exploded")).status_code == 200
    assert state(conn, sids[US[2]]) == ("sent", 0, 0, 0)


# --- batches: reports that arrive together are written together (one transaction) ------------

def test_a_batch_applies_each_report_in_order_and_refuses_bad_signatures_alone(conn: sqlite3.Connection,
                                                                               sent: dict[str, Any]) -> None:
    one, two, three = (sent["sids"][p] for p in US[:3])
    signed = [report(one, "sent"), report(one, "delivered"), report(one, "delivered"),  # twice: counts once
              report(two, "delivered"), report(two, "sent"),  # out of order: delivered stays delivered
              report(three, "failed", ErrorCode="30003")]
    reports: list[tuple[dict[str, str], str | None]] = [
        (p, sms_webhooks.signature(f.TWILIO_TOKEN, STATUS_URL, p)) for p in signed]
    reports.insert(2, (report(sent["sids"][US[3]], "delivered"), "forged"))
    reports.append((report(sent["sids"][US[3]], "failed"), None))
    results = sms_webhooks.twilio_status_batch(conn, reports)
    assert [r if isinstance(r, dict) else (r.status, r.message) for r in results] == [
        {"changed": True}, {"changed": True}, (403, "Invalid Twilio signature."), {"changed": False},
        {"changed": True}, {"changed": False}, {"changed": True}, (403, "Invalid Twilio signature.")]
    assert state(conn, one) == ("delivered", True, True, False)
    assert state(conn, two) == ("delivered", True, True, False)
    assert state(conn, sent["sids"][US[3]]) == ("sent", False, False, False)
    assert (aggregate(conn, sent)["delivered"], aggregate(conn, sent)["failed"]) == (2, 1)


def test_concurrent_reports_are_all_counted_once_and_share_transactions(
        app: Any, conn: sqlite3.Connection, sent: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import httpx

    sizes: list[int] = []
    real = sms_webhooks.twilio_status_batch

    def counted(c: sqlite3.Connection, reports: list[Any]) -> list[Any]:
        sizes.append(len(reports))
        return real(c, reports)
    monkeypatch.setattr(sms_webhooks, "twilio_status_batch", counted)

    sids = list(sent["sids"].values())
    bodies = [report(sid, status) for sid in sids for status in ("sent", "delivered", "delivered")]
    bodies.append(report(sids[0], "delivered", AccountSid="AC" + "f" * 32))  # no such account: 403

    async def burst() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            answers = await asyncio.gather(*(client.post(
                "/mkt/webhooks/twilio/status", data=p,
                headers={"X-Twilio-Signature": sms_webhooks.signature(f.TWILIO_TOKEN, STATUS_URL, p)})
                for p in bodies))
        return [a.status_code for a in answers]

    statuses = asyncio.run(burst())
    assert statuses == [200] * (len(bodies) - 1) + [403]
    assert aggregate(conn, sent)["delivered"] == 4
    assert sum(sizes) == len(bodies) and len(sizes) < len(bodies)  # the reports that waited went together

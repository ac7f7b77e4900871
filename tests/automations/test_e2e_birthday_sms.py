"""The birthday SMS example (examples/automations/birthday-sms.json) end to end on a fixed clock,
through the Twilio stand-in: loaded and published as shipped over the API, nothing the day
before, the text on the birthday (rendered, from the sender ID, charged once), held by quiet
hours for the contact whose birthday begins in the night and sent when the window opens,
Twilio's delivery report counted in the step's statistics, and again the next year."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.sms import ledger, providers, quiet_hours
from marketing_cli.services.sms import webhooks as sms_webhooks
from tests import factories as f

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "automations" / "birthday-sms.json"
BASE = "https://t.example.com"
SF = "+14155550101"        # San Francisco: 16:30 on the eve when the UTC day begins
PARIS = "+33612345678"     # Paris: 01:30 on the birthday, the quiet hours of France (08:00-22:00)
TEXT = "Happy birthday, {name}! Here is 20% off today with code BDAY20. Reply STOP to opt out."


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
        monkeypatch.setattr(clock, "utcnow", lambda: self.now)


def _charges(conn: Any) -> list[Decimal]:
    return [Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE kind = 'charge' ORDER BY id")]


def test_birthday_sms(conn: Any, client: Any, auth: dict[str, str], workspace: dict[str, Any],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(quiet_hours.TABLE_ENV)  # the shipped quiet-hours table
    monkeypatch.setattr(providers, "BACKOFF_SECONDS", 0.01)
    fixed = Clock(monkeypatch)
    ws = workspace["id"]
    f.sms_ready(conn, ws, balance="20")
    conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (BASE, ws))
    conn.commit()
    assert client.post("/v1/fields", headers=auth, json={"label": "Birthday", "merge_tag": "birthday",
                                                         "type": "DATE"}).status_code in (200, 201)
    ann = f.contact(conn, ws, "ann@example.com", first_name="Ann", phone_number=SF, birthday="1990-11-26")["id"]
    zoe = f.contact(conn, ws, "zoe@example.com", first_name="Zoé", phone_number=PARIS, birthday="1988-11-26")["id"]
    f.contact(conn, ws, "bob@example.com", first_name="Bob", phone_number="+14155550102", birthday="1970-05-01")
    f.contact(conn, ws, "noam@example.com", first_name="Noam", birthday="1999-11-26")  # no number: skipped

    created = client.post("/v1/automations", headers=auth, json=json.loads(EXAMPLE.read_text()))
    assert created.status_code == 201, created.text
    aid = created.json()["data"]["id"]
    published = client.post(f"/v1/automations/{aid}/publish", headers=auth)
    assert published.status_code == 200 and published.json()["data"]["status"] == "ACTIVE"
    before = ledger.balance(conn, ws)

    with f.TwilioStandIn() as server:
        providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                               base_url=server.base_url)
        assert f.run_automations(conn)["failed"] == 0  # the eve: nobody
        assert server.received == [] and _charges(conn) == []

        fixed.now = datetime(2026, 11, 26, 0, 30, tzinfo=UTC)  # the birthday (UTC day)
        assert f.run_automations(conn)["failed"] == 0
        assert [(r["form"]["To"], r["form"]["From"], r["form"]["Body"]) for r in server.received] == [
            (SF, "ACME", TEXT.format(name="Ann"))]
        held = conn.execute("SELECT contact_id, status, held_until FROM sms_messages WHERE status = 'held'").fetchall()
        assert [tuple(r) for r in held] == [(zoe, "held", "2026-11-26T07:00:00.000Z")]  # 08:00 in Paris
        assert len(_charges(conn)) == 2  # both charged once, when written; the held one keeps its charge

        fixed.now = datetime(2026, 11, 26, 6, 59, tzinfo=UTC)
        f.run_automations(conn)
        assert len(server.received) == 1  # still night in Paris

        fixed.now = datetime(2026, 11, 26, 7, 0, 5, tzinfo=UTC)
        assert f.run_automations(conn)["failed"] == 0
        assert [(r["form"]["To"], r["form"]["Body"]) for r in server.received[1:]] == [
            (PARIS, TEXT.format(name="Zoé"))]

        fixed.now = datetime(2026, 11, 26, 18, 0, tzinfo=UTC)  # later the same day: nothing again
        f.run_automations(conn)
        fixed.now = datetime(2026, 11, 27, 0, 30, tzinfo=UTC)
        f.run_automations(conn)
        assert len(server.received) == 2
    charges = _charges(conn)
    assert len(charges) == 2
    assert ledger.balance(conn, ws) == before + sum(charges)
    sids = dict(conn.execute("SELECT contact_id, provider_ref FROM sms_messages").fetchall())
    assert set(sids) == {ann, zoe} and all(s.startswith("SM") for s in sids.values())

    params = {"MessageSid": sids[ann], "MessageStatus": "delivered", "AccountSid": f.TWILIO_SID,
              "SmsSid": sids[ann], "To": SF, "ApiVersion": "2010-04-01"}
    url = BASE + sms_webhooks.STATUS_PATH
    report = client.post(sms_webhooks.STATUS_PATH, data=params,
                         headers={"X-Twilio-Signature": sms_webhooks.signature(f.TWILIO_TOKEN, url, params)})
    assert report.status_code in (200, 204), report.text

    data = client.get(f"/v1/automations/{aid}/statistics", headers=auth).json()["data"]
    step = data["versions"][0]["steps"][0]
    assert step["sms"]["sent"] == 2 and step["sms"]["delivered"] == 1 and step["sms"]["held"] == 0
    assert Decimal(step["sms"]["cost"]) == -sum(charges)
    assert step["skipped"] == {"the contact has no phone number": 1}
    assert data["completed"] == 3 and data["entered"] == 3

    # A year later: the birthday again, for the same contacts, charged again.
    with f.TwilioStandIn() as server:
        providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                               base_url=server.base_url)
        fixed.now = datetime(2027, 11, 26, 12, 0, tzinfo=UTC)  # 13:00 in Paris, 04:00 in San Francisco
        f.run_automations(conn)
        assert [r["form"]["To"] for r in server.received] == [PARIS]
        fixed.now = datetime(2027, 11, 26, 16, 0, 5, tzinfo=UTC)  # 08:00 in San Francisco
        f.run_automations(conn)
        assert sorted(r["form"]["To"] for r in server.received) == sorted([PARIS, SF])
    assert len(_charges(conn)) == 4

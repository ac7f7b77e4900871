"""Double opt-in end to end on a fixed clock, through a real SMTP server: a contact created
UNCONFIRMED gets the confirmation email (DKIM-signed, with List-Unsubscribe), a GET of the
link changes nothing, the POST confirms it, and the confirmation starts the welcome flow."""

from __future__ import annotations

import email
import re
from datetime import UTC, datetime
from email import policy
from typing import Any
from urllib.parse import urlsplit

import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.automations import stats
from tests import factories as f
from tests.smtp_server import SmtpServer

MOMENT = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


def test_double_opt_in_then_welcome(conn: Any, client: Any, auth: dict[str, str], workspace: dict[str, Any],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "utcnow", lambda: MOMENT)
    ws = workspace["id"]
    sender = f.verified_sender(conn, ws)
    confirm_html = ('<p>Hi {{contact.first_name}}, please <a href="{{confirmation_url}}">confirm</a>.'
                    ' <a href="{{unsubscribe_url}}">Not me</a></p>')
    opt_in = f.automation(conn, ws, {"name": "Double opt-in", "triggers": [{"type": "subscription_pending"}],
                                     "steps": [{"id": "confirm", "type": "send_email", "confirmation": True,
                                                "sender_id": sender, "subject": "Please confirm",
                                                "html": confirm_html}]})
    welcome = f.automation(conn, ws, {"name": "Welcome", "triggers": [{"type": "contact_subscribed"}],
                                      "steps": [f.email_step("welcome", sender)]})
    with SmtpServer() as smtp:
        monkeypatch.setenv("MKT_SMTP_URL", smtp.url)
        created = client.post("/v1/contacts", headers=auth, json={
            "status": "UNCONFIRMED", "fields": {"email_address": "ann@example.com", "first_name": "Ann"}})
        assert created.status_code == 201
        contact_id = created.json()["data"]["id"]
        assert f.run_automations(conn)["failed"] == 0
        assert len(smtp.messages) == 1 and smtp.messages[0].rcpt_tos == ["ann@example.com"]
        message = email.message_from_bytes(smtp.messages[0].raw, policy=policy.default)
        assert message["Subject"] == "Please confirm" and message["DKIM-Signature"]
        assert message["List-Unsubscribe"]
        html = message.get_body(("html",)).get_content()
        assert "Hi Ann" in html
        link = re.search(r'href="([^"]+/t/confirm/[^"]+)"', html).group(1)
        path = urlsplit(link).path

        page = client.get(path)  # a mail scanner fetching the link confirms nobody
        assert page.status_code == 200 and "<form" in page.text
        assert client.get(f"/v1/contacts/{contact_id}", headers=auth).json()["data"]["status"] == "UNCONFIRMED"
        assert client.post(path[:-2] + "xx").status_code == 404  # a forged token

        done = client.post(path)
        assert done.status_code == 200 and "confirmed" in done.text
        assert client.get(f"/v1/contacts/{contact_id}", headers=auth).json()["data"]["status"] == "SUBSCRIBED"
        log = client.get("/v1/events?type=CONTACT_SUBSCRIBED", headers=auth).json()["data"]
        assert [e["contact_id"] for e in log] == [contact_id]

        assert f.run_automations(conn)["failed"] == 0
        assert [m.message["Subject"] for m in smtp.messages] == ["Please confirm", "Step welcome"]
        assert "already confirmed" in client.post(path).text  # twice: nothing more happens
        f.run_automations(conn)
        assert len(smtp.messages) == 2
    assert stats.automation_stats(conn, ws, opt_in["id"])["completed"] == 1
    entered = conn.execute("SELECT entered_at FROM automation_enrollments ORDER BY id").fetchall()
    assert [r[0] for r in entered] == ["2026-11-25T09:00:00.000Z"] * 2  # the fixed clock
    assert stats.automation_stats(conn, ws, welcome["id"])["versions"][0]["steps"][0]["email"]["delivered"] == 1

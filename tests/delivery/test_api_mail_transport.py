"""The mail transport seen over HTTP: a test email says where it went, statistics and progress
name outbox deliveries, and the setting itself has no endpoint (operator only)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from marketing_cli.services.delivery import transport_settings
from marketing_cli.services.estimates import views
from tests import factories
from tests.smtp_server import SmtpServer


def test_a_test_email_written_to_the_outbox_says_so(client: Any, auth: dict, conn: sqlite3.Connection,
                                                    workspace: dict, tmp_path: Path) -> None:
    ready = factories.ready_campaign(conn, workspace["id"])
    r = client.post(f"/v1/campaigns/{ready['id']}/test", headers=auth,
                    json={"variant_type": "A", "recipient": "someone@else.example"})
    assert r.status_code == 200
    assert r.json() == {"error": None, "data": f"A test email of variant A for someone@else.example was written to "
                                                f"the outbox at {tmp_path / 'outbox'}: nothing was sent."}


def test_a_test_email_goes_through_the_stored_smtp_server(client: Any, auth: dict, conn: sqlite3.Connection,
                                                          workspace: dict, monkeypatch: Any) -> None:
    monkeypatch.delenv("MKT_OUTBOX")
    ready = factories.ready_campaign(conn, workspace["id"])
    with SmtpServer() as server:
        transport_settings.set_transport(conn, workspace["id"], server.url)
        r = client.post(f"/v1/campaigns/{ready['id']}/test", headers=auth,
                        json={"variant_type": "A", "recipient": "ops@example.org"})
    assert r.json()["data"] == "A test email of variant A was sent to ops@example.org."
    assert [m.rcpt_tos for m in server.messages] == [["ops@example.org"]]


def test_statistics_and_progress_name_outbox_deliveries(client: Any, auth: dict, conn: sqlite3.Connection,
                                                        workspace: dict, tmp_path: Path) -> None:
    made = factories.sendable_campaign(conn, workspace["id"], ["ann@example.org"])
    factories.send_now(conn, workspace["id"], made["id"])
    outbox = {"delivered": 1, "path": str(tmp_path / "outbox")}
    data = client.get(f"/v1/campaigns/{made['id']}/statistics", headers=auth).json()["data"]
    assert data["outbox"] == outbox and data == views.email_statistics(conn, workspace["id"], made["id"])
    assert client.get(f"/v1/campaigns/{made['id']}", headers=auth).json()["data"]["progress"]["outbox"] == outbox


def test_the_transport_has_no_endpoint(client: Any, auth: dict, app: Any) -> None:
    assert not [r for r in app.routes if "transport" in getattr(r, "path", "") or "/mail" in getattr(r, "path", "")]
    for path in ("/v1/mail/transport", "/v1/mail-transport", "/v1/workspace/mail-transport"):
        assert client.get(path, headers=auth).status_code == 404
        assert client.post(path, headers=auth, json={"transport": "smtp://x.example"}).status_code == 404


def test_the_openapi_document_describes_the_outbox_member(client: Any) -> None:
    document = client.get("/v1/openapi.json").json()
    statistics = document["paths"]["/v1/campaigns/{campaign_id}/statistics"]["get"]
    text = repr(statistics)
    assert "outbox" in text and "delivered" in text
    assert "written to the outbox" in repr(document["paths"]["/v1/campaigns/{campaign_id}/test"]["post"])

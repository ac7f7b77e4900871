"""The consent ledger on both faces: `consent_text` on create, upsert and import (API member,
query parameter, `--consent-text`), `mkt contacts consents ID` / GET /v1/contacts/{id}/consents,
`mkt consents export` (CSV) / GET /v1/consents (JSON), and the double opt-in confirmation
recorded with the IP address and user agent of the person's POST."""

from __future__ import annotations

import csv
import email
import io
import json
import os
import re
import sqlite3
from email import policy
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from marketing_cli.kernel import limits
from marketing_cli.services.contacts import consent_export, consents
from tests import factories as f

WORDING = "Yes, send me the weekly letter. I can unsubscribe at any time."


def _rows(client: Any, auth: dict[str, str], contact_id: str, query: str = "") -> list[dict[str, Any]]:
    answer = client.get(f"/v1/contacts/{contact_id}/consents{query}", headers=auth)
    assert answer.status_code == 200, answer.text
    assert set(answer.json()) == {"data"}  # envelope B
    return answer.json()["data"]


def test_api_create_and_upsert_take_consent_text_and_the_ledger_shows_it(client: Any, auth: dict[str, str],
                                                                          cli_json: Any) -> None:
    created = client.post("/v1/contacts", headers=auth, json={
        "status": "UNCONFIRMED", "consent_text": WORDING, "fields": {"email_address": "ann@example.com"}})
    assert created.status_code == 201, created.text
    contact_id = created.json()["data"]["id"]
    assert "consent_text" not in created.json()["data"]  # not a member of the contact
    upserted = client.post("/v1/contacts/upsert", headers=auth, json={
        "email_address": "ann@example.com", "status": "SUBSCRIBED", "partial_update": True})
    assert upserted.status_code == 200
    rows = _rows(client, auth, contact_id)
    assert [(r["channel"], r["consent"], r["status"], r["source"], r["consent_text"]) for r in rows] == [
        ("email", "pending", "UNCONFIRMED", "api", WORDING), ("email", "given", "SUBSCRIBED", "api", None)]
    assert rows[0]["id"] < rows[1]["id"]  # oldest first
    assert set(rows[0]) == set(consent_export.ROW_COLUMNS)
    assert cli_json("contacts", "consents", contact_id) == rows  # --json is the API's data
    assert _rows(client, auth, contact_id, f"?after_id={rows[0]['id']}") == rows[1:]
    assert _rows(client, auth, contact_id, "?limit=1") == rows[:1]


def test_api_refusals_write_nothing(client: Any, auth: dict[str, str], conn: sqlite3.Connection) -> None:
    too_long = "x" * (limits.CONSENT_TEXT + 1)
    for path, body in (("/v1/contacts", {"status": "SUBSCRIBED", "consent_text": too_long,
                                         "fields": {"email_address": "ann@example.com"}}),
                       ("/v1/contacts/upsert", {"email_address": "ann@example.com", "consent_text": too_long}),
                       ("/v1/contacts/upsert", {"email_address": "ann@example.com", "consent_text": ["x"]})):
        answer = client.post(path, headers=auth, json=body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"] in (consents.CONSENT_TEXT_TOO_LONG,
                                                     "The member 'consent_text' must be a string.")
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0


def test_the_contact_list_refuses_bad_ids_pages_and_other_workspaces(client: Any, auth: dict[str, str],
                                                                     conn: sqlite3.Connection) -> None:
    other = f.workspace(conn, "Other")
    theirs = f.contact(conn, other["id"], "zoe@example.com")
    cases = [(f"/v1/contacts/{theirs['id']}/consents", 404, "We couldn't find a contact with that ID."),
             ("/v1/contacts/nothex/consents", 400, "The contact ID you provided is not valid."),
             (f"/v1/contacts/{theirs['id']}/consents?limit=0", 400, consent_export.LIMIT_RANGE),
             (f"/v1/contacts/{theirs['id']}/consents?limit=1001", 400, consent_export.LIMIT_RANGE),
             (f"/v1/contacts/{theirs['id']}/consents?after_id=-1", 400, consent_export.AFTER_ID_INVALID),
             (f"/v1/contacts/{theirs['id']}/consents?after_id=x", 400,
              "The query parameter 'after_id' must be an integer."),
             (f"/v1/contacts/{theirs['id']}/consents?since=2026-01-01", 400, "Unknown query parameter 'since'")]
    for path, status, message in cases:
        answer = client.get(path, headers=auth)
        assert (answer.status_code, answer.json()["error"]["message"]) == (status, message), path


def test_cli_create_upsert_and_import_record_the_command_and_the_file(cli: Any, cli_json: Any, conn: sqlite3.Connection,
                                                                      workspace: dict[str, Any], tmp_path: Path) -> None:
    made = cli_json("contacts", "create", "-f", "email_address=ann@example.com", "--status", "SUBSCRIBED",
                    "--consent-text", WORDING)
    cli_json("contacts", "upsert", "--email", "ann@example.com", "--status", "UNSUBSCRIBED", "--partial")
    spring = tmp_path / "spring-fair.csv"
    spring.write_text("email,status\nbob@example.com,\nann@example.com,SUBSCRIBED\n", encoding="utf-8")
    summary = cli_json("contacts", "import", str(spring), "--consent-text", "Signed up at the spring fair.")
    assert (summary["created"], summary["updated"]) == (1, 1)
    rows = cli_json("contacts", "consents", made["id"])
    assert [(r["source"], r["status"], r["consent_text"], r["file_name"], r["line"]) for r in rows] == [
        ("command", "SUBSCRIBED", WORDING, None, None), ("command", "UNSUBSCRIBED", None, None, None),
        ("import", "SUBSCRIBED", "Signed up at the spring fair.", "spring-fair.csv", 3)]
    table = cli("contacts", "consents", made["id"])
    assert table.exit_code == 0 and "spring-fair.csv:3" in table.stdout and "import" in table.stdout
    too_long = cli("contacts", "create", "-f", "email_address=cid@example.com", "--status", "SUBSCRIBED",
                   "--consent-text", "x" * (limits.CONSENT_TEXT + 1))
    assert too_long.exit_code == 1 and too_long.stderr.strip() == consents.CONSENT_TEXT_TOO_LONG
    missing = cli("contacts", "consents", "0" * 24)
    assert missing.exit_code == 1 and "We couldn't find a contact with that ID." in missing.stderr


def test_api_import_takes_consent_text_and_file_name(client: Any, auth: dict[str, str]) -> None:
    answer = client.post("/v1/contacts/import?consent_text=Fair%20sign-up&file_name=fair.csv", headers={
        **auth, "Content-Type": "text/csv"}, content=b"email\nann@example.com\n")
    assert answer.status_code == 200, answer.text
    contact_id = client.post("/v1/contacts/upsert", headers=auth, json={
        "email_address": "ann@example.com", "partial_update": True}).json()["data"]["id"]
    [row] = _rows(client, auth, contact_id)
    assert (row["source"], row["consent_text"], row["file_name"], row["line"]) == ("import", "Fair sign-up",
                                                                                   "fair.csv", 2)
    long_name = client.post("/v1/contacts/import?file_name=" + "n" * 256, headers={
        **auth, "Content-Type": "text/csv"}, content=b"email\nbob@example.com\n")
    assert long_name.status_code == 400 and "file name" in long_name.json()["error"]["message"]


@pytest.fixture
def ledger(conn: sqlite3.Connection, workspace: dict[str, Any]) -> dict[str, Any]:
    """Three contacts, one of them with a phone number and a reply a spreadsheet would run."""
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    made = [f.contact(conn, ws, "ann@example.com"), f.contact(conn, ws, "bob@example.com", phone_number="+14155550101"),
            f.contact(conn, ws, "cid@example.com")]
    conn.execute("UPDATE contact_consents SET created_at = '2026-03-01T10:00:00.000Z' WHERE contact_id = ?",
                 (made[0]["id"],))
    conn.execute("UPDATE contact_consents SET message_text = '=HYPERLINK(\"http://x\")' WHERE contact_id = ?",
                 (made[1]["id"],))  # (as an SMS reply could read)
    return {"ids": [m["id"] for m in made]}


def test_api_lists_the_workspace_ledger_by_time_and_pages_it(client: Any, auth: dict[str, str],
                                                             ledger: dict[str, Any]) -> None:
    def get(query: str) -> Any:
        return client.get(f"/v1/consents?{query}", headers=auth)

    everything = get("since=2000-01-01").json()["data"]
    assert [r["contact_id"] for r in everything] == [ledger["ids"][0], *[ledger["ids"][1]] * 2, ledger["ids"][2]]
    assert set(everything[0]) == set(consent_export.EXPORT_COLUMNS)
    assert everything[1]["email_address"] == "bob@example.com" and everything[1]["phone_number"] == "+14155550101"
    assert [r["contact_id"] for r in get("since=2026-01-01&until=2026-03-02").json()["data"]] == [ledger["ids"][0]]
    assert get("since=2026-03-01T10:00:00.001Z").json()["data"] == everything[1:]
    paged, after = [], None
    while True:
        page = get("since=2000-01-01&limit=3" + (f"&after_id={after}" if after else "")).json()["data"]
        paged += page
        if len(page) < 3:
            break
        after = page[-1]["id"]
    assert paged == everything
    assert get("since=2030-01-01&until=2020-01-01").json()["data"] == []
    assert get("").json()["data"] == everything  # since left out: from the first row
    for query, message in (("since=yesterday",
                                                                 "since must be a date (YYYY-MM-DD) or an RFC 3339 timestamp."),
                           ("since=2026-01-01&until=2026-13-01",
                            "until must be a date (YYYY-MM-DD) or an RFC 3339 timestamp."),
                           ("since=2026-01-01&limit=5000", consent_export.LIMIT_RANGE)):
        answer = get(query)
        assert (answer.status_code, answer.json()["error"]["message"]) == (400, message), query


def test_cli_exports_the_ledger_as_csv(cli: Any, cli_json: Any, client: Any, auth: dict[str, str],
                                       ledger: dict[str, Any], tmp_path: Path) -> None:
    printed = cli("consents", "export", "--since", "2000-01-01")
    assert printed.exit_code == 0, printed.stderr
    lines = list(csv.reader(io.StringIO(printed.stdout)))
    assert tuple(lines[0]) == consent_export.EXPORT_COLUMNS and len(lines) == 5
    api = client.get("/v1/consents?since=2000-01-01", headers=auth).json()["data"]
    assert [int(line[0]) for line in lines[1:]] == [r["id"] for r in api]
    text_column = consent_export.EXPORT_COLUMNS.index("message_text")
    assert lines[2][text_column] == "'=HYPERLINK(\"http://x\")"  # a formula, disarmed in the CSV only
    assert api[1]["message_text"] == '=HYPERLINK("http://x")'
    out = tmp_path / "audit.csv"
    written = cli("consents", "export", "--since", "2026-03-02", "--output", str(out))
    assert written.exit_code == 0 and not Path(str(out) + ".part").exists()
    assert written.stdout.strip() == f"Exported 3 consent rows to {out}."
    assert len(out.read_text(encoding="utf-8").splitlines()) == 4  # the header and Bob's and Cid's rows
    assert cli_json("consents", "export", "--since", "2000-01-01") == api
    assert cli_json("consents", "export", "--since", "2000-01-01", "-o", str(out)) == {"exported": 4,
                                                                                       "output": str(out)}
    bad = cli("consents", "export", "--since", "soon")
    assert bad.exit_code == 1 and "since must be a date" in bad.stderr
    assert cli("consents", "export").exit_code == 2  # --since is required


def test_double_opt_in_confirmation_keeps_the_persons_ip_and_user_agent(client: Any, auth: dict[str, str],
                                                                        conn: sqlite3.Connection,
                                                                        workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    sender = f.verified_sender(conn, ws)
    f.automation(conn, ws, {"name": "Double opt-in", "triggers": [{"type": "subscription_pending"}],
                            "steps": [{"id": "confirm", "type": "send_email", "confirmation": True,
                                       "sender_id": sender, "subject": "Please confirm",
                                       "html": '<p><a href="{{confirmation_url}}">Confirm</a></p>'}]})
    created = client.post("/v1/contacts", headers=auth, json={
        "status": "UNCONFIRMED", "consent_text": WORDING, "fields": {"email_address": "ann@example.com"}})
    contact_id = created.json()["data"]["id"]
    assert f.run_automations(conn)["failed"] == 0
    [eml] = Path(os.environ["MKT_OUTBOX"]).glob("*.eml")
    message = email.message_from_bytes(eml.read_bytes(), policy=policy.default)
    html = message.get_body(("html",)).get_content()
    confirm = urlsplit(re.search(r'href="([^"]+/t/confirm/[^"]+)"', html).group(1)).path
    pixel = re.search(r'src="[^"]*/t/o/([^"]+)"', html).group(1)
    assert client.post(f"/t/confirm/{pixel}").status_code == 404  # the pixel's token confirms nobody
    browser = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 Safari/605.1.15"
    done = client.post(confirm, headers={"User-Agent": browser})
    assert done.status_code == 200 and "confirmed" in done.text
    rows = _rows(client, auth, contact_id)
    assert [(r["source"], r["consent"]) for r in rows] == [("api", "pending"), ("confirmation", "given")]
    assert rows[1]["user_agent"] == browser and rows[1]["ip"]  # the test client's address
    assert rows[0]["consent_text"] == WORDING and rows[1]["campaign_id"]


def test_http_unsubscribe_page_and_one_click_are_told_apart(client: Any, auth: dict[str, str],
                                                            conn: sqlite3.Connection,
                                                            workspace: dict[str, Any]) -> None:
    sent = f.sent_message(conn, workspace["id"])
    page = client.get(f"/t/u/{sent['tokens'].unsubscribe}")
    field, value = re.search(r'name="([^"]+)" value="([^"]+)"', page.text).groups()
    done = client.post(f"/t/u/{sent['tokens'].unsubscribe}", data={field: value}, headers={"User-Agent": "Firefox"})
    assert done.status_code == 200
    [row] = [r for r in _rows(client, auth, sent["contact_id"]) if r["source"].startswith("unsubscribe")]
    assert (row["source"], row["user_agent"], row["status"]) == ("unsubscribe_page", "Firefox", "UNSUBSCRIBED")
    assert json.dumps(row)  # plain JSON values

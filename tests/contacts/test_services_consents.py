"""The consent ledger, written (services/contacts/consents.py): every change of a contact's email
or SMS status appends exactly one row per channel, with its source, in the change's own
transaction; nothing else appends one. One test per source, then the rules shared by all."""

from __future__ import annotations

import ast
import io
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import limits
from marketing_cli.services.contacts import bulk, consents, records
from marketing_cli.services.delivery import bounces, confirmation, tracking
from marketing_cli.services.sms import providers
from marketing_cli.services.sms import webhooks as sms_webhooks
from tests import factories as f

IPHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1"
TCPA = ("By checking this box I agree to receive recurring automated marketing texts and emails from Acme. "
        "Consent is not a condition of purchase. Reply STOP to cancel.")


def _new_rows(conn: sqlite3.Connection, contact_id: str, before: int) -> list[dict[str, Any]]:
    return f.consent_rows(conn, contact_id)[before:]


def _count(conn: sqlite3.Connection, contact_id: str) -> int:
    return len(f.consent_rows(conn, contact_id))


# --- one test per source ---------------------------------------------------------------------

def test_api_create_appends_an_email_row_and_an_sms_row_with_the_wording(conn: sqlite3.Connection,
                                                                         workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    made = records.create_contact(conn, ws, {"status": "SUBSCRIBED", "consent_text": TCPA,
                                             "fields": {"email_address": "ann@example.com",
                                                        "phone_number": "+14155550101"}})
    rows = f.consent_rows(conn, made["id"])
    assert [(r["channel"], r["consent"], r["status"], r["source"]) for r in rows] == [
        ("email", "given", "SUBSCRIBED", "api"), ("sms", "given", "SUBSCRIBED", "api")]
    assert {r["consent_text"] for r in rows} == {TCPA}
    assert all(r["ip"] is None and r["file_name"] is None and r["created_at"].endswith("Z") for r in rows)


def test_an_upsert_appends_one_row_per_changed_channel_and_none_when_nothing_changed(
        conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    made = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "status": "UNCONFIRMED"})
    assert [(r["channel"], r["consent"]) for r in f.consent_rows(conn, made["id"])] == [("email", "pending")]
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "status": "UNCONFIRMED",
                                      "partial_update": True, "fields": {"first_name": "Ann"}})
    assert _count(conn, made["id"]) == 1  # a field changed, no consent did
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "status": "UNSUBSCRIBED",
                                      "partial_update": True}, source="command")
    [row] = _new_rows(conn, made["id"], 1)
    assert (row["channel"], row["consent"], row["status"], row["source"]) == ("email", "revoked", "UNSUBSCRIBED",
                                                                              "command")
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "sms_status": "BLOCKED",
                                      "partial_update": True})
    [row] = _new_rows(conn, made["id"], 2)
    assert (row["channel"], row["status"], row["consent"], row["source"]) == ("sms", "BLOCKED", "revoked", "api")


def test_a_first_phone_number_gives_sms_consent_once(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    made = records.upsert_contact(conn, ws, {"email_address": "ann@example.com"})
    assert [r["channel"] for r in f.consent_rows(conn, made["id"])] == ["email"]
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "+14155550101",
                                      "partial_update": True, "consent_text": "Texts too, please."})
    [row] = _new_rows(conn, made["id"], 1)
    assert (row["channel"], row["status"], row["consent_text"]) == ("sms", "SUBSCRIBED", "Texts too, please.")
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "+14155550102",
                                      "partial_update": True})
    assert _count(conn, made["id"]) == 2  # another number, the same consent


def test_an_import_appends_rows_with_its_file_line_and_wording_in_one_statement(
        conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    existing = records.upsert_contact(conn, ws, {"email_address": "bob@example.com"})
    csv_text = ("email,phone_number,status\n"
                "ann@example.com,+14155550101,\n"          # line 2: new, with a phone: email + sms
                "bob@example.com,,UNSUBSCRIBED\n"          # line 3: bob's status changes
                "cid@example.com,,\n"                      # line 4: new, email only
                "bob@example.com,,UNSUBSCRIBED\n"          # line 5: the same again (merged, same batch)
                "dan@example.com,,\n")
    statements: list[str] = []
    conn_trace = getattr(conn, "set_trace_callback", None)
    if conn_trace is not None:
        conn.set_trace_callback(statements.append)
    try:
        result = bulk.import_contacts(conn, ws, io.StringIO(csv_text), consent_text=TCPA, file_name="spring.csv")
    finally:
        if conn_trace is not None:
            conn.set_trace_callback(None)
    assert (result["created"], result["updated"], result["skipped"]) == (3, 2, 0)
    rows = {(r["contact_id"], r["channel"]): r for r in conn.execute("SELECT * FROM contact_consents WHERE"
                                                                   " source = 'import'").fetchall()}
    ann = records.get_contact_by_phone(conn, ws, "+14155550101")["id"]
    assert {key[1] for key in rows if key[0] == ann} == {"email", "sms"}
    assert rows[(ann, "email")]["line"] == 2 and rows[(ann, "sms")]["line"] == 2
    bob = rows[(existing["id"], "email")]
    assert (bob["status"], bob["consent"], bob["line"], bob["file_name"]) == ("UNSUBSCRIBED", "revoked", 5, "spring.csv")
    assert (existing["id"], "sms") not in rows
    assert len(rows) == 5 and {r["consent_text"] for r in rows.values()} == {TCPA}
    if statements:  # SQLite: the batch's rows went in ONE statement, not one per contact
        assert sum("INSERT INTO contact_consents" in s for s in statements) == 1
    again = bulk.import_contacts(conn, ws, io.StringIO(csv_text), file_name="spring.csv")
    assert again["updated"] == 5
    assert conn.execute("SELECT count(*) FROM contact_consents WHERE source = 'import'").fetchone()[0] == 5


def test_a_dry_run_import_appends_nothing(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    bulk.import_contacts(conn, workspace["id"], io.StringIO("email\nann@example.com\n"), dry_run=True)
    assert conn.execute("SELECT count(*) FROM contact_consents").fetchone()[0] == 0


def test_confirmation_appends_one_row_with_the_persons_ip_and_user_agent(conn: sqlite3.Connection,
                                                                         workspace: dict[str, Any]) -> None:
    sent = f.sent_message(conn, workspace["id"])
    conn.execute("UPDATE contacts SET status = 'UNCONFIRMED' WHERE id = ?", (sent["contact_id"],))
    before = _count(conn, sent["contact_id"])
    confirmation.confirm(conn, sent["tokens"].confirm, ip="203.0.113.7", user_agent=IPHONE)
    confirmation.confirm(conn, sent["tokens"].confirm, ip="203.0.113.7", user_agent=IPHONE)  # twice: once
    [row] = _new_rows(conn, sent["contact_id"], before)
    assert (row["source"], row["channel"], row["status"], row["consent"]) == ("confirmation", "email", "SUBSCRIBED",
                                                                            "given")
    assert (row["ip"], row["user_agent"], row["campaign_id"]) == ("203.0.113.7", IPHONE, sent["campaign_id"])
    assert row["consent_text"] == confirmation.WORDING


@pytest.mark.parametrize(("body", "source"), [(b"List-Unsubscribe=One-Click", "unsubscribe_one_click"),
                                               (b"unsubscribe=page", "unsubscribe_page"),
                                               (b"", "unsubscribe_one_click")])
def test_an_unsubscribe_appends_one_row_saying_one_click_or_page(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                                 body: bytes, source: str) -> None:
    sent = f.sent_message(conn, workspace["id"])
    before = _count(conn, sent["contact_id"])
    tracking.unsubscribe(conn, sent["tokens"].unsubscribe, body=body, ip="198.51.100.2", user_agent="Gmail")
    tracking.unsubscribe(conn, sent["tokens"].unsubscribe, body=body)  # again: already unsubscribed
    [row] = _new_rows(conn, sent["contact_id"], before)
    assert (row["source"], row["status"], row["consent"], row["campaign_id"]) == (
        source, "UNSUBSCRIBED", "revoked", sent["campaign_id"])
    assert (row["ip"], row["user_agent"]) == ("198.51.100.2", "Gmail")
    assert row["consent_text"] == (tracking.PAGE_WORDING if source == "unsubscribe_page" else None)


def test_the_unsubscribe_page_posts_its_own_form(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    sent = f.sent_message(conn, workspace["id"])
    page = tracking.unsubscribe_page(conn, sent["tokens"].unsubscribe)
    field, value = re.search(r'<input type="hidden" name="([^"]+)" value="([^"]+)">', page).groups()
    assert f"{field}={value}".encode() == b"=".join(tracking.PAGE_FORM)


@pytest.mark.parametrize(("reply", "status"), [("STOP", "UNSUBSCRIBED"), ("start", "SUBSCRIBED")])
def test_an_sms_keyword_appends_one_row_with_the_reply(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                       reply: str, status: str) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    conn.execute("UPDATE workspaces SET tracking_url = 'https://t.example.com' WHERE id = ?", (ws,))
    providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN)
    [person] = f.sms_contacts(conn, ws, ["+14155550101"])
    if status == "SUBSCRIBED":
        records.upsert_contact(conn, ws, {"email_address": "p14155550101@example.com", "sms_status": "UNSUBSCRIBED",
                                          "partial_update": True})
    before = _count(conn, person["id"])
    params = {"From": "+14155550101", "To": "+15005550006", "Body": f" {reply} ", "AccountSid": f.TWILIO_SID,
              "MessageSid": "SM" + "1" * 32}
    signature = sms_webhooks.signature(f.TWILIO_TOKEN, "https://t.example.com" + sms_webhooks.INBOUND_PATH, params)
    for _ in range(2):  # the second one changes nothing
        sms_webhooks.twilio_inbound(conn, params, signature)
    [row] = _new_rows(conn, person["id"], before)
    assert (row["source"], row["channel"], row["status"], row["message_text"]) == ("sms_keyword", "sms", status,
                                                                                   f" {reply} ")


@pytest.mark.parametrize(("kind", "source", "status"), [("hard", "bounce", "CLEANED"),
                                                         ("complaint", "complaint", "COMPLAINED")])
def test_a_bounce_or_complaint_appends_one_row(conn: sqlite3.Connection, workspace: dict[str, Any], kind: str,
                                               source: str, status: str) -> None:
    sent = f.sent_message(conn, workspace["id"])
    before = _count(conn, sent["contact_id"])
    bounces.record_bounce(conn, workspace["id"], {"email_address": "ann@example.com", "type": kind})
    bounces.record_bounce(conn, workspace["id"], {"email_address": "ann@example.com", "type": kind})
    [row] = _new_rows(conn, sent["contact_id"], before)
    assert (row["source"], row["status"], row["consent"], row["campaign_id"]) == (source, status, "revoked",
                                                                                  sent["campaign_id"])


def test_soft_bounces_append_a_row_only_when_they_clean_the_address(conn: sqlite3.Connection,
                                                                     workspace: dict[str, Any]) -> None:
    sent = f.sent_message(conn, workspace["id"])
    before = _count(conn, sent["contact_id"])
    bounces.record_bounce(conn, workspace["id"], {"email_address": "ann@example.com", "type": "soft"})
    assert _count(conn, sent["contact_id"]) == before


# --- what every source shares ----------------------------------------------------------------

def test_consent_text_is_checked_before_anything_is_written(conn: sqlite3.Connection,
                                                            workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    too_long = "x" * (limits.CONSENT_TEXT + 1)
    for call in (lambda: records.create_contact(conn, ws, {"status": "SUBSCRIBED", "consent_text": too_long,
                                                           "fields": {"email_address": "ann@example.com"}}),
                 lambda: records.upsert_contact(conn, ws, {"email_address": "ann@example.com",
                                                           "consent_text": too_long}),
                 lambda: bulk.import_contacts(conn, ws, io.StringIO("email\nann@example.com\n"),
                                              consent_text=too_long)):
        with pytest.raises(MktError) as refused:
            call()
        assert (refused.value.status, refused.value.message) == (400, consents.CONSENT_TEXT_TOO_LONG)
    with pytest.raises(MktError) as wrong_type:
        records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "consent_text": 7})
    assert wrong_type.value.message == "The member 'consent_text' must be a string."
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM contact_consents").fetchone()[0] == 0
    exact = "  Yes, email me.\n" + "y" * (limits.CONSENT_TEXT - 17)  # at the limit, kept as written
    made = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "consent_text": exact})
    assert f.consent_rows(conn, made["id"])[0]["consent_text"] == exact


def test_a_refused_change_leaves_no_row(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "phone_number": "+14155550101"})
    with pytest.raises(MktError):  # the phone is Bob's: refused after the checks, inside the transaction
        records.create_contact(conn, ws, {"status": "SUBSCRIBED", "fields": {"email_address": "ann@example.com",
                                                                             "phone_number": "+14155550101"}})
    assert conn.execute("SELECT count(*) FROM contact_consents").fetchone()[0] == 2  # Bob's two


def test_the_ledgers_last_row_per_channel_is_every_contacts_status(conn: sqlite3.Connection,
                                                                   workspace: dict[str, Any]) -> None:
    """Every writer run once over a few contacts; the ledger then agrees with each contact."""
    ws = workspace["id"]
    f.sms_ready(conn, ws)
    sent = f.sent_message(conn, ws)
    records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "phone_number": "+14155550102",
                                      "status": "UNCONFIRMED", "sms_status": "BLOCKED"})
    bulk.import_contacts(conn, ws, io.StringIO("email,status,sms_status\nbob@example.com,SUBSCRIBED,SUBSCRIBED\n"
                                               "cid@example.com,COMPLAINED,\n"), file_name="x.csv")
    tracking.unsubscribe(conn, sent["tokens"].unsubscribe)
    bounces.record_bounce(conn, ws, {"email_address": "cid@example.com", "type": "hard"})
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "status": "SUBSCRIBED",
                                      "partial_update": True})
    contacts = conn.execute("SELECT id, status, sms_status, phone FROM contacts").fetchall()
    assert len(contacts) == 3
    for c in contacts:
        last = {}
        for r in f.consent_rows(conn, c["id"]):
            last[r["channel"]] = r["status"]
        assert last["email"] == c["status"], c["id"]
        if c["phone"] is not None or c["sms_status"] is not None:
            assert last["sms"] == (c["sms_status"] or "SUBSCRIBED")


@pytest.mark.parametrize(("before", "after", "found"), [
    (None, ("SUBSCRIBED", None, None), [("email", "SUBSCRIBED")]),
    (None, ("UNCONFIRMED", None, "+1415"), [("email", "UNCONFIRMED"), ("sms", "SUBSCRIBED")]),
    (None, ("SUBSCRIBED", "BLOCKED", None), [("email", "SUBSCRIBED"), ("sms", "BLOCKED")]),
    (("SUBSCRIBED", None, None), ("SUBSCRIBED", None, None), []),
    (("SUBSCRIBED", None, None), ("SUBSCRIBED", None, "+1415"), [("sms", "SUBSCRIBED")]),
    (("SUBSCRIBED", None, "+1415"), ("SUBSCRIBED", "SUBSCRIBED", "+1415"), []),  # unset reads as SUBSCRIBED
    (("SUBSCRIBED", "UNSUBSCRIBED", "+1415"), ("CLEANED", "UNSUBSCRIBED", "+1416"), [("email", "CLEANED")]),
    (("SUBSCRIBED", None, "+1415"), ("SUBSCRIBED", None, None), []),  # a number removed: no status changed
])
def test_what_counts_as_a_change(before: Any, after: Any, found: list[tuple[str, str]]) -> None:
    assert consents.changes(before, after) == found


def test_consent_of_each_status() -> None:
    assert [consents.consent_of("email", s) for s in records.STATUSES] == [
        "given", "revoked", "pending", "revoked", "revoked"]
    assert [consents.consent_of("sms", s) for s in records.SMS_STATUSES] == ["given", "revoked", "revoked", "revoked"]


# --- the writers -----------------------------------------------------------------------------

# The modules whose SQL writes a contact's `status` or `sms_status`, each of which appends the
# ledger's rows itself (consents.py says why not a trigger). A new writer fails this test
# until it is looked at: does it append the rows? Then add it here.
WRITERS = {
    "services/contacts/records.py",      # create, upsert
    "services/contacts/batches.py",      # import
    "services/delivery/tracking.py",     # unsubscribe (page, one-click)
    "services/delivery/confirmation.py",  # double opt-in
    "services/delivery/bounces.py",      # bounces, complaints
    "services/sms/replies.py",           # SMS replies: revocations (STOP, phrases), START / UNSTOP
}
_WRITES_STATUS = re.compile(r"(UPDATE\s+contacts\s+SET|INSERT\s+INTO\s+contacts\s*\()[^;]*?\b(?:sms_)?status\b",
                            re.IGNORECASE | re.DOTALL)


def _sql_texts(source: str) -> list[str]:
    """Each string literal of a module, an f-string's parts joined (its values as {})."""
    texts = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
    return texts


@pytest.mark.engine_neutral
def test_every_module_that_writes_a_status_appends_the_ledger() -> None:
    package = Path(__file__).resolve().parents[2] / "marketing_cli"
    writers = set()
    for path in package.rglob("*.py"):
        if any(_WRITES_STATUS.search(text) for text in _sql_texts(path.read_text(encoding="utf-8"))):
            writers.add(str(path.relative_to(package)))
    assert writers == WRITERS
    for module in WRITERS:
        assert "consents.append" in (package / module).read_text(encoding="utf-8"), module

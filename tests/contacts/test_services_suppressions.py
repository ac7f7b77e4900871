"""The suppression list (services/contacts/suppressions.py): keyed hashes only, what it refuses
(create, upsert, import rows) and what lets the person back (UNCONFIRMED, then a confirmation)."""

from __future__ import annotations

import io
import sqlite3
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import bulk, records, suppressions
from marketing_cli.services.privacy import erase
from tests import factories as f
from tests.engines import Recording

ANN = "ann@bücher.example"
SUPPRESSED = "This person asked to be erased: a new double opt-in confirmation is needed."


def _error(call: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as caught:
        call()
    return caught.value.status, caught.value.message


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.field(conn, workspace["id"], "phone_number", label="Phone", default_region="FR")
    return workspace["id"]


def test_only_a_keyed_hash_is_stored_and_shown_never_the_address(conn: sqlite3.Connection, ws: int) -> None:
    added = suppressions.add_suppression(conn, ws, {"email_address": " Ann@Bücher.example "})
    assert set(added) == {"id", "kind", "reason", "created_at"}
    assert (added["kind"], added["reason"]) == ("email", "added")
    row = conn.execute("SELECT * FROM suppressions").fetchone()
    assert "ann" not in " ".join(str(v) for v in row).lower() and len(row["digest"]) == 64
    # the same person however the domain is written (IDNA), and the same list entry found by it
    assert suppressions.list_suppressions(conn, ws, email_address="ANN@xn--bcher-kva.example") == [added]
    assert suppressions.list_suppressions(conn, ws, email_address="bob@bücher.example") == []
    assert suppressions.list_suppressions(conn, ws) == [added]
    phone = suppressions.add_suppression(conn, ws, {"phone_number": "06 12 34 56 78"})  # the field's region
    assert suppressions.list_suppressions(conn, ws, phone_number="+33612345678") == [phone]
    assert suppressions.list_suppressions(conn, ws, page=2, limit=1) == [phone]


def test_add_and_remove_errors(conn: sqlite3.Connection, ws: int) -> None:
    other = f.workspace(conn, "Other")["id"]
    added = suppressions.add_suppression(conn, ws, {"email_address": ANN})
    assert _error(lambda: suppressions.add_suppression(conn, ws, {"email_address": ANN.upper()})) == (
        409, f"This email address is already on the suppression list (suppression {added['id']}).")
    assert _error(lambda: suppressions.add_suppression(conn, ws, {})) == (
        400, "Please provide an email address or a phone number.")
    assert _error(lambda: suppressions.add_suppression(conn, ws, {"email_address": ANN, "phone_number": "+3361"})) == (
        400, "Please provide an email address or a phone number, not both.")
    assert _error(lambda: suppressions.add_suppression(conn, ws, {"email_address": "nope"}))[0] == 400
    assert _error(lambda: suppressions.add_suppression(conn, ws, {"phone_number": "12"}))[0] == 400
    holder = f.contact(conn, ws, "bob@example.org")
    assert _error(lambda: suppressions.add_suppression(conn, ws, {"email_address": "bob@example.org"})) == (
        409, f"Contact {holder['id']} holds this email address: erase it instead (mkt contacts erase {holder['id']}, "
             f"or DELETE /v1/contacts/{holder['id']}?suppress=true), which deletes it and keeps it on the suppression "
             "list.")
    assert _error(lambda: suppressions.list_suppressions(conn, ws, limit=1001)) == (
        400, "The limit must be an integer from 1 to 1000.")
    assert _error(lambda: suppressions.list_suppressions(conn, ws, page="x")) == (
        400, "The page must be a positive integer.")
    assert _error(lambda: suppressions.list_suppressions(conn, ws, page=suppressions.MAX_PAGE + 1)) == (
        400, "The page must be at most 1000000000.")
    assert _error(lambda: suppressions.remove_suppression(conn, other, added["id"])) == (404, "Not found.")
    assert _error(lambda: suppressions.remove_suppression(conn, ws, "abc")) == (404, "Not found.")
    assert suppressions.remove_suppression(conn, ws, str(added["id"])) == {"id": added["id"], "deleted": True}
    assert _error(lambda: suppressions.remove_suppression(conn, ws, added["id"])) == (404, "Not found.")
    phone = suppressions.add_suppression(conn, ws, {"phone_number": "+33612345678"})
    # the command line names an entry by the address it holds, digits included (a phone number)
    assert suppressions.remove_suppression(conn, ws, "0612345678", by_address=True)["id"] == phone["id"]
    assert suppressions.list_suppressions(conn, ws) == []


def test_a_suppressed_person_is_refused_unless_a_new_double_opt_in_starts(conn: sqlite3.Connection, ws: int) -> None:
    person = f.contact(conn, ws, ANN, phone_number="+33612345678")
    erase.erase_person(conn, ws, person["id"])
    create = {"status": "SUBSCRIBED", "fields": {"email_address": ANN}}
    assert _error(lambda: records.create_contact(conn, ws, create)) == (409, SUPPRESSED)
    assert _error(lambda: records.upsert_contact(conn, ws, {"email_address": "ANN@xn--bcher-kva.example"})) == (
        409, SUPPRESSED)
    other = {"email_address": "new@example.org", "phone_number": "06 12 34 56 78"}  # the phone is suppressed
    assert _error(lambda: records.upsert_contact(conn, ws, other)) == (409, SUPPRESSED)
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0
    # a form starting a new double opt-in: the person, UNCONFIRMED, and still on the list
    pending = records.create_contact(conn, ws, {"status": "UNCONFIRMED", "fields": {"email_address": ANN}})
    assert pending["status"] == "UNCONFIRMED"
    assert _error(lambda: records.upsert_contact(conn, ws, {"email_address": ANN, "status": "SUBSCRIBED",
                                                            "partial_update": True})) == (409, SUPPRESSED)
    merged = records.upsert_contact(conn, ws, {"email_address": ANN, "partial_update": True,
                                               "fields": {"first_name": "Ann"}})
    assert merged["status"] == "UNCONFIRMED"
    assert len(suppressions.list_suppressions(conn, ws)) == 2


def test_an_import_refuses_each_suppressed_row_with_its_line_and_goes_on(conn: sqlite3.Connection, ws: int) -> None:
    suppressions.add_suppression(conn, ws, {"email_address": "gone@example.org"})
    suppressions.add_suppression(conn, ws, {"phone_number": "+33612345678"})
    text = ("email,phone_number\n"
            "ok@example.org,\n"                     # line 2
            "GONE@example.org,\n"                   # 3
            "other@example.org,+33 6 12 34 56 78\n"  # 4: a suppressed number
            "fine@example.org,+33698765432\n")      # 5
    result = bulk.import_contacts(conn, ws, io.StringIO(text))
    assert (result["created"], result["skipped"]) == (2, 2)
    assert [(e["line"], e["reason"]) for e in result["errors"]] == [(3, SUPPRESSED), (4, SUPPRESSED)]
    assert sorted(r[0] for r in conn.execute("SELECT email FROM contacts")) == ["fine@example.org", "ok@example.org"]


def test_the_import_looks_the_list_up_once_per_batch(conn: sqlite3.Connection, ws: int) -> None:
    """Set-based: the batch's addresses are hashed in Python and looked up in one statement (and
    a workspace without suppressions pays one cheap query per batch, hashing nothing)."""
    text = "email\n" + "".join(f"p{i}@example.org\n" for i in range(300))
    recording = Recording(conn)
    bulk.import_contacts(recording, ws, io.StringIO(text), batch_size=100)
    assert sum("FROM suppressions" in sql for sql, _ in recording.seen) == 3  # 3 batches, the list empty
    suppressions.add_suppression(conn, ws, {"email_address": "someone@else.example"})
    recording = Recording(conn)
    result = bulk.import_contacts(recording, ws, io.StringIO(text.replace("@example.org", "@example.net")),
                                  batch_size=100)
    assert result["created"] == 300
    assert sum("FROM suppressions" in sql for sql, _ in recording.seen) == 6  # per batch: is it empty, the lookup

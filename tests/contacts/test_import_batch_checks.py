"""An import batch's references checked once per batch on PostgreSQL (services/contacts/batch_checks.py):
the same rows, ledger and counts with and without the per-row foreign key checks; the triggers
that must fire are ALWAYS; a reference that does not hold is still refused."""

from __future__ import annotations

import io
import json
import sqlite3
from typing import Any

import pytest

from marketing_cli.kernel import clock
from marketing_cli.services.account import billing, workspaces
from marketing_cli.services.contacts import batch_checks, bulk, consents, records
from marketing_cli.storage import dialect
from marketing_cli.storage.db import transaction
from tests import factories as f

CSV = ("email,phone_number,status,first_name,tags\n"
       "ann@example.com,+14155550101,,Ann,vip\n"      # new, with a phone: email + sms rows
       "bob@example.com,,UNSUBSCRIBED,,\n"             # existing: its status changes
       "cid@example.com,,,Cid,\n"                      # new, email only
       "bob@example.com,+14155550102,UNSUBSCRIBED,Bob,\n"  # the same key again: merged, gains a phone
       "dan@example.com,,,,vip\n"
       "eve@example.com,+14155550101,,,\n")            # ann's number: left out, eve goes in without it


def _imported(conn: sqlite3.Connection, ws: int) -> dict[str, Any]:
    """What an import left in the workspace, by email (ids differ between workspaces)."""
    tag_of = {str(r["id"]): r["merge_tag"] for r in conn.execute("SELECT id, merge_tag FROM fields WHERE workspace_id = ?",
                                                                (ws,))}
    contacts = {r["email"]: (r["phone"], r["status"], r["sms_status"], r["zone_cached"],
                             {tag_of[k]: v for k, v in json.loads(r["data"]).items()})
                for r in conn.execute("SELECT * FROM contacts WHERE workspace_id = ?", (ws,))}
    ledger = sorted((r["email"], r["channel"], r["consent"], r["status"], r["source"], r["line"], r["file_name"])
                    for r in conn.execute("SELECT c.email, l.* FROM contact_consents l JOIN contacts c"
                                          " ON c.id = l.contact_id WHERE l.workspace_id = ?", (ws,)))
    tagged = sorted(r[0] for r in conn.execute("SELECT c.email FROM contact_tags t JOIN contacts c"
                                               " ON c.id = t.contact_id WHERE c.workspace_id = ?", (ws,)))
    return {"contacts": contacts, "ledger": ledger, "tagged": tagged,
            "used": billing.remaining(conn, ws, "contacts")}


def _import(conn: sqlite3.Connection, ws: int, seen: list[str]) -> dict[str, Any]:
    f.sms_ready(conn, ws)
    records.upsert_contact(conn, ws, {"email_address": "bob@example.com"})
    conn.set_trace_callback(seen.append)
    try:
        result = bulk.import_contacts(conn, ws, io.StringIO(CSV), file_name="spring.csv", batch_size=2)
    finally:
        conn.set_trace_callback(None)
    assert (result["created"], result["updated"], result["skipped"]) == (4, 2, 0)
    assert result["cells_left_out"] == 1  # eve's number is ann's
    return _imported(conn, ws)


@pytest.mark.postgresql_only
def test_a_batch_writes_the_same_with_its_checks_once_as_with_the_per_row_checks(
        conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workspaces import the same file, one with the per-row checks, one checking once per
    batch: the same contacts, ledger rows, tags and usage; only the second turns the setting on
    (and back to DEFAULT around each statement) and locks the workspace row."""
    results, traces = {}, {}
    for may_skip in (False, True):
        monkeypatch.setattr(dialect, "may_skip_row_triggers", lambda c, may_skip=may_skip: may_skip)
        ws = workspaces.create_workspace(conn, f"ws {may_skip}")["workspace"]["id"]
        traces[may_skip] = []
        results[may_skip] = _import(conn, ws, traces[may_skip])
    assert results[True] == results[False]
    assert len(results[True]["contacts"]) == 5 and len(results[True]["ledger"]) == 8
    assert results[True]["tagged"] == ["ann@example.com", "dan@example.com"]
    for may_skip, seen in traces.items():
        replica = [s for s in seen if "session_replication_role" in s]
        locks = [s for s in seen if "FOR KEY SHARE" in s]
        # three batches: upsert and ledger on and off each (a batch's rows in one statement each)
        assert (len(replica), len(locks)) == ((12, 3) if may_skip else (0, 0))
    assert conn.execute("SHOW session_replication_role").fetchone()[0] == "origin"


@pytest.mark.postgresql_only
def test_contacts_and_the_ledger_have_no_trigger_that_a_batch_would_skip(conn: sqlite3.Connection) -> None:
    """Under session_replication_role = replica only ALWAYS triggers fire: every user trigger on
    contacts and contact_consents is ALWAYS (schema step 42); the ones skipped are the foreign
    keys' internal triggers, which the batch replaces by its lock and join."""
    rows = conn.execute("SELECT t.tgrelid::regclass::text, t.tgname, t.tgisinternal, p.proname, t.tgenabled::text"
                        " FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
                        " WHERE t.tgrelid IN ('contacts'::regclass, 'contact_consents'::regclass)").fetchall()
    user = {(r[0], r[1]): r[4] for r in rows if not r[2]}
    assert user == {("contacts", "contacts_count_insert"): "A", ("contacts", "contacts_count_delete"): "A",
                    ("contacts", "contacts_zone_stale"): "A"}
    assert all(r[3].startswith("RI_FKey_") for r in rows if r[2])
    assert batch_checks.triggers_always(conn) and batch_checks.checked_once(conn)


@pytest.mark.postgresql_only
def test_a_trigger_that_is_not_always_keeps_the_per_row_checks(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE contacts ENABLE TRIGGER contacts_count_insert")  # as a tool that re-enables them
    try:
        assert not batch_checks.triggers_always(conn) and not batch_checks.checked_once(conn)
    finally:
        conn.execute("ALTER TABLE contacts ENABLE ALWAYS TRIGGER contacts_count_insert")
    assert batch_checks.checked_once(conn)


@pytest.mark.postgresql_only
def test_a_ledger_row_of_a_missing_contact_or_workspace_is_still_refused(conn: sqlite3.Connection,
                                                                        workspace: dict[str, Any]) -> None:
    """Without the per-row checks the ledger's join refuses what they refused (a contact that does
    not exist), and a contact of another workspace too; the lock refuses a missing workspace."""
    ws = workspace["id"]
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    ann = records.upsert_contact(conn, ws, {"email_address": "ann@example.com"})["id"]
    bob = records.upsert_contact(conn, other, {"email_address": "bob@example.com"})["id"]
    before = conn.execute("SELECT count(*) FROM contact_consents").fetchone()[0]
    source = consents.Source("import", file_name="x.csv")
    for stranger in ("f" * 24, bob):
        with pytest.raises(sqlite3.IntegrityError), transaction(conn):
            consents.append_batch(conn, ws, [(ann, "email", "SUBSCRIBED", 2), (stranger, "email", "SUBSCRIBED", 3)],
                                  source, clock.now(), checked_once=True)
    with pytest.raises(sqlite3.IntegrityError), transaction(conn):
        batch_checks.lock_workspace(conn, other + 1000)
    assert conn.execute("SELECT count(*) FROM contact_consents").fetchone()[0] == before
    assert conn.execute("SHOW session_replication_role").fetchone()[0] == "origin"
    with transaction(conn):  # the rows that hold go in
        consents.append_batch(conn, ws, [(ann, "email", "SUBSCRIBED", 2)], source, clock.now(), checked_once=True)
    assert conn.execute("SELECT count(*) FROM contact_consents").fetchone()[0] == before + 1


@pytest.mark.sqlite_only
def test_sqlite_checks_per_row_as_before(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    """On SQLite nothing changes: no catalog read, the foreign keys checked per row."""
    assert not batch_checks.checked_once(conn)
    seen: list[str] = []
    result = _import(conn, workspace["id"], seen)
    assert not [s for s in seen if "session_replication_role" in s or "FOR KEY SHARE" in s]
    assert len(result["contacts"]) == 5 and len(result["ledger"]) == 8

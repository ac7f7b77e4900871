"""After an erase, the person is in no table: every table and every column the database's catalog
lists is read and searched for the email address, the phone number (in each form it is stored
or written) and a distinctive field value. A table added later that holds the person, and that
the erase does not cover, fails this test (the last test plants one and sees it found).

The statistics the person counted in do not change (campaign aggregates, SMS counts, a flow's)."""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.services.automations import stats as flow_stats
from marketing_cli.services.email import stats as email_stats
from marketing_cli.services.privacy import erase
from marketing_cli.services.sms import stats as sms_stats
from marketing_cli.storage import dialect
from tests import factories as f


def catalog_tables(conn: Any) -> list[str]:
    """Every table of the database, as its catalog lists them (no list written by hand)."""
    sql = ("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()" if dialect.postgresql(conn)
           else "SELECT name FROM sqlite_master WHERE type = 'table'")
    return sorted(row[0] for row in conn.execute(sql))


def findings(conn: Any, needles: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(table, column, needle) for each value of any table that holds one of `needles` (case
    ignored; text, and bytes read as Latin-1 so any byte sequence is searched)."""
    found = set()
    for table in catalog_tables(conn):
        cursor = conn.execute(f'SELECT * FROM "{table}"')
        for row in cursor.fetchall():
            for column, value in zip(row.keys(), row):
                if isinstance(value, (bytes, bytearray, memoryview)):
                    value = bytes(value).decode("latin-1")
                if not isinstance(value, str):
                    continue
                low = value.lower()
                found.update((table, column, needle) for needle in needles if needle in low)
    return sorted(found)


def statistics(conn: Any, ws: int, world: dict[str, Any]) -> dict[str, Any]:
    email = email_stats.get_campaign_statistics(conn, ws, world["campaign"])
    failed = email_stats.get_campaign_statistics(conn, ws, world["failed_campaign"])
    sms = sms_stats.campaign_statistics(conn, ws, world["sms_campaign"])
    flow = flow_stats.automation_stats(conn, ws, world["automation"])
    return {"email": email["aggregate"], "email_links": email["link_activity"],
            "email_breakdowns": [email[k] for k in ("clicks_by_country", "clicks_by_device_type", "clicks_by_os",
                                                    "delivered_by_provider")],
            "failed": failed["aggregate"], "variants": email["variant_stats"],
            "sms": sms["aggregate"], "sms_cost": sms["total_cost"], "sms_clicks": sum(
                r["total_clicks"] for r in sms["link_activity"]),
            "flow_entered": flow["entered"], "flow_steps": flow["versions"][0]["steps"][0]["outcomes"],
            "flow_runs": [s["runs"] for s in flow["versions"][0]["steps"]]}


def test_an_erased_person_is_in_no_table(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    world = f.person_with_everything(conn, ws)
    before = findings(conn, f.PERSON_NEEDLES)
    held = {table for table, _, _ in before}
    # the person was everywhere a person can be (so the walk below has something to miss)
    assert {"contacts", "contact_events", "email_messages", "sms_messages", "sms_outbox", "sms_links",
            "sms_clicks", "automation_webhooks", "test_email_sends"} <= held, held
    assert {needle for _, _, needle in before} >= set(f.PERSON_NEEDLES) - {"0612345678"}  # (E.164 is stored)
    counted = statistics(conn, ws, world)
    assert counted["email"]["opened"] == 1 and counted["email"]["clicked"] == 1 and counted["sms_clicks"] == 1

    assert erase.delete_contact(conn, ws, world["person"], "true") == {"id": world["person"], "deleted": True}

    assert findings(conn, f.PERSON_NEEDLES) == []
    after = statistics(conn, ws, world)
    assert after == counted
    assert flow_stats.automation_stats(conn, ws, world["automation"])["exit_reasons"] == {erase.ERASED_EXIT: 1}
    # what remains of the person: two keyed hashes, and the other contact is untouched
    assert [(r["kind"], r["reason"]) for r in conn.execute("SELECT kind, reason FROM suppressions ORDER BY kind")] == [
        ("email", "erased"), ("phone", "erased")]
    assert {table for table, _, _ in findings(conn, (f.OTHER_EMAIL,))} >= {"contacts", "email_messages"}


def test_a_table_holding_the_person_that_the_erase_misses_is_found(conn: sqlite3.Connection,
                                                                     workspace: dict[str, Any]) -> None:
    """The test of the test: a table a later step might add, holding the address, is not in the
    erase's list, and the walk finds it (by the catalog, not by a list of tables)."""
    ws = workspace["id"]
    person = f.contact(conn, ws, f.PERSON_EMAIL, first_name="Zoe")
    conn.execute("CREATE TABLE planted_notes (contact_id TEXT, note TEXT)")
    conn.execute("INSERT INTO planted_notes (contact_id, note) VALUES (?, ?)",
                 (person["id"], f"call {f.PERSON_EMAIL.upper()} back"))
    erase.delete_contact(conn, ws, person["id"])
    assert findings(conn, f.PERSON_NEEDLES) == [("planted_notes", "note", f.PERSON_EMAIL)]

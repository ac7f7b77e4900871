"""The contact a phone number names (values.contact_with_phone): the first made of those that
have it, found through contacts_phone, in every lookup by phone (GET /v1/contacts/by-phone, a
reference by number, a custom event's phone)."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.services.contacts import records, references, values
from marketing_cli.storage import db
from tests import factories

PHONE = "+14155550123"


def _two_with_one_number(conn: Any, ws: int) -> tuple[str, str]:
    """Two contacts, the later one given the earlier's number behind the service's back (an
    older database's data: the services refuse a number another contact has)."""
    factories.sms_ready(conn, ws, balance=None, sender=None)
    first = factories.contact(conn, ws, "a@example.com", phone_number=PHONE)
    later = factories.contact(conn, ws, "b@example.com")
    with db.transaction(conn):
        conn.execute("UPDATE contacts SET phone = ?, created_at = ? WHERE id = ?",
                     (PHONE, "2099-01-01T00:00:00.000Z", later["id"]))
        conn.execute("UPDATE contacts SET created_at = ? WHERE id = ?", ("2020-01-01T00:00:00.000Z", first["id"]))
    return first["id"], later["id"]


def test_every_lookup_by_phone_finds_the_first_contact_made(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    first, later = _two_with_one_number(conn, ws)
    assert values.contact_with_phone(conn, ws, PHONE)["id"] == first
    assert records.get_contact_by_phone(conn, ws, PHONE)["id"] == first
    assert references.contact_id(conn, ws, PHONE) == first
    with db.transaction(conn):
        conn.execute("UPDATE contacts SET created_at = ? WHERE id = ?", ("2019-01-01T00:00:00.000Z", later))
    assert values.contact_with_phone(conn, ws, PHONE, "id, created_at")["id"] == later
    assert values.contact_with_phone(conn, ws, "+14155550199") is None


@pytest.mark.sqlite_only  # the plan of SQLite's own planner
def test_the_lookup_seeks_the_phone_index(conn: Any, workspace: dict[str, Any]) -> None:
    plan = conn.execute("EXPLAIN QUERY PLAN SELECT id, created_at FROM contacts WHERE workspace_id = ? AND phone = ?",
                        (workspace["id"], PHONE)).fetchall()
    assert "contacts_phone" in " ".join(str(tuple(r)) for r in plan)

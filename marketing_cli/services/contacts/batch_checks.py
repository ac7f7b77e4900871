"""An import batch's references on PostgreSQL, checked once per batch instead of once per row.

Every row an import batch writes references its workspace (contacts.workspace_id,
contact_consents.workspace_id), and every consent ledger row its contact
(contact_consents.contact_id). PostgreSQL checks a foreign key per row written: a
`SELECT ... FOR KEY SHARE` of the referenced row, run through SPI. EXPLAIN (ANALYZE) of one
batch of 20,000 new contacts (issue 42's list, 2026-11-29): the upsert 1,507 ms, of which its
workspace checks 142 ms; the ledger's 36,600 rows 970 ms, of which the workspace checks 267 ms
and the contact checks 369 ms. Measured as the server's CPU over a 100,000-row import, the
ledger's statement was 22 us a contact against the upsert's 32.

Where the role may set `session_replication_role` (dialect.may_skip_row_triggers) and the
triggers that must fire whatever it says are ALWAYS (`triggers_always`), the batch's upsert and
ledger statements run with it set to `replica`, which skips those per-row checks, and the batch
gives what they guaranteed itself:

- the workspace: its row locked FOR KEY SHARE once per batch (`lock_workspace`: the lock each
  check took), so it cannot go before the batch commits; a missing one is an IntegrityError;
- the ledger's contacts: the ledger's INSERT ... SELECT joins each row to its contact (by id, in
  the batch's workspace), so a row whose contact is missing is not written and the count tells
  it: an IntegrityError, the batch rolled back (consents.append_batch). Each contact it names was
  written by the same transaction (the upsert, or the update of a contact found by phone), so
  no other transaction can delete it before the commit;
- contacts' own triggers (the usage counter, the kept time zone's staleness) are ENABLE ALWAYS
  (schema step 42) and fire under `replica` too. `triggers_always` reads the catalog once per
  import: should any user trigger on contacts or contact_consents not be ALWAYS (a later step
  that made one, a tool that re-enabled them), the batch keeps the per-row checks.

A role that may not set it keeps the per-row checks; either way the rows written are the same
(tests/contacts/test_import_batch_checks.py). The setting is `SET LOCAL`, back to DEFAULT after
each statement, and a rollback restores it. SQLite: nothing here (its checks stay per row).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from marketing_cli.storage import dialect

# The tables whose statements run with the per-row checks off; their user triggers must be ALWAYS.
TABLES = ("contacts", "contact_consents")
MISSING = "FOREIGN KEY constraint failed"  # SQLite's words for the same refusal


def triggers_always(conn: sqlite3.Connection) -> bool:
    """Whether every user trigger on TABLES fires under `replica` too (tgenabled 'A')."""
    names = ", ".join(f"'{t}'::regclass" for t in TABLES)
    return conn.execute(f"SELECT count(*) FROM pg_trigger WHERE tgrelid IN ({names})"
                        " AND NOT tgisinternal AND tgenabled <> 'A'").fetchone()[0] == 0


def checked_once(conn: sqlite3.Connection) -> bool:
    """Whether an import on this connection checks its references once per batch (see above)."""
    return dialect.postgresql(conn) and dialect.may_skip_row_triggers(conn) and triggers_always(conn)


def lock_workspace(conn: sqlite3.Connection, workspace_id: int) -> None:
    """The workspace's row locked FOR KEY SHARE until the batch commits (what each row's check took)."""
    if conn.execute("SELECT 1 FROM workspaces WHERE id = ? FOR KEY SHARE", (workspace_id,)).fetchone() is None:
        raise sqlite3.IntegrityError(MISSING)


@contextmanager
def row_checks_off(conn: sqlite3.Connection, on: bool) -> Iterator[None]:
    """The block's statements without their per-row foreign key checks (when `on`)."""
    if not on:
        yield
        return
    conn.execute("SET LOCAL session_replication_role = replica")
    yield
    conn.execute("SET LOCAL session_replication_role = DEFAULT")


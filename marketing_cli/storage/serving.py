"""What `mkt serve` asks of its database before it listens: that it may write it, and that
`mkt db copy --retire-source` did not retire it.

A server on a database it cannot write answers every read and refuses every write, and its
job worker fails every pass: a log full of tracebacks, and an operator who learns of it from
the clients. So serve stops first, with one line that says why, and exit status 1. The probe
is a write that changes nothing (`DELETE ... WHERE 1 = 0` in a write transaction): SQLite
refuses it on a file opened read-only (its mode, its folder's, a read-only mount: see
db._open_read_only) and under `PRAGMA query_only`, PostgreSQL on a standby or with
default_transaction_read_only on. File modes alone would not do: root writes through them.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage import db
from marketing_cli.storage.copy.retire import MARK, retired_message

READ_ONLY = {
    "sqlite": "mkt serve needs to write {target}, which is read-only: check the permissions of the database "
              "file and of its folder, and that its file system is not mounted read-only.",
    "postgresql": "mkt serve needs to write {target}, which is read-only: check that the PostgreSQL server "
                  "accepts writes (not a standby, default_transaction_read_only off).",
}


def check_servable(target: Any) -> None:
    """Raise the MktError serve stops with when the database `target` is read-only or retired."""
    conn = db.connect(target)
    try:
        retired = retired_message(conn)
        if retired is not None:
            raise MktError(409, f"mkt serve will not start: {retired}")
        try:
            with db.transaction(conn):
                conn.execute(f"DELETE FROM {MARK} WHERE 1 = 0")
        except sqlite3.OperationalError as exc:
            if db.storage_error(exc) is None or "read" not in str(exc).lower():
                raise
            engine = "postgresql" if db.is_postgresql(conn) else "sqlite"
            raise MktError(503, READ_ONLY[engine].format(target=target)) from None
    finally:
        conn.close()

"""Values kept while the database is unchanged: a per-connection cache with no expiry time.

`entries(conn)` is a dict for the connection that holds only what was read since the last
change to the database. A change is seen at once, whoever made it:

- another connection's commit, in this process or any other (`mkt keys revoke`, `mkt billing
  allowance set`, a worker thread's write): SQLite's `PRAGMA data_version` differs;
- this connection's own writes: its `total_changes` differs.

So a value taken from the dict is exactly what reading it again would give (the same rows),
at the cost of one PRAGMA instead of the reads. The check is made on every call: nothing is
kept for a time. A connection inside a transaction gets None (its own uncommitted writes are
not the database's state), and so does PostgreSQL, which has no such counter: callers then
read as before.

Values that depend on the time as well as on the rows (the current month's usage) must say
so in their key.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

MAX_ENTRIES = 4096  # a connection's dict is emptied past this many (keys of many workspaces)

_held = threading.local()  # per thread: (connection, its stamp, its dict)


def entries(conn: Any) -> dict[Any, Any] | None:
    """The connection's dict of values read since the database last changed (see above), or None."""
    if not isinstance(conn, sqlite3.Connection) or conn.in_transaction:
        return None
    stamp = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
    held = getattr(_held, "state", None)
    if held is None or held[0] is not conn or held[1] != stamp or len(held[2]) > MAX_ENTRIES:
        # A new dict, not the old one emptied: a caller still holding the old one (across an
        # await) can only store into a dict nobody reads any more.
        held = _held.state = (conn, stamp, {})
    return held[2]

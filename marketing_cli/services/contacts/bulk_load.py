"""What a large import changes in SQLite while it loads: the page cache, the checkpoints, and
the field indexes, built after the load instead of kept up row by row.

batches.py writes the batches; this module holds the settings around them:

- `import_cache`: the connection's page cache and automatic checkpoints while the import runs;
- `FieldIndexes`: the field indexes dropped for a large load into a small table and built
  again at its end (storage/deferred_indexes.py keeps it crash-safe).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from marketing_cli.kernel import clock
from marketing_cli.services.contacts.io_lock import renew_io_lock
from marketing_cli.storage import deferred_indexes, dialect, field_sql
from marketing_cli.storage.db import checkpoint_after, transaction

# The import's page cache (the connection's default is 2 MiB). It was 256 MiB, for the reasons
# batches.BATCH_SIZE gives; but it fills and stays (a million contacts are 824 MB on disk), and it made the
# import's peak RSS 379 MiB at 1,000,000 rows. At 32 MiB, with each batch written in email
# order (the email index's pages touched in order, once a batch), the import peaks at 122
# MiB at 1,000,000 rows and its CPU was 86 s against 104 s before (issue 42's list, with the
# temporary-table batches and the phone fast path; docs/performance.md).
# 24 MiB since the field indexes are built after a large load (FieldIndexes): the pages a batch
# touches at random are now the phone index's alone, and the parse worker added about 4 MiB to
# the importing process (200,000 rows: 123 MiB with it, 119 without, both at 32 MiB).
IMPORT_CACHE_KIB = 24_576

# A large import into a small table builds the field indexes after its load instead of keeping
# them up row by row (storage/deferred_indexes.py has the figures and the crash safety): once
# DEFER_AFTER_ROWS rows have been written, when the contacts table (every workspace's) holds at
# most DEFER_MAX_CONTACTS. Building them costs a pass over the whole table (0.83 s for 200,000
# contacts with four fields) and saves about 11 us a row written (2.3 s for 200,000), so the
# bounds keep the worst case small: an import just past DEFER_AFTER_ROWS into a table just
# under DEFER_MAX_CONTACTS pays about half a second for a build it did not need.
DEFER_AFTER_ROWS = 20_000
DEFER_MAX_CONTACTS = 100_000

# The page cache, and so the sorter's memory, while the field indexes are built (FieldIndexes.build).
BUILD_CACHE_KIB = 8_192

# The log file the import's connection leaves behind (see import_cache).


@contextmanager
def import_cache(conn: sqlite3.Connection) -> Iterator[None]:
    """SQLite, while the import runs: the connection's page cache at IMPORT_CACHE_KIB (see
    batches.BATCH_SIZE), and no automatic checkpoint between its batches.

    Each batch is one commit; with the default limit (1,000 pages) every commit copied the log
    into the database file and synced both, and the index pages the next batch changes again
    were copied each time. Without it the log holds the import's pages until the first commit
    after it (the io lock's release), which checkpoints once, as the SMS expansion does
    (sms/recipients.py). 200,000 rows of issue 42's list, in one process, alternated, load 6:
    wall 21.9 and 18.1 s with the limit, 16.2 and 13.3 s without; CPU 10.5-10.9 against
    10.3-10.6 s. A crash meanwhile loses nothing: the log is replayed when the file is next
    opened (storage/db.checkpoint_after). PostgreSQL: nothing to do."""
    row = conn.execute("PRAGMA cache_size").fetchone()
    if row is None:  # an engine without SQLite's page cache (PostgreSQL's is the server's)
        yield
        return
    cache_size = row[0]
    conn.execute(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
    try:
        with checkpoint_after(conn):
            yield
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache_size)}")


class FieldIndexes:
    """One import's field indexes: dropped before a batch once the import is large and the table
    small (DEFER_AFTER_ROWS, DEFER_MAX_CONTACTS), built again by `build`. SQLite only; a dry run
    changes nothing."""

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, dry_run: bool) -> None:
        self.conn = conn
        self.ws = workspace_id
        self.written = 0  # rows of the batches written so far
        self.deferred: str | None = None  # the io lock owner under which the field indexes were dropped
        self.may_defer = not dry_run and not dialect.postgresql(conn)

    def before_batch(self, owner: str) -> None:
        """Inside a batch's transaction, before it writes."""
        if self.may_defer and self.written >= DEFER_AFTER_ROWS:
            self._defer(owner)

    def _defer(self, owner: str) -> None:
        """Drop the field indexes for the rest of the load when the table is small (see
        DEFER_AFTER_ROWS), in the batch's transaction; asked once an import."""
        self.may_defer = False
        held = self.conn.execute("SELECT count(*) FROM (SELECT 1 FROM contacts LIMIT ?) AS c",
                                 (DEFER_MAX_CONTACTS + 1,)).fetchone()[0]
        if held <= DEFER_MAX_CONTACTS:
            deferred_indexes.defer(self.conn, owner, clock.now())
            self.deferred = owner

    def build(self, quietly: bool = False) -> None:
        """After the last batch (or an error or Ctrl-C after some were written): the field
        indexes dropped for the load built again, in one transaction. `quietly` (an error is
        on its way out): a failure to build is left to storage/deferred_indexes.repair, which
        the next connection runs, rather than hiding that error."""
        if self.deferred is None:
            return
        try:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            # SQLite's sorter (CREATE INDEX) holds up to the page cache's size in memory beside the
            # cache itself: 1,000,000 rows peaked at 132 MiB with both at 24 MiB. The load is over,
            # so the cache shrinks (import_cache sets it back) and the sorter with it.
            self.conn.execute(f"PRAGMA cache_size = -{BUILD_CACHE_KIB}")
            # One index a transaction, each renewing the io lock, so no transaction holds the
            # write lock (and keeps the lock's renewer out) for the whole build; the record goes
            # in the last, and until then a crash leaves the rest to the repair.
            for field_id in deferred_indexes.field_ids(self.conn):
                with transaction(self.conn):
                    field_sql.create_index(self.conn, field_id)
                    renew_io_lock(self.conn, self.ws, self.deferred)
            with transaction(self.conn):
                deferred_indexes.build(self.conn, self.deferred)
            self.deferred = None
        except Exception:
            if not quietly:
                raise

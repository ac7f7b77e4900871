"""The PostgreSQL engine: the same services on a `postgresql://` URL (docs/architecture.md, "Two engines").

The services speak one SQL: SQLite's, with `?` placeholders, as the embedded default runs it.
This package is the one place that knows PostgreSQL spells some of it differently, one module
per concern:

    url.py          `postgresql://` URLs, and `DatabaseUrl`, which prints without its password
    connection.py   `Connection`: answers the calls the services make of a sqlite3.Connection
                    (BEGIN IMMEDIATE under the writers' advisory lock, PRAGMAs, lastrowid, a
                    dropped connection replaced), and the session settings of every connection
    translate.py    SQLite's spelling of a statement as PostgreSQL's (cached per text)
    rows.py         rows by name or position, cursors, values in SQLite's types
    errors.py       PostgreSQL's errors as the sqlite3 classes; conflicts run again
    schema.py       the schema's version and its steps (schema.postgresql.sql)
    pool.py         the connections a server's threads share (`mkt serve`)

SQL functions that SQLite has and PostgreSQL lacks (`json_extract`, `instr`, ...) are created
in the schema (`schema.postgresql.sql`).

This `__init__` is the face the rest of mkt uses as `postgres.name` (storage/db.py and
storage/copy/ open connections, pools and URLs through it): it re-exports those names. A tunable
such as `connection.STATEMENT_TIMEOUT_MS` is read where it is defined: patch it there.
"""

from __future__ import annotations

from marketing_cli.storage.postgres.connection import CONNECT_ARGS, WRITE_LOCK, Connection, configure
from marketing_cli.storage.postgres.errors import (
    LOST,
    Conflict,
    DatabaseError,
    IntegrityError,
    OperationalError,
    retry_conflicts,
)
from marketing_cli.storage.postgres.pool import Pool
from marketing_cli.storage.postgres.schema import VERSION_TABLE, current_version, migrate
from marketing_cli.storage.postgres.translate import translate
from marketing_cli.storage.postgres.url import SCHEMES, DatabaseUrl, is_url

__all__ = ["CONNECT_ARGS", "LOST", "SCHEMES", "VERSION_TABLE", "WRITE_LOCK", "Conflict", "Connection",
           "DatabaseError", "DatabaseUrl", "IntegrityError", "OperationalError", "Pool", "configure",
           "current_version", "is_url", "migrate", "retry_conflicts", "translate"]

"""The SQL that differs between the engines, as small functions of the connection.

Most statements are written once, in SQLite's spelling, and translated for PostgreSQL by
`postgres.translate` (placeholders, INSERT OR IGNORE, IS / IS NOT, BEGIN IMMEDIATE) or served by
the SQL functions that schema.postgresql.sql creates (json_extract, json_each, json_patch,
instr, two-argument max/min). What cannot be translated word for word (a typed JSON value,
a bulk path, a function SQLite calls back into Python for) is chosen here, per engine, so
the services keep one code path and name no engine.
"""

from __future__ import annotations

from typing import Any


def postgresql(conn: Any) -> bool:
    """Whether the connection is PostgreSQL's (marketing_cli/postgres.Connection)."""
    return getattr(conn, "engine", "sqlite") == "postgresql"


# --- platform (jobs, leases, serve) -----------------------------------------------------------


# --- contacts -------------------------------------------------------------------------------


# --- email ----------------------------------------------------------------------------------


# --- sms ------------------------------------------------------------------------------------

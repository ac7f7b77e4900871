"""The operator log: what an operator did from the command line that the API may not do (SMS
quiet hours turned off, a campaign scheduled past the compliance gate), who did it and when.
`mkt sms quiet-hours show` lists it (services/sms/gate.operator_log)."""

from __future__ import annotations

import sqlite3

from marketing_cli.kernel import clock


def actor() -> str:
    """Who runs this process: getpass's answer (LOGNAME, USER ... or the password database)."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment (a container without one)
        return "unknown"


def record(conn: sqlite3.Connection, workspace_id: int, action: str, detail: str, *, at: str | None = None) -> str:
    """Write one entry (in the caller's transaction); returns the actor it names."""
    who = actor()
    conn.execute("INSERT INTO operator_log (workspace_id, actor, action, detail, created_at) VALUES (?, ?, ?, ?, ?)",
                 (workspace_id, who, action, detail, at or clock.now()))
    return who

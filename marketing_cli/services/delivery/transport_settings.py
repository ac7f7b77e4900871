"""The mail transport of a workspace: `mkt mail transport set|show` (operator only, no HTTP twin).

Mail used to go wherever the environment of the process running the job pointed: a cron
`mkt jobs run` without MKT_SMTP_URL wrote a real campaign to the outbox folder and reported
it delivered. The transport is now a setting of the workspace, stored like the SMS provider
(`mail_transport_settings`, schema step 13; the SMTP password in its own column, never
printed), and every process that sends asks `selection(conn, workspace_id)`. An SMTP URL given
to a process (`--smtp-url` / MKT_SMTP_URL) still wins over the stored setting (CONTRACT
section 3); `--outbox` / MKT_OUTBOX only places an outbox that is not stored with a folder of
its own. `show_transport` says which source won and why (the order: services/delivery/transport.py). With nothing stored, mail goes to the outbox beside the
database: trying mkt mails nobody.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.delivery.transport import (
    OUTBOX_ENV,
    SMTP_ENV,
    Selection,
    database_file,
    default_outbox_folder,
    mask_url,
    parse_smtp_url,
    select_transport,
)
from marketing_cli.storage.db import transaction

TRANSPORT_INVALID = "The mail transport must be outbox or an smtp:// or smtps:// URL, not '{value}'."
URL_INVALID = "The SMTP URL must look like smtp://[user:password@]host[:port] or smtps://..., not '{value}'."
QUERY_INVALID = "The SMTP URL takes the query members starttls, cafile, verify and timeout, not '{name}'."
PATH_WITH_SMTP = "Only the outbox takes a path."
PATH_INVALID = "The outbox path must be a folder, and '{path}' is a file."
QUERY_MEMBERS = ("starttls", "cafile", "verify", "timeout")

REASONS = {
    SMTP_ENV: "MKT_SMTP_URL (or --smtp-url) is set for this process: it overrides the workspace's transport.",
    OUTBOX_ENV: "MKT_OUTBOX (or --outbox) is set for this process and no SMTP server is stored or given: "
                "mail is written to that outbox.",
    "workspace": "Set for this workspace with `mkt mail transport set`.",
    "default": "No transport is set for this workspace: mail is written to the outbox and nothing leaves "
               "this machine (`mkt mail transport set smtp://...` sends it).",
}


def _row(conn: sqlite3.Connection, workspace_id: int | None) -> sqlite3.Row | None:
    if workspace_id is None:
        return None
    return conn.execute("SELECT * FROM mail_transport_settings WHERE workspace_id = ?", (workspace_id,)).fetchone()


def _with_password(url: str, password: str | None) -> str:
    """The stored URL (no password) with its password put back, as it was written."""
    if password is None:
        return url
    parts = urlsplit(url)
    user, _, hostport = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{hostport}"))


def _stored(row: sqlite3.Row | None) -> tuple[str, str | None] | None:
    if row is None:
        return None
    if row["transport"] == "smtp":
        return "smtp", _with_password(row["smtp_url"], row["smtp_password"])
    return "outbox", row["outbox_path"]


def selection(conn: sqlite3.Connection, workspace_id: int | None, *, smtp_url: str | None = None) -> Selection:
    """The transport a process sends a workspace's mail through (None: a process-wide answer)."""
    return select_transport(smtp_url=smtp_url, stored=_stored(_row(conn, workspace_id)), db_path=database_file(conn))


def _view(chosen: Selection) -> dict[str, Any]:
    return {"transport": chosen.kind, "url": chosen.shown_url,
            "path": str(chosen.folder) if chosen.kind == "outbox" else None}


def show_transport(conn: sqlite3.Connection, workspace_id: int | None) -> dict[str, Any]:
    """`mkt mail transport show`: the transport in use here, its source and why, and the stored one.

    {"transport": "smtp"|"outbox", "url": masked or null, "path": str or null, "source": one of
    transport.SOURCES, "reason": str, "stored": {"transport", "url", "path", "updated_at"} or null}
    """
    row = _row(conn, workspace_id)
    chosen = selection(conn, workspace_id)
    stored = None if row is None else {**_view(_stored_selection(conn, row)), "updated_at": row["updated_at"]}
    return {**_view(chosen), "source": chosen.source, "reason": REASONS[chosen.source], "stored": stored}


def _stored_selection(conn: sqlite3.Connection, row: sqlite3.Row) -> Selection:
    """The stored setting as the transport it names, whatever this process's environment says."""
    if row["transport"] == "smtp":
        return Selection("smtp", "workspace", smtp_url=_with_password(row["smtp_url"], row["smtp_password"]))
    folder = Path(row["outbox_path"]) if row["outbox_path"] else default_outbox_folder(database_file(conn))
    return Selection("outbox", "workspace", folder=folder)


def _split_password(url: str) -> tuple[str, str | None]:
    """(the URL without its password, the password as written) of a checked SMTP URL."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url, None
    user, password = userinfo.split(":", 1)
    return urlunsplit(parts._replace(netloc=f"{user}@{hostport}")), password


def _check_smtp_url(value: str) -> str:
    url = value.strip()
    try:
        parse_smtp_url(url)
    except ValueError:
        raise MktError(400, URL_INVALID.format(value=mask_url(url))) from None
    # A misspelt member would be read as its default: `start_tls=1` would send the password in clear.
    for name in parse_qs(urlsplit(url).query, keep_blank_values=True):
        if name not in QUERY_MEMBERS:
            raise MktError(400, QUERY_INVALID.format(name=name))
    return url


def _check_path(path: Any) -> str:
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise MktError(400, "The outbox path must be a folder name.")
    folder = Path(path.strip()).expanduser().absolute()  # relative to where the operator typed it
    if folder.exists() and not folder.is_dir():
        raise MktError(400, PATH_INVALID.format(path=folder))
    return str(folder)


def set_transport(conn: sqlite3.Connection, workspace_id: int, transport: Any, *,
                  path: Any = None) -> dict[str, Any]:
    """`mkt mail transport set smtp://...|outbox [--path DIR]`; answers what `show_transport` answers."""
    if not isinstance(transport, str):
        raise MktError(400, TRANSPORT_INVALID.format(value=transport))
    if transport.strip().lower() == "outbox":
        values: tuple[Any, ...] = ("outbox", None, None, None if path is None else _check_path(path))
    elif urlsplit(transport.strip()).scheme.lower() in ("smtp", "smtps"):
        if path is not None:
            raise MktError(400, PATH_WITH_SMTP)
        values = ("smtp", *_split_password(_check_smtp_url(transport)), None)
    else:
        raise MktError(400, TRANSPORT_INVALID.format(value=mask_url(transport)))
    with transaction(conn):
        conn.execute(
            "INSERT INTO mail_transport_settings (workspace_id, transport, smtp_url, smtp_password, outbox_path,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (workspace_id) DO UPDATE SET"
            " transport = excluded.transport, smtp_url = excluded.smtp_url, smtp_password = excluded.smtp_password,"
            " outbox_path = excluded.outbox_path, updated_at = excluded.updated_at",
            (workspace_id, *values, clock.now()))
    return show_transport(conn, workspace_id)

"""Contact export to CSV or JSON Lines (`mkt contacts export`, GET /v1/contacts/export).

The export streams: contacts are read a chunk at a time in (created_at, id) order
(keyset pagination), so memory holds one chunk whatever the workspace's size. A running
export holds the workspace's io lock (services/contacts/io_lock.py), kept alive by a
renewer thread for as long as the export runs, however slowly its reader consumes it.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import values
from marketing_cli.services.contacts.checks import UNKNOWN_MERGE_TAG
from marketing_cli.services.contacts.columns import TAG_SEPARATOR
from marketing_cli.services.contacts.io_lock import HeldLock
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, Field, FieldMap
from marketing_cli.services.contacts.view import render_contacts

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

EXPORT_FORMATS = ("csv", "jsonl")
EXPORT_CHUNK = 5_000
EXPORT_META = ("status", "sms_status", "tags", "created_at", "updated_at")
_EXPORT_SELECT = (
    "SELECT * FROM contacts WHERE workspace_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?"
)


def _csv_text(value: Any) -> str:
    """A stored value as the CSV cell the importer reads back to the same value."""
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)  # dropdown options never hold a comma
    return str(value)


def iter_contact_rows(conn: sqlite3.Connection, workspace_id: int,
                      chunk_size: int = EXPORT_CHUNK) -> Iterator[list[sqlite3.Row]]:
    """The workspace's contacts rows in (created_at, id) order, a chunk at a time.

    Keyset pagination: each chunk is one range read of the contacts_created index, so the
    last chunk of a million costs what the first does, and memory holds one chunk.
    """
    after = ("", "")
    while True:
        rows = conn.execute(_EXPORT_SELECT, (workspace_id, *after, chunk_size)).fetchall()
        if rows:
            yield rows
        if len(rows) < chunk_size:
            return
        after = (rows[-1]["created_at"], rows[-1]["id"])


def _tag_names_of(conn: sqlite3.Connection, contact_ids: list[str]) -> dict[str, str]:
    names: dict[str, list[str]] = {}
    for t in conn.execute(
        "SELECT ct.contact_id, t.name FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id"
        " WHERE ct.contact_id IN (SELECT value FROM json_each(?)) ORDER BY t.id",
        (_dumps(contact_ids),),
    ):
        names.setdefault(t["contact_id"], []).append(t["name"])
    return {cid: TAG_SEPARATOR.join(n) for cid, n in names.items()}


class ContactExport:
    """A validated export holding the workspace's import/export lock (from begin_export).

    `chunks(conn)` yields the output as text, the header (CSV) then one piece per chunk of
    contacts; `release(conn)` gives the lock back and must run whatever happens (the CLI
    writes the pieces to a file, the API streams them; a closed generator needs no cleanup).
    """

    def __init__(self, workspace_id: int, fmt: str, field_map: FieldMap, chosen: list[Field],
                 limited: bool, lock: HeldLock) -> None:
        self.workspace_id = workspace_id
        self.fmt = fmt
        self.field_map = field_map
        self.limited = limited  # `fields` was given: JSON Lines `data` holds only those
        self.lock = lock
        self.exported = 0
        # (merge tag, data key; None for the email/phone columns)
        self.getters = [(f.merge_tag, None if f.merge_tag in (EMAIL_TAG, PHONE_TAG) else str(f.id)) for f in chosen]
        self.meta = [m for m in EXPORT_META if m not in field_map.by_tag]  # a field named like one wins
        self.wanted = [f.merge_tag for f in chosen]

    def chunks(self, conn: sqlite3.Connection, chunk_size: int = EXPORT_CHUNK,
               progress: Callable[[int], None] | None = None) -> Iterator[str]:
        ws, meta, getters = self.workspace_id, self.meta, self.getters
        buffer = writer = None
        if self.fmt == "csv":
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            writer.writerow(self.wanted + meta)
            yield buffer.getvalue()
        for rows in iter_contact_rows(conn, ws, chunk_size):
            if writer is not None:
                buffer.seek(0)
                buffer.truncate()
                tag_names = _tag_names_of(conn, [r["id"] for r in rows]) if "tags" in meta else {}
                out_rows = []
                for r in rows:
                    data = json.loads(r["data"])
                    cells = []
                    for tag, key in getters:
                        if key is None:
                            cells.append(r["email" if tag == EMAIL_TAG else "phone"] or "")
                        else:
                            cells.append(_csv_text(data.get(key)))
                    for m in meta:
                        if m == "sms_status":
                            cells.append(r["sms_status"] or "SUBSCRIBED")
                        elif m == "tags":
                            cells.append(tag_names.get(r["id"], ""))
                        else:
                            cells.append(r[m])
                    out_rows.append(cells)
                writer.writerows(out_rows)
                text = buffer.getvalue()
            else:
                views = render_contacts(conn, ws, rows, "detail", self.field_map)
                if self.limited:
                    for view in views:
                        view["data"] = {tag: view["data"].get(tag) for tag in self.wanted}
                text = "\n".join(_dumps(v) for v in views) + "\n"
            self.exported += len(rows)
            if progress is not None:
                progress(self.exported)
            yield text

    def release(self, conn: sqlite3.Connection) -> None:
        self.lock.release(conn)

    def result(self) -> dict[str, Any]:
        return {"exported": self.exported, "format": self.fmt}


def begin_export(conn: sqlite3.Connection, workspace_id: int, *, fmt: str = "csv",
                 fields: list[str] | None = None) -> ContactExport:
    """Check the format and the merge tags (400), then take the io lock (409)."""
    if fmt not in EXPORT_FORMATS:
        raise MktError(400, f"The export format must be one of: {', '.join(EXPORT_FORMATS)}.")
    field_map = values.load_fields(conn, workspace_id)
    if fields:
        chosen: list[Field] = []
        for tag in fields:
            f = field_map.by_tag.get(tag.strip())
            if f is None:
                raise MktError(400, UNKNOWN_MERGE_TAG.format(tag=tag.strip()))
            if f not in chosen:
                chosen.append(f)
    else:
        chosen = list(field_map.by_id.values())
    lock = HeldLock(conn, workspace_id, "export")
    return ContactExport(workspace_id, fmt, field_map, chosen, bool(fields), lock)


def export_contacts(
    conn: sqlite3.Connection,
    workspace_id: int,
    out: TextIO,
    *,
    fmt: str = "csv",
    fields: list[str] | None = None,
    chunk_size: int = EXPORT_CHUNK,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Stream every contact of the workspace to `out` as CSV or JSON Lines.

    CSV: a header of merge tags (every field in display order, or `fields`) then status,
    sms_status, tags (names joined by ';'), created_at, updated_at; each value written the
    way the importer reads it back. JSON Lines: one contact per line in the API's shape
    (GET /v1/contacts/:id), `data` limited to `fields` when given.
    Returns {"exported": n, "format": fmt}.
    """
    export = begin_export(conn, workspace_id, fmt=fmt, fields=fields)
    try:
        out.writelines(export.chunks(conn, chunk_size, progress))
    finally:
        export.release(conn)
    return export.result()

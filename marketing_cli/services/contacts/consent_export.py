"""The consent ledger, read: a contact's rows, the workspace's rows over a time range, as CSV.

    GET /v1/contacts/{id}/consents     mkt contacts consents ID     one contact, oldest first
    GET /v1/consents?since=&until=     mkt consents export --since  the workspace, oldest first
                                                                    (the command writes CSV)

consents.py writes the rows (and says why services write them); this module only reads.
Both lists are oldest first, as a ledger reads, and page with `after_id` (the last row's id
of the page before) and `limit`: a contact's rows by id (index contact_consents_contact);
the workspace's by (created_at, id) on contact_consents_workspace, so a page costs the same
however far into the range it is (the cursor's created_at is read back from its row; when
that row went with an erased contact meanwhile, the page goes on with the rows of higher
id). A range that ends before it starts holds nothing.
The workspace's rows carry the contact's current email address and phone number, which an
auditor looks for; a contact's own rows do not repeat them.

The CSV holds text that strangers wrote (an SMS reply, a user agent): a cell that a
spreadsheet would run as a formula (it begins with = + - @, a tab or a carriage return)
is written with a leading apostrophe (OWASP's advice for CSV injection). The JSON rows of
the API are the exact values.
"""

from __future__ import annotations

import csv
import io
import re
import sqlite3
from collections.abc import Iterator
from datetime import date, datetime, timezone
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.services.contacts.records import CONTACT_ID_INVALID, CONTACT_NOT_FOUND

DEFAULT_LIMIT = 100
MAX_LIMIT = 1_000
LIMIT_RANGE = f"The limit must be between 1 and {MAX_LIMIT}."
AFTER_ID_INVALID = "after_id must be the id of a consent row (an integer, 0 or more)."
TIME_INVALID = "{name} must be a date (YYYY-MM-DD) or an RFC 3339 timestamp."
ROW_COLUMNS = ("id", "contact_id", "channel", "consent", "status", "source", "consent_text", "file_name", "line",
               "message_text", "campaign_id", "ip", "user_agent", "created_at")
# The auditor's CSV: when, who, what, where from (the API's rows, in this order).
EXPORT_COLUMNS = ("id", "created_at", "contact_id", "email_address", "phone_number", "channel", "consent", "status",
                  "source", "consent_text", "file_name", "line", "message_text", "campaign_id", "ip", "user_agent")


def _check_page(after_id: Any, limit: Any) -> tuple[int, int]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise MktError(400, LIMIT_RANGE)
    if after_id is None:
        return 0, limit
    if isinstance(after_id, bool) or not isinstance(after_id, int) or not 0 <= after_id < 2**63:
        raise MktError(400, AFTER_ID_INVALID)
    return after_id, limit


def _row(row: sqlite3.Row, columns: tuple[str, ...]) -> dict[str, Any]:
    return {name: row[name] for name in columns}


def list_contact_consents(conn: sqlite3.Connection, workspace_id: int, contact_id: Any, *, after_id: Any = None,
                          limit: Any = DEFAULT_LIMIT) -> list[dict[str, Any]]:
    """GET /v1/contacts/:id/consents: the contact's ledger, oldest first, `limit` rows after `after_id`."""
    contact_id = parse_hex_id(contact_id, CONTACT_ID_INVALID)
    after, limit = _check_page(after_id, limit)
    if conn.execute("SELECT 1 FROM contacts WHERE id = ? AND workspace_id = ?",
                    (contact_id, workspace_id)).fetchone() is None:
        raise MktError(404, CONTACT_NOT_FOUND)
    rows = conn.execute(f"SELECT {', '.join(ROW_COLUMNS)} FROM contact_consents WHERE contact_id = ?"
                        " AND workspace_id = ? AND id > ? ORDER BY id LIMIT ?",
                        (contact_id, workspace_id, after, limit)).fetchall()
    return [_row(r, ROW_COLUMNS) for r in rows]


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def parse_moment(value: Any, name: str) -> str | None:
    """A date (midnight UTC) or an RFC 3339 timestamp, as the ledger's created_at is written."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not (_DATE.fullmatch(value) or _TIMESTAMP.fullmatch(value)):
        raise MktError(400, TIME_INVALID.format(name=name))
    text = value if value[17:19] != "60" else value[:17] + "59" + value[19:]  # a leap second: its :59
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return _stamp(datetime(day.year, day.month, day.day, tzinfo=timezone.utc))
        return _stamp(clock.parse_ts(text))
    except OverflowError:  # a moment of year 1 or 9999 that UTC moves out of range: the range's end
        return "0000" if text.startswith("0") else "9999-12-31T23:59:59.999Z"
    except ValueError:
        raise MktError(400, TIME_INVALID.format(name=name)) from None


def _stamp(moment: datetime) -> str:
    """clock.format_ts's text for any year (strftime writes years below 1000 without their zeros)."""
    m = moment.astimezone(timezone.utc)
    return (f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}."
            f"{m.microsecond // 1000:03d}Z")


def _range(since: Any, until: Any) -> tuple[str, str | None]:
    """(since, until) as created_at text; since left out is the beginning."""
    return parse_moment(since, "since") or "", parse_moment(until, "until")


_EXPORT = ("SELECT r.id, r.created_at, r.contact_id, c.email AS email_address, c.phone AS phone_number, r.channel,"
           " r.consent, r.status, r.source, r.consent_text, r.file_name, r.line, r.message_text, r.campaign_id,"
           " r.ip, r.user_agent FROM contact_consents r JOIN contacts c ON c.id = r.contact_id"
           " WHERE r.workspace_id = ? AND r.created_at >= ?")


def list_consents(conn: sqlite3.Connection, workspace_id: int, *, since: Any, until: Any = None,
                  after_id: Any = None, limit: Any = DEFAULT_LIMIT) -> list[dict[str, Any]]:
    """GET /v1/consents: the workspace's ledger from `since` (inclusive; default: the first row)
    to `until` (exclusive; default: the last), oldest first, each row with the contact's email
    address and phone number."""
    start, end = _range(since, until)
    after, limit = _check_page(after_id, limit)
    return _page(conn, workspace_id, start, end, after, limit)


def _page(conn: sqlite3.Connection, workspace_id: int, start: str, end: str | None, after: int,
          limit: int) -> list[dict[str, Any]]:
    sql, params = _EXPORT, [workspace_id, start]
    if end is not None:
        sql += " AND r.created_at < ?"
        params.append(end)
    if after:
        cursor = conn.execute("SELECT created_at FROM contact_consents WHERE id = ? AND workspace_id = ?",
                              (after, workspace_id)).fetchone()
        if cursor is None:
            sql += " AND r.id > ?"
            params.append(after)
        else:
            sql += " AND (r.created_at > ? OR (r.created_at = ? AND r.id > ?))"
            params += [cursor[0], cursor[0], after]
    rows = conn.execute(sql + " ORDER BY r.created_at, r.id LIMIT ?", (*params, limit)).fetchall()
    return [_row(r, EXPORT_COLUMNS) for r in rows]


def list_all_consents(conn: sqlite3.Connection, workspace_id: int, *, since: Any,
                      until: Any = None) -> list[dict[str, Any]]:
    """Every row of list_consents over the range, its pages joined (`mkt consents export --json`)."""
    start, end = _range(since, until)
    rows: list[dict[str, Any]] = []
    while True:
        page = _page(conn, workspace_id, start, end, rows[-1]["id"] if rows else 0, MAX_LIMIT)
        rows += page
        if len(page) < MAX_LIMIT:
            return rows


def export_consents_csv(conn: sqlite3.Connection, workspace_id: int, *, since: Any,
                        until: Any = None) -> ConsentCsv:
    """`mkt consents export`: the rows of list_consents over the whole range as CSV text, a
    header line and then one chunk per page of MAX_LIMIT rows (the range is checked here,
    before the first chunk); `.rows` counts the rows written so far."""
    start, end = _range(since, until)
    return ConsentCsv(conn, workspace_id, start, end)


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_STARTS) else value


class ConsentCsv:
    """The CSV chunks of one export, read page by page as they are iterated."""

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, start: str, end: str | None) -> None:
        self.conn, self.workspace_id, self.start, self.end = conn, workspace_id, start, end
        self.rows = 0

    def __iter__(self) -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(EXPORT_COLUMNS)
        after = 0
        while True:
            rows = _page(self.conn, self.workspace_id, self.start, self.end, after, MAX_LIMIT)
            writer.writerows([_cell(row[name]) for name in EXPORT_COLUMNS] for row in rows)
            self.rows += len(rows)
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
            if len(rows) < MAX_LIMIT:
                return
            after = rows[-1]["id"]

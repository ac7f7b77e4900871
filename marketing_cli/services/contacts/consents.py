"""The consent ledger, written: one row per change of a contact's email or SMS consent.

    contacts.status       the email consent: SUBSCRIBED given, UNCONFIRMED pending (a double
                          opt-in asked for, not confirmed), anything else revoked
    contacts.sms_status   the SMS consent, NULL read as SUBSCRIBED: SUBSCRIBED given, else revoked

Every service that changes either column calls `append` (or `append_batch`, the import)
inside the transaction of the change, with a `Source`: where the change came from
(`SOURCES`), the wording the person was shown (`consent_text`), and what the source can
prove (the import's file and line, the SMS reply's text, the campaign whose link was used,
the IP address and user agent of the person's own request). A row is never updated; it goes
only with its contact (deleting a contact erases it: schema step 32's ON DELETE CASCADE).
consent_export.py reads the ledger for the faces.

Why the services write the rows and not a trigger on `contacts`. A trigger would catch
every writer, a new one included, but it knows only the row: not the file and line of an
import, the wording, the reply's text, the person's IP address. It would need a context set
per transaction, and SQLite has none (no session variables; a main-schema trigger cannot
read a connection's temp table), so each connection would have to install TEMP triggers and
a context table, and a forgotten context would be read by the next transaction. The
services know all of it where they make the change, and the import writes a batch's rows in
one INSERT ... SELECT beside its one upsert, not one trigger run per contact. What a
trigger would have guaranteed is kept by tests instead (tests/contacts/test_services_consents.py):
each writer, run once, appends exactly one row with its source; after all of them the
ledger's last row per channel agrees with every contact's status; and a scan of the code
lists the modules whose SQL writes either column (WRITERS): a new one fails it until it is
looked at.

What counts as a change (`changes`): a new contact has an email row, and an SMS row when
it has a phone number or an SMS status; later, a row for each channel whose consent
(status) changed, and an SMS row when a contact gains its first phone number (from then on
it can be texted). Writing the same status again appends nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, limits
from marketing_cli.kernel.inputs import check_unicode, type_error
from marketing_cli.services.contacts import batch_checks
from marketing_cli.storage import dialect

CHANNELS = ("email", "sms")
CONSENTS = ("given", "pending", "revoked")
# Where a change came from. api / command: POST /v1/contacts(/upsert) and `mkt contacts
# create|upsert` (an operator's command); import: either face's import, with file and line;
# confirmation: the double opt-in link's POST; unsubscribe_one_click: RFC 8058's POST of the
# List-Unsubscribe URL; unsubscribe_page: the unsubscribe page's button; sms_keyword: an
# inbound SMS (STOP, START ...), with its text; bounce / complaint: a hard bounce (or the
# last of SOFT_BOUNCE_LIMIT soft ones) and a complaint, when they change the status.
SOURCES = ("api", "command", "import", "confirmation", "unsubscribe_one_click", "unsubscribe_page",
           "sms_keyword", "bounce", "complaint")
CONSENT_TEXT_TOO_LONG = (f"The member 'consent_text' can hold at most {limits.CONSENT_TEXT:,} characters "
                         "(the wording shown when consent was collected).")
MAX_MESSAGE_TEXT = 1_600  # an SMS reply is kept as received up to the longest text Twilio carries
MAX_USER_AGENT = 512
MAX_FILE_NAME = 255

_COLUMNS = ("workspace_id, contact_id, channel, consent, status, source, consent_text, file_name, line,"
            " message_text, campaign_id, ip, user_agent, created_at")
_APPEND = f"INSERT INTO contact_consents ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_BATCH_COLUMNS = (("contact_id", "TEXT"), ("channel", "TEXT"), ("status", "TEXT"), ("line", "BIGINT"))
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(frozen=True)
class Source:
    """Where a change came from and what it can prove (the columns of its rows)."""

    kind: str
    consent_text: str | None = None
    file_name: str | None = None
    message_text: str | None = None
    campaign_id: str | None = None
    ip: str | None = None
    user_agent: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in SOURCES:
            raise ValueError(f"unknown consent source {self.kind!r}")


def consent_of(channel: str, status: str) -> str:
    """given, pending or revoked: what a status means for the channel's consent."""
    if status == "SUBSCRIBED":
        return "given"
    if status == "UNCONFIRMED" and channel == "email":
        return "pending"
    return "revoked"


State = tuple[str, "str | None", "str | None"]  # (status, sms_status, phone) of a contact


def changes(before: State | None, after: State) -> list[tuple[str, str]]:
    """(channel, status) of each consent a write changed; `before` is None for a new contact."""
    found = []
    if before is None or before[0] != after[0]:
        found.append(("email", after[0]))
    sms_after = after[1] or "SUBSCRIBED"
    textable = after[1] is not None or after[2] is not None
    if before is None:
        if textable:
            found.append(("sms", sms_after))
    elif textable:
        was_textable = before[1] is not None or before[2] is not None
        if not was_textable or (before[1] or "SUBSCRIBED") != sms_after:
            found.append(("sms", sms_after))
    return found


def check_consent_text(value: Any, name: str = "consent_text") -> str | None:
    """The optional wording (a body member, a query parameter, an option), kept as written (it is
    evidence): at most limits.CONSENT_TEXT characters; None when absent or empty."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise type_error(name, str)
    check_unicode(value, name)
    if len(value) > limits.CONSENT_TEXT:
        raise MktError(400, CONSENT_TEXT_TOO_LONG)
    return value or None


def _clip(text: str | None, size: int) -> str | None:
    return None if text is None else text[:size]


def append(conn: sqlite3.Connection, workspace_id: int, contact_id: str, found: Iterable[tuple[str, str]],
           source: Source, *, line: int | None = None, at: str | None = None) -> int:
    """Append a row per (channel, status) of `found`, inside the caller's transaction; how many."""
    now = at or clock.now()
    rows = [(workspace_id, contact_id, channel, consent_of(channel, status), status, source.kind,
             source.consent_text, _clip(source.file_name, MAX_FILE_NAME), line,
             _clip(source.message_text, MAX_MESSAGE_TEXT), source.campaign_id, source.ip,
             _clip(source.user_agent, MAX_USER_AGENT), now) for channel, status in found]
    if rows:
        conn.executemany(_APPEND, rows)
    return len(rows)


def append_batch(conn: sqlite3.Connection, workspace_id: int, rows: list[tuple[str, str, str, int | None]],
                 source: Source, at: str, *, checked_once: bool = False) -> None:
    """An import batch's rows, (contact id, channel, status, line) each, in ONE INSERT ... SELECT
    (on PostgreSQL through COPY into a temporary table), inside the batch's transaction.

    `checked_once` (PostgreSQL, batch_checks.py): the statement runs without its per-row foreign
    key checks and joins each row to its contact in the workspace instead; a row whose contact is
    missing makes the statement write fewer rows than given, an IntegrityError (the caller has
    locked the workspace's row)."""
    if not rows:
        return
    source_sql, params = dialect.contacts_batch_source(conn, "mkt_batch_consents", _BATCH_COLUMNS, rows, _dumps)
    joined = " JOIN contacts c ON c.id = b.contact_id AND c.workspace_id = ?" if checked_once else ""
    with batch_checks.row_checks_off(conn, checked_once):
        written = conn.execute(
            f"INSERT INTO contact_consents ({_COLUMNS})"
            " SELECT ?, b.contact_id, b.channel,"
            # consent_of, in SQL
            " CASE WHEN b.status = 'SUBSCRIBED' THEN 'given' WHEN b.status = 'UNCONFIRMED' AND b.channel = 'email'"
            " THEN 'pending' ELSE 'revoked' END,"
            f" b.status, ?, ?, ?, b.line, NULL, NULL, NULL, NULL, ? FROM ({source_sql}) AS b{joined}",
            (workspace_id, source.kind, source.consent_text,
             _clip(source.file_name, MAX_FILE_NAME), at, *params, *((workspace_id,) if checked_once else ()))).rowcount
    if checked_once and written != len(rows):
        raise sqlite3.IntegrityError(batch_checks.MISSING)

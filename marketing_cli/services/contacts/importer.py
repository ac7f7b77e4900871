"""Contact import from CSV (`mkt contacts import`, POST /v1/contacts/import).

Import is a bulk upsert built for a million rows:

- The file is checked to be UTF-8 throughout before anything is written
  (kernel/text_files.py, the same check for both faces).
- The header is mapped to merge tags once, before any row is read: a column name matches
  a field's merge tag or label (case-insensitive), or one of the contact columns
  `status`, `sms_status`, `tags` (`created_at`, `updated_at`, `id` are read and ignored,
  so an export imports back as it is). `mapping` overrides names; an unknown column
  stops the import before anything is written unless `ignore_unknown` is set.
- Each column gets its own normaliser chosen up front (values.py's check for the field's
  type, memoised for the low-cardinality types), so the row loop never switches on types.
- Rows are applied in batches (default 20,000, at most MAX_BATCH_SIZE), each batch one
  `BEGIN IMMEDIATE` transaction: one lookup of the batch's keys, then ONE statement for
  the whole batch, `INSERT ... SELECT ... FROM json_each(:rows) ON CONFLICT(workspace_id,
  email) DO UPDATE SET data = json_patch(...)` (see _UPSERT_BATCH for why not
  executemany). A bad row is reported with its line number and every reason; the other
  rows still go in. Both faces work this way: a file-level error (encoding, header,
  options) writes nothing; row errors reject their rows only; batches before a crash stay
  committed (each is whole).
- Update semantics: a row for an existing contact merges its non-empty cells into the
  contact (json_patch); empty cells never erase a value. Status and sms_status change
  only when the row has them; `default_status` applies to new contacts only; tags are
  added, never removed. Rows repeating a key inside the file merge in file order (a
  later non-empty cell wins), exactly as if they came in separate imports.
- Lookup is by email; a row without email (allowed only when the workspace allows
  contacts without email) is looked up by phone.
- The plan's contacts allowance is enforced: new contacts past it are rejected rows.
- Import fires no automation events: a bulk load is not an automation trigger (one
  import would otherwise enqueue a million FIELD_UPDATED or TAG_ADDED runs).
- A running import holds the workspace's io lock (services/contacts/io_lock.py).
- Addresses: every address email-validator accepts goes in, internationalised ones
  included (RFC 6531/6532). A domain in Unicode is sendable everywhere (it goes out in
  IDNA form); an address with non-ASCII characters before the @ only through an SMTP
  server that offers SMTPUTF8. The import cannot know the server, so it says so: such a
  row is imported with a warning (`warnings`, the first MAX_ERRORS; `warned` counts them).
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TextIO

from marketing_cli.db import transaction
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, limits
from marketing_cli.kernel.addresses import needs_smtputf8
from marketing_cli.kernel.ids import new_id, parse_int_id
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import records as contacts
from marketing_cli.services.contacts import tags, values
from marketing_cli.services.contacts.columns import (  # noqa: F401 - parse_column_map, column_key: the faces' names
    TAG_SEPARATOR,
    column_key,
    map_columns,
    parse_column_map,
)
from marketing_cli.services.contacts.io_lock import HeldLock, held_io_lock, renew_io_lock
from marketing_cli.services.contacts.rows import ContactRow, RowParser
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, FieldMap

STATUSES = contacts.STATUSES
SMS_STATUSES = contacts.SMS_STATUSES

# 20,000 rows per transaction and a 256 MiB page cache while importing: at a million
# contacts each row lands on a random leaf of five expression indexes and the email
# index, so a batch's dirty pages must fit the cache (the default 2 MiB spills them to the
# WAL over and over) and bigger batches write each touched page once for more rows.
# Measured on a bare load of 1M rows (rows/s): 5,000 rows + default cache 18.8k, 20,000 +
# default cache 17.3k, 20,000 + 256 MiB 28.9k, 50,000 + 256 MiB 38.0k. 20,000 keeps a
# batch's write lock (which API writers wait behind) under a second.
BATCH_SIZE = 20_000
# The largest batch either face accepts (--batch-size, batch_size=). A batch is one write
# transaction: every other writer (API writes, the job worker, renewals of leases) waits
# for it. The bare load above writes 28.9k rows/s at a million contacts, so 20,000 rows
# hold the lock about 0.7 s on a quiet machine. bench/bench_import_lock.py measures it: a
# batch of 5,000 / 20,000 updates at 20,000 contacts held it 0.17 / 1.00 s on this 2-core
# machine at load 2.7 (20k rows/s), 0.56 / 2.3 s at load 9-10. The cap is the default: a
# bigger batch buys little throughput (38.0k rows/s at 50,000) and makes every writer wait
# longer than about a second.
MAX_BATCH_SIZE = 20_000
BATCH_SIZE_RANGE = f"The batch size must be between 1 and {MAX_BATCH_SIZE:,} rows (one write transaction each)."
IMPORT_CACHE_KIB = 262_144
MAX_ERRORS = 1_000
NEEDS_SMTPUTF8 = ("{email} has non-ASCII characters before the @: only an SMTP server that offers SMTPUTF8 "
                  "(RFC 6531) can deliver to it; through another server its messages fail.")

STATUS_INVALID = contacts.STATUS_INVALID
SMS_STATUS_INVALID = contacts.SMS_STATUS_INVALID
FIELD_REQUIRED = contacts.FIELD_REQUIRED
UNKNOWN_TAG = contacts.UNKNOWN_MERGE_TAG
DIFFERENT_CONTACTS = contacts.DIFFERENT_CONTACTS
PHONE_TAKEN = contacts.PHONE_TAKEN
BILLING_LIMIT = contacts.BILLING_LIMIT

# One statement per batch, rows passed as one JSON array: [[id, email, phone, status,
# sms_status, {data}], ...]. A single INSERT ... SELECT (rather than executemany) matters
# because contacts has an AFTER INSERT trigger (the usage counter): with a trigger every
# statement execution opens a statement journal, which made a per-row executemany 2.5x
# slower than the same load without the trigger. One statement per batch pays it once.
_UPSERT_BATCH = (
    "INSERT INTO contacts (id, workspace_id, email, phone, status, sms_status, data, created_at, updated_at)"
    " SELECT value->>0, ?1, value->>1, value->>2, value->>3, value->>4, value->5, ?2, ?2 FROM json_each(?3) WHERE true"
    " ON CONFLICT (workspace_id, email) DO UPDATE SET"
    " data = json_patch(contacts.data, excluded.data),"
    " phone = coalesce(excluded.phone, contacts.phone),"
    " status = excluded.status,"
    " sms_status = excluded.sms_status,"
    " updated_at = CASE WHEN json_patch(contacts.data, excluded.data) IS NOT contacts.data"
    "   OR coalesce(excluded.phone, contacts.phone) IS NOT contacts.phone"
    "   OR excluded.status IS NOT contacts.status OR excluded.sms_status IS NOT contacts.sms_status"
    "   THEN excluded.updated_at ELSE contacts.updated_at END"
)
# Contacts without email (found by phone) cannot use the email conflict target.
_UPDATE_BY_ID = (
    "UPDATE contacts SET data = json_patch(data, ?2), status = ?3, sms_status = ?4,"
    " updated_at = CASE WHEN json_patch(data, ?2) IS NOT data OR ?3 IS NOT status OR ?4 IS NOT sms_status"
    "   THEN ?5 ELSE updated_at END"
    " WHERE id = ?1 AND workspace_id = ?6"
)
_TAG_BATCH = "INSERT OR IGNORE INTO contact_tags (contact_id, tag_id) SELECT value->>0, value->>1 FROM json_each(?)"
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


# --- import ---------------------------------------------------------------------------

def _merge_by_key(batch: list[ContactRow]) -> dict[tuple[str, str], ContactRow]:
    """Rows repeating a key inside the batch merged in file order."""
    by_key: dict[tuple[str, str], ContactRow] = {}
    for row in batch:
        key = ("e", row.email) if row.email else ("p", row.phone)
        earlier = by_key.get(key)
        if earlier is None:
            by_key[key] = row
        else:
            earlier.merge(row)
    return by_key


class _BatchPlan:
    """What one batch will write: new and updated contacts, tag links, phone owners."""

    def __init__(self, owners: dict[str, str], now: str) -> None:
        self.owners = owners
        self.now = now
        self.remaining = 0
        self.upserts: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.tag_rows: list[tuple[str, int]] = []


class _Importer:
    def __init__(self, conn: sqlite3.Connection, workspace_id: int, header: list[str], columns: dict[int, str],
                 fields: FieldMap, tag_ids: list[int], default_status: str, dry_run: bool,
                 errors_out: TextIO | None, max_errors: int) -> None:
        self.conn = conn
        self.ws = workspace_id
        self.fields = fields
        self.tag_ids = tag_ids
        self.default_status = default_status
        self.dry_run = dry_run
        self.max_errors = max_errors
        self.created = self.updated = self.skipped = self.warned = 0
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []
        self.tags_created: list[str] = []
        self.allow_without_email = bool(conn.execute(
            "SELECT allow_contacts_without_email FROM workspaces WHERE id = ?", (workspace_id,)
        ).fetchone()[0])
        # Tag names are unique in a workspace regardless of case (services/contacts/tags.py).
        self.tag_by_name = {r["name"].lower(): r["id"] for r in conn.execute(
            "SELECT id, name FROM tags WHERE workspace_id = ?", (workspace_id,))}
        self.dry_seen: set[tuple[str, str]] = set()  # keys a dry run would have created
        self.dry_owners: dict[str, str] = {}  # phone numbers a dry run would have claimed
        self.remaining: int | None = None  # dry run: allowance left, carried across batches

        self.rows = RowParser(len(header), columns, fields, self.allow_without_email)
        # Values a new contact gets for fields its row leaves empty, and fields it must have.
        self.defaults: dict[str, Any] = {}
        for f in fields.by_id.values():
            if f.default_value not in (None, "") and f.merge_tag not in (EMAIL_TAG, PHONE_TAG):
                try:
                    value = values.normalize_value(f, f.default_value)
                except ValueError:
                    continue
                if value is not None:
                    self.defaults[str(f.id)] = value
        self.required = [f for f in fields.by_id.values()
                         if f.required and f.merge_tag not in (EMAIL_TAG, PHONE_TAG)]
        self.errors_writer = None
        if errors_out is not None:
            self.errors_writer = csv.writer(errors_out)
            self.errors_writer.writerow(["line", "reason", *header])

    # Rows -------------------------------------------------------------------------------

    def reject(self, line: int, cells: list[str], reason: str, count: int = 1) -> None:
        self.skipped += count
        if len(self.errors) < self.max_errors:
            self.errors.append({"line": line, "reason": reason})
        if self.errors_writer is not None:
            self.errors_writer.writerow([line, reason, *cells])

    def parse(self, line: int, cells: list[str]) -> ContactRow | None:
        """The row's normalised values, or None after rejecting it (all its reasons at once)."""
        row = self.rows.parse(line, cells)
        if isinstance(row, str):
            self.reject(line, cells, row)
            return None
        if row.email is not None and needs_smtputf8(row.email):
            self.warned += 1
            if len(self.warnings) < self.max_errors:
                self.warnings.append({"line": line, "reason": NEEDS_SMTPUTF8.format(email=row.email)})
        return row

    # Batches ----------------------------------------------------------------------------

    def _lookup(self, column: str, keys: list[str]) -> dict[str, sqlite3.Row]:
        if not keys:
            return {}
        found: dict[str, sqlite3.Row] = {}
        order = " ORDER BY created_at, id" if column == "phone" else ""  # emails are unique
        for row in self.conn.execute(
            f"SELECT {column} AS k, id, status, sms_status FROM contacts"  # column: 'email' or 'phone', ours
            f" WHERE workspace_id = ? AND {column} IN (SELECT value FROM json_each(?)){order}",
            (self.ws, _dumps(keys)),
        ):
            found.setdefault(row["k"], row)
        return found

    def _tag_ids_for(self, names: list[str]) -> list[int]:
        ids = []
        for name in names:
            tag_id = self.tag_by_name.get(name.lower())
            if tag_id is None:
                if self.dry_run:
                    tag_id = -1 - len(self.tags_created)
                else:
                    tag_id = tags.create_tag(self.conn, self.ws, {"name": name})["id"]
                self.tag_by_name[name.lower()] = tag_id
                self.tags_created.append(name)
            ids.append(tag_id)
        return ids

    def apply(self, batch: list[ContactRow], lock: HeldLock | None = None) -> None:
        """Write one batch in one transaction (a dry run only plans it).

        The io lock is renewed in the batch's own transaction: a commit extends it, however
        long the batch waited for the write lock (the renewer thread covers the gaps).
        """
        if self.dry_run:
            self._apply(batch)
            return
        with transaction(self.conn):
            self._apply(batch)
            if lock is not None:
                renew_io_lock(self.conn, self.ws, lock.owner)

    def _apply(self, batch: list[ContactRow]) -> None:
        by_key = _merge_by_key(batch)
        by_email = self._lookup("email", [k[1] for k in by_key if k[0] == "e"])
        by_phone = self._lookup("phone", [r.phone for r in by_key.values() if r.phone])
        # A phone number belongs to at most one contact (as in create and upsert).
        plan = _BatchPlan({phone: r["id"] for phone, r in by_phone.items()}, clock.now())
        if self.dry_run:
            plan.owners.update(self.dry_owners)
            if self.remaining is None:
                self.remaining = billing.remaining(self.conn, self.ws, "contacts")
            plan.remaining = self.remaining
        else:
            plan.remaining = billing.remaining(self.conn, self.ws, "contacts")
        for key, row in by_key.items():
            existing = (by_email if key[0] == "e" else by_phone).get(key[1])
            if existing is None and key in self.dry_seen:
                self.updated += row.lines  # a dry run "created" it in an earlier batch
                continue
            if not self._phone_is_free(plan, row, existing):
                continue
            if existing is None:
                contact_id = self._plan_new(plan, key, row)
            else:
                contact_id = self._plan_update(plan, key, row, existing)
            if contact_id is None:
                continue
            if row.phone is not None:
                plan.owners[row.phone] = contact_id
                if self.dry_run:
                    self.dry_owners[row.phone] = contact_id
            if self.tag_ids or row.tags:
                ids = self.tag_ids + (self._tag_ids_for(row.tags) if row.tags else [])
                plan.tag_rows.extend((contact_id, tag_id) for tag_id in ids)
        if self.dry_run:
            self.remaining = plan.remaining
        else:
            self._write(plan)

    def _phone_is_free(self, plan: _BatchPlan, row: ContactRow, existing: sqlite3.Row | None) -> bool:
        owner = plan.owners.get(row.phone) if row.phone is not None else None
        if owner is None or (existing is not None and owner == existing["id"]):
            return True
        self.reject(row.line, row.cells,
                    DIFFERENT_CONTACTS if existing is not None else PHONE_TAKEN.format(phone=row.phone), row.lines)
        return False

    def _plan_new(self, plan: _BatchPlan, key: tuple[str, str], row: ContactRow) -> str | None:
        data = {**self.defaults, **row.data} if self.defaults else row.data
        missing = [f.label for f in self.required if str(f.id) not in data]
        if missing:
            self.reject(row.line, row.cells, " ".join(FIELD_REQUIRED.format(label=m) for m in missing), row.lines)
            return None
        if plan.remaining <= 0:
            self.reject(row.line, row.cells, BILLING_LIMIT, row.lines)
            return None
        plan.remaining -= 1
        contact_id = new_id()
        plan.upserts.append((contact_id, row.email, row.phone, row.status or self.default_status, row.sms_status,
                             data))
        self.created += 1
        self.updated += row.lines - 1
        if self.dry_run:
            self.dry_seen.add(key)
        return contact_id

    def _plan_update(self, plan: _BatchPlan, key: tuple[str, str], row: ContactRow, existing: sqlite3.Row) -> str:
        contact_id = existing["id"]
        status = row.status or existing["status"]
        sms_status = existing["sms_status"]
        if row.sms_status and row.sms_status != (sms_status or "SUBSCRIBED"):
            sms_status = row.sms_status  # unset reads as SUBSCRIBED: only a real change is stored
        if key[0] == "e":
            plan.upserts.append((contact_id, row.email, row.phone, status, sms_status, row.data))
        else:
            plan.updates.append((contact_id, _dumps(row.data), status, sms_status, plan.now, self.ws))
        self.updated += row.lines
        return contact_id

    def _write(self, plan: _BatchPlan) -> None:
        if plan.upserts:
            self.conn.execute(_UPSERT_BATCH, (self.ws, plan.now, _dumps(plan.upserts)))
        if plan.updates:
            self.conn.executemany(_UPDATE_BY_ID, plan.updates)
        if plan.tag_rows:
            self.conn.execute(_TAG_BATCH, (_dumps(plan.tag_rows),))

    def summary(self, rows: int, columns: dict[str, str]) -> dict[str, Any]:
        return {
            "rows": rows,
            "created": self.created,
            "updated": self.updated,
            "skipped": self.skipped,
            "errors": self.errors,
            "warned": self.warned,
            "warnings": self.warnings,
            "tags_created": self.tags_created,
            "columns": columns,
            "dry_run": self.dry_run,
        }


def _check_tags(conn: sqlite3.Connection, workspace_id: int, tag_ids: Iterable[int]) -> list[int]:
    ids = list(dict.fromkeys(tag_ids))
    limits.check_count(len(ids), limits.IMPORT_TAG_IDS,
                       f"An import can tag contacts with at most {limits.IMPORT_TAG_IDS} tags (--tag / tag=).")
    tags.tags_by_id(conn, workspace_id, ids)  # 400 "Tag ID <id> does not exist in this workspace"
    return ids


def check_batch_size(value: Any) -> int:
    """Rows per transaction, 1 to MAX_BATCH_SIZE (an int, or digits from a query string)."""
    value = parse_int_id(value, BATCH_SIZE_RANGE)  # a positive integer, from an int or digits
    if value > MAX_BATCH_SIZE:
        raise MktError(400, BATCH_SIZE_RANGE)
    return value


def _read_header(reader: Any) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        raise MktError(400, "The file is empty: the first line must name the columns.") from None
    except csv.Error as exc:
        raise MktError(400, f"Line 1 is not valid CSV: {exc}") from None
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    return header


def _check_identity(conn: sqlite3.Connection, workspace_id: int, columns: dict[int, str]) -> None:
    if EMAIL_TAG in columns.values():
        return
    allowed = conn.execute(
        "SELECT allow_contacts_without_email FROM workspaces WHERE id = ?", (workspace_id,)
    ).fetchone()[0]
    if not allowed or PHONE_TAG not in columns.values():
        raise MktError(400, "The file has no email_address column (map one with --map 'Column=email_address'; "
                            "API: map=Column=email_address).")


def _parsed_rows(reader: Any, importer: _Importer) -> Iterator[tuple[int, ContactRow | None]]:
    """(rows read so far, the parsed row or None when it was rejected or blank)."""
    rows = 0
    previous_line = reader.line_num
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = previous_line + 1
            previous_line = reader.line_num
            rows += 1
            importer.reject(line, [], f"The line is not valid CSV: {exc}")
            yield rows, None
            continue
        line = previous_line + 1
        previous_line = reader.line_num
        if not cells:
            continue  # a blank line
        rows += 1
        yield rows, importer.parse(line, cells)


@contextmanager
def _import_cache(conn: sqlite3.Connection) -> Iterator[None]:
    cache_size = conn.execute("PRAGMA cache_size").fetchone()[0]
    conn.execute(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache_size)}")


def import_contacts(
    conn: sqlite3.Connection,
    workspace_id: int,
    source: Iterable[str],
    *,
    mapping: dict[str, str] | None = None,
    ignore_unknown: bool = False,
    tag_ids: Iterable[int] = (),
    default_status: str = "SUBSCRIBED",
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
    errors_out: TextIO | None = None,
    progress: Callable[[int], None] | None = None,
    max_errors: int = MAX_ERRORS,
) -> dict[str, Any]:
    """Import CSV text (an open file or any iterable of lines) into the workspace.

    Returns {"rows", "created", "updated", "skipped", "errors": [{"line", "reason"}...]
    (the first `max_errors`; "skipped" counts them all), "warned", "warnings" (rows
    imported with a warning, the same way), "tags_created", "columns" {column: merge tag},
    "dry_run"}. A dry run validates and looks up every row and
    reports what would happen, writing nothing.
    """
    status = (default_status or "").strip().upper()
    if status not in STATUSES:
        raise MktError(400, STATUS_INVALID)
    batch_size = check_batch_size(batch_size)
    tag_list = _check_tags(conn, workspace_id, tag_ids)
    reader = csv.reader(source)
    header = _read_header(reader)
    fields = values.load_fields(conn, workspace_id)
    columns = map_columns(header, fields, mapping, ignore_unknown)
    _check_identity(conn, workspace_id, columns)
    with ExitStack() as stack:
        lock = None if dry_run else stack.enter_context(held_io_lock(conn, workspace_id, "import"))
        stack.enter_context(_import_cache(conn))
        importer = _Importer(conn, workspace_id, header, columns, fields, tag_list, status, dry_run,
                             errors_out, max_errors)
        batch: list[ContactRow] = []
        rows = 0
        for rows, row in _parsed_rows(reader, importer):
            if row is not None:
                batch.append(row)
                if len(batch) >= batch_size:
                    importer.apply(batch, lock)
                    batch = []
                    if progress is not None:
                        progress(rows)
        if batch:
            importer.apply(batch, lock)
        if progress is not None:
            progress(rows)
    return importer.summary(rows, {header[i]: tag for i, tag in columns.items()})

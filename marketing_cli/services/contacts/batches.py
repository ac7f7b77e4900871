"""The import's batch writer: parsed rows written a batch at a time, one transaction each.

importer.py reads and checks the file; the rows it parsed come here in batches:

- Rows are applied in batches (default 20,000, at most MAX_BATCH_SIZE), each batch one
  `BEGIN IMMEDIATE` transaction: one lookup of the batch's keys, then ONE statement for
  the whole batch, `INSERT ... SELECT ... FROM <the batch> ON CONFLICT(workspace_id,
  email) DO UPDATE SET data = json_patch(...)` (see _UPSERT_COLUMNS for why not
  executemany into contacts; the batch's rows reach it through a temporary table,
  dialect.contacts_batch_source), its rows in email order (see bulk_load.IMPORT_CACHE_KIB). A row the batch cannot take (a required field is
  missing, the allowance is used up) is rejected with its reason, each file row it stands
  for reported on its own line; the other rows still go in. A phone number that is another
  contact's is left out of the row when bad cells are left out (rows.py), else it rejects
  the row. Batches before a crash stay committed (each is whole).
- Update semantics: a row for an existing contact merges its non-empty cells into the
  contact (json_patch); empty cells never erase a value. Status and sms_status change
  only when the row has them; `default_status` applies to new contacts only; tags are
  added, never removed. Rows repeating a key inside the file merge in file order (a
  later non-empty cell wins), exactly as if they came in separate imports.
- A row whose email address or phone number is on the suppression list (a person who
  asked to be erased, services/contacts/suppressions.py) is rejected with its line: one
  lookup of the batch's hashed addresses, none while the list is empty.
- Lookup is by email; a row without email (allowed only when the workspace allows
  contacts without email) is looked up by phone.
- The plan's contacts allowance is enforced: new contacts past it are rejected rows.
- Import fires no automation events: a bulk load is not an automation trigger (one
  import would otherwise enqueue a million FIELD_UPDATED or TAG_ADDED runs).
- It does write the consent ledger (consents.py): each consent a row changes, planned from
  the batch's lookup and written in ONE INSERT ... SELECT after the upsert, in the batch's
  transaction, with the file's name, the line (of the contact's last row in the batch that
  set a status, else its first) and the import's `consent_text`.
- A dry run plans every batch the same way and writes nothing, carrying across batches
  what it would have created (keys, phone numbers, the allowance left).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id, parse_int_id
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import batch_checks, consents, phone_zones, tags, values, zone_columns
from marketing_cli.services.contacts.bulk_load import FieldIndexes
from marketing_cli.services.contacts.checks import FIELD_REQUIRED
from marketing_cli.services.contacts.io_lock import HeldLock, renew_io_lock
from marketing_cli.services.contacts.records import BILLING_LIMIT, DIFFERENT_CONTACTS, PHONE_TAKEN
from marketing_cli.services.contacts.rows import ContactRow, dumps_json
from marketing_cli.services.contacts.suppressions import SUPPRESSED, suppressed_in_batch
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, FieldMap
from marketing_cli.storage import dialect, field_sql
from marketing_cli.storage.db import transaction

# 20,000 rows per transaction and a larger page cache while importing: at a million
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

# One statement per batch, its rows a source of these columns (dialect.contacts_batch_source:
# a temporary table, loaded by executemany on SQLite and by COPY on PostgreSQL). A single INSERT ... SELECT
# (rather than executemany) matters because contacts has an AFTER INSERT trigger (the usage
# counter): with a trigger every statement execution opens a statement journal, which made a
# per-row executemany 2.5x slower than the same load without the trigger. One statement per
# batch pays it once.
# Each row also carries the contact's kept time zone columns (schema step 25, zone_columns.py): its
# `timezone` field value and its phone's list of candidate zones, found once per distinct
# prefix per import (phone_zones.PhoneSets), so a resolution after the import has nothing to fill.
_UPSERT_COLUMNS = (("id", "TEXT"), ("email", "TEXT"), ("phone", "TEXT"), ("status", "TEXT"),
                   ("sms_status", "TEXT"), ("data", "JSON"), ("zone_field", "TEXT"), ("zone_phone_set", "BIGINT"))
_TAG_COLUMNS = (("contact_id", "TEXT"), ("tag_id", "BIGINT"))


def _kept_field(field_id: int | None, given: str, table: str) -> str:
    """The kept `timezone` value after a merge: the row's when it has one (the merge writes it),
    else the contact's kept one, else (a stale contact) read from its data."""
    old = "NULL" if field_id is None else field_sql.value_expr(field_id, table)
    return (f"CASE WHEN {given} IS NOT NULL THEN {given} WHEN {table}.zone_cached IS NOT NULL"
            f" THEN {table}.zone_field ELSE {old} END")


def _upsert_batch(conn: sqlite3.Connection, source: str, field_id: int | None) -> str:
    merged = dialect.contacts_json_merge(conn, "contacts.data", "excluded.data")
    return (
        "INSERT INTO contacts (id, workspace_id, email, phone, status, sms_status, data, created_at, updated_at,"
        " zone_field, zone_phone_set, zone_cached)"
        f" SELECT b.id, ?, b.email, b.phone, b.status, b.sms_status, b.data, ?, ?, b.zone_field, b.zone_phone_set, 1"
        f" FROM ({source}) AS b WHERE true"
        " ON CONFLICT (workspace_id, email) DO UPDATE SET"
        f" data = {merged},"
        " phone = coalesce(excluded.phone, contacts.phone),"
        f" zone_field = {_kept_field(field_id, 'excluded.zone_field', 'contacts')},"
        " zone_phone_set = CASE WHEN excluded.phone IS NOT NULL THEN excluded.zone_phone_set"
        "   WHEN contacts.phone IS NULL THEN NULL ELSE contacts.zone_phone_set END,"
        # as it was when neither phone nor data changes (the row is left as it was); else
        # current unless the contact was stale and its phone (not in the row) is unknown here
        f" zone_cached = CASE WHEN NOT ({merged} IS NOT contacts.data"
        "   OR coalesce(excluded.phone, contacts.phone) IS NOT contacts.phone) THEN contacts.zone_cached"
        "   WHEN excluded.phone IS NOT NULL OR contacts.phone IS NULL"
        f"   OR contacts.zone_cached IS NOT NULL THEN {zone_columns.FRESH.format(c='contacts')} END,"
        " status = excluded.status,"
        " sms_status = excluded.sms_status,"
        f" updated_at = CASE WHEN {merged} IS NOT contacts.data"
        "   OR coalesce(excluded.phone, contacts.phone) IS NOT contacts.phone"
        "   OR excluded.status IS NOT contacts.status OR excluded.sms_status IS NOT contacts.sms_status"
        "   THEN excluded.updated_at ELSE contacts.updated_at END"
    )


def _update_by_id(conn: sqlite3.Connection, field_id: int | None) -> str:
    """Contacts without email (found by phone) cannot use the email conflict target. The phone
    is the key, so its list (?8) is the contact's."""
    merged = dialect.contacts_json_merge(conn, "data", "?2")
    return (
        f"UPDATE contacts SET data = {merged}, status = ?3, sms_status = ?4,"
        f" zone_field = {_kept_field(field_id, 'CAST(?7 AS TEXT)', 'contacts')}, zone_phone_set = ?8,"
        f" zone_cached = CASE WHEN NOT ({merged} IS NOT data) THEN zone_cached"
        f"   ELSE {zone_columns.FRESH.format(c='contacts')} END,"
        f" updated_at = CASE WHEN {merged} IS NOT data OR ?3 IS NOT status OR ?4 IS NOT sms_status"
        "   THEN ?5 ELSE updated_at END"
        " WHERE id = ?1 AND workspace_id = ?6"
    )


def _by_email(row: tuple[Any, ...]) -> str:
    return row[1] or ""  # a new contact without email (the workspace allows it) has none


OVER_ALLOWANCE = (f"{BILLING_LIMIT}: the workspace's contacts allowance is used up (an operator raises it with "
                  "`mkt billing allowance set contacts N`).")

_dumps = dumps_json


def _json_cell(value: Any) -> str:
    """A data cell of a batch: the parse worker's JSON text as it is, a dict encoded here."""
    return value if type(value) is str else _dumps(value)

# A rejected file row: (line, cells, reason, kind: a key of rows.REJECTION_KINDS).
Reject = Callable[[int, list[str], str, str], None]


def check_batch_size(value: Any) -> int:
    """Rows per transaction, 1 to MAX_BATCH_SIZE (an int, or digits from a query string)."""
    value = parse_int_id(value, BATCH_SIZE_RANGE)  # a positive integer, from an int or digits
    if value > MAX_BATCH_SIZE:
        raise MktError(400, BATCH_SIZE_RANGE)
    return value


def _merge_by_key(batch: list[ContactRow],
                  consent_lines: dict[tuple[str, str], int]) -> dict[tuple[str, str], ContactRow]:
    """Rows repeating a key inside the batch merged in file order; `consent_lines` gets, for a
    merged key, the line of the last of its rows that set a status (the consent ledger's line)."""
    by_key: dict[tuple[str, str], ContactRow] = {}
    for row in batch:
        key = ("e", row.email) if row.email else ("p", row.phone)
        earlier = by_key.get(key)
        if earlier is None:
            by_key[key] = row
        else:
            earlier.merge(row)
            if row.status or row.sms_status:
                consent_lines[key] = row.line
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
        self.consents: list[tuple[str, str, str, int]] = []  # (contact id, channel, status, line)
        self.consent_lines: dict[tuple[str, str], int] = {}


class BatchWriter:
    """Writes the parsed rows of one import, a batch at a time; counts what it created and updated."""

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, fields: FieldMap, tag_ids: list[int],
                 default_status: str, dry_run: bool, reject: Reject,
                 source: consents.Source = consents.Source("import")) -> None:
        self.conn = conn
        self.source = source
        self.ws = workspace_id
        self.tag_ids = tag_ids
        self.default_status = default_status
        self.dry_run = dry_run
        self.reject = reject
        # Bad cells left out of rows written: (line, column index, reason). A phone number that is
        # another contact's is left out when phone_index (its column) is set, else rejects the row.
        self.leave_out: Callable[[int, int, str], None] | None = None
        self.phone_index = -1
        self.created = self.updated = 0
        self.tags_created: list[str] = []
        # Tag names are unique in a workspace regardless of case (services/contacts/tags.py).
        self.tag_by_name = {r["name"].lower(): r["id"] for r in conn.execute(
            "SELECT id, name FROM tags WHERE workspace_id = ?", (workspace_id,))}
        self.dry_seen: set[tuple[str, str]] = set()  # keys a dry run would have created
        self.dry_owners: dict[str, str] = {}  # phone numbers a dry run would have claimed
        self.remaining: int | None = None  # dry run: allowance left, carried across batches
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
        # The kept time zone columns (zone_columns.py): the `timezone` field's id, each number's list
        # of candidate zones (one lookup per distinct prefix for the whole import).
        timezone = fields.by_tag.get(values.TIMEZONE_TAG)
        self.zone_field_id = timezone.id if timezone is not None else None
        self.phone_sets = phone_zones.PhoneSets(conn)
        self.indexes = FieldIndexes(conn, workspace_id, dry_run)  # built after a large load (bulk_load.py)
        self.checked_once: bool | None = None  # read at the first write

    def _lookup(self, column: str, keys: list[str]) -> dict[str, sqlite3.Row]:
        """The contacts of `keys` by email or phone; a phone number on several contacts is the
        earliest's (created_at, id), as records.py finds it. The earliest is picked here, not by
        ORDER BY: with an ORDER BY SQLite walks contacts_created over the whole workspace instead
        of seeking contacts_phone, a scan per batch that made a large import quadratic."""
        if not keys:
            return {}
        found: dict[str, sqlite3.Row] = {}
        among, param = dialect.contacts_keys_in(self.conn, keys, _dumps)
        for row in self.conn.execute(
            f"SELECT {column} AS k, id, status, sms_status, phone, created_at FROM contacts"  # column: ours
            f" WHERE workspace_id = ? AND {column} {among}",
            (self.ws, param),
        ):
            earlier = found.get(row["k"])
            if earlier is None or (row["created_at"], row["id"]) < (earlier["created_at"], earlier["id"]):
                found[row["k"]] = row
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
            if lock is not None:
                self.indexes.before_batch(lock.owner)
            self.phone_sets.batch()
            self._apply(batch)
            if lock is not None:
                renew_io_lock(self.conn, self.ws, lock.owner)
        self.indexes.written += len(batch)

    def finish(self, quietly: bool = False) -> None:
        """After the last batch (or an error or Ctrl-C after some were written): the field
        indexes dropped for the load built again (bulk_load.FieldIndexes.build)."""
        self.indexes.build(quietly)

    def _apply(self, batch: list[ContactRow]) -> None:
        plan = _BatchPlan({}, clock.now())
        by_key = _merge_by_key(batch, plan.consent_lines)
        by_email = self._lookup("email", [k[1] for k in by_key if k[0] == "e"])
        by_phone = self._lookup("phone", [r.phone for r in by_key.values() if r.phone])
        # People who asked to be erased (suppressions.py): one lookup for the batch, each row refused with its line.
        suppressed = suppressed_in_batch(self.conn, self.ws, [k[1] for k in by_key if k[0] == "e"],
                                         [r.phone for r in by_key.values() if r.phone])
        # A phone number belongs to at most one contact (as in create and upsert).
        plan.owners = {phone: r["id"] for phone, r in by_phone.items()}
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
                self._report_left_out(row)
                continue
            if suppressed and (("email", row.email) in suppressed or ("phone", row.phone) in suppressed):
                self.reject(row.line, row.cells, SUPPRESSED, row.lines)
                continue
            if not self._phone_is_free(plan, row, existing):
                continue
            if existing is None:
                contact_id = self._plan_new(plan, key, row)
            else:
                contact_id = self._plan_update(plan, key, row, existing)
            if contact_id is None:
                continue
            self._report_left_out(row)
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

    def _report_left_out(self, row: ContactRow) -> None:
        """The bad cells left out of a row that goes in (a rejected row reports its rejection only)."""
        if row.left_out and self.leave_out is not None:
            for line, index, reason in row.left_out:
                self.leave_out(line, index, reason)

    def _reject(self, row: ContactRow, reason: str, kind: str) -> None:
        """Every file row `row` stands for (rows repeating a key merge into one), each on its line."""
        for line, cells in row.file_rows():
            self.reject(line, cells, reason, kind)

    def _phone_is_free(self, plan: _BatchPlan, row: ContactRow, existing: sqlite3.Row | None) -> bool:
        owner = plan.owners.get(row.phone) if row.phone is not None else None
        if owner is None or (existing is not None and owner == existing["id"]):
            return True
        reason = DIFFERENT_CONTACTS if existing is not None else PHONE_TAKEN.format(phone=row.phone)
        if self.phone_index >= 0 and row.email is not None:
            row.left_out = [*(row.left_out or ()), (row.line, self.phone_index, f"{reason} The number was left out.")]
            row.phone = None
            return True
        self._reject(row, reason, "phone_taken")
        return False

    def _plan_new(self, plan: _BatchPlan, key: tuple[str, str], row: ContactRow) -> str | None:
        data = {**self.defaults, **row.data} if self.defaults else row.data
        missing = [f.label for f in self.required if str(f.id) not in data]
        if missing:
            self._reject(row, " ".join(FIELD_REQUIRED.format(label=m) for m in missing), "required")
            return None
        if plan.remaining <= 0:
            self._reject(row, OVER_ALLOWANCE, "allowance")
            return None
        plan.remaining -= 1
        contact_id = new_id()
        status = row.status or self.default_status
        cell = row.data_json if data is row.data and row.data_json is not None else data
        plan.upserts.append((contact_id, row.email, row.phone, status, row.sms_status,
                             cell, *self._zone(row.phone, data)))
        self._consents(plan, key, row, contact_id, None, (status, row.sms_status, row.phone))
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
        cell = row.data_json if row.data_json is not None else row.data
        if key[0] == "e":
            plan.upserts.append((contact_id, row.email, row.phone, status, sms_status, cell,
                                 *self._zone(row.phone, row.data)))
        else:
            plan.updates.append((contact_id, _json_cell(cell), status, sms_status, plan.now, self.ws,
                                 *self._zone(row.phone, row.data)))
        self._consents(plan, key, row, contact_id, (existing["status"], existing["sms_status"], existing["phone"]),
                       (status, sms_status, row.phone or existing["phone"]))
        self.updated += row.lines
        return contact_id

    def _consents(self, plan: _BatchPlan, key: tuple[str, str], row: ContactRow, contact_id: str,
                  before: consents.State | None, after: consents.State) -> None:
        """The ledger rows of what this row changes (written with the batch)."""
        line = plan.consent_lines.get(key, row.line)
        plan.consents.extend((contact_id, channel, status, line) for channel, status in consents.changes(before, after))

    def _zone(self, phone: str | None, data: dict[str, Any]) -> tuple[Any, int | None]:
        """(the `timezone` value, the phone's list id) a row writes; a dry run writes nothing."""
        if self.dry_run:
            return None, None
        return zone_columns.field_value(data, self.zone_field_id), self.phone_sets(phone)

    def _write(self, plan: _BatchPlan) -> None:
        if self.checked_once is None:  # PostgreSQL: references checked once per batch (batch_checks.py)
            self.checked_once = batch_checks.checked_once(self.conn)
        if self.checked_once:
            batch_checks.lock_workspace(self.conn, self.ws)
        if plan.upserts:
            plan.upserts.sort(key=_by_email)  # in index order: see bulk_load.IMPORT_CACHE_KIB
            source, params = dialect.contacts_batch_source(self.conn, "mkt_batch_contacts", _UPSERT_COLUMNS,
                                                           plan.upserts, _json_cell)
            plan.upserts.clear()  # loaded into the source: not held while the statement runs (peak RSS)
            with batch_checks.row_checks_off(self.conn, self.checked_once):
                self.conn.execute(_upsert_batch(self.conn, source, self.zone_field_id),
                                  (self.ws, plan.now, plan.now, *params))
        if plan.updates:
            self.conn.executemany(_update_by_id(self.conn, self.zone_field_id), plan.updates)
        if plan.tag_rows:
            source, params = dialect.contacts_batch_source(self.conn, "mkt_batch_tags", _TAG_COLUMNS,
                                                           plan.tag_rows, _dumps)
            self.conn.execute(f"INSERT OR IGNORE INTO contact_tags (contact_id, tag_id)"
                              f" SELECT t.contact_id, t.tag_id FROM ({source}) AS t", params)
        consents.append_batch(self.conn, self.ws, plan.consents, self.source, plan.now, checked_once=self.checked_once)

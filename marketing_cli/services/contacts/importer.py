"""Contact import from CSV (`mkt contacts import`, POST /v1/contacts/import).

Import is a bulk upsert built for a million rows:

- The file is checked to be UTF-8 (or in the encoding given or detected) throughout before
  anything is written (kernel/text_files.py, the same check for both faces).
- The delimiter (comma, semicolon, tab, pipe) is given or read from the header line
  (kernel/text_files.py: sniff_delimiter); the summary says which one was used, and how
  the file was decoded.
- DATE columns read other forms of dates when told how (`date_format`, `day_first`;
  services/contacts/dates.py).
- The header is mapped to merge tags once, before any row is read: a column name matches
  a field's merge tag or label (case-insensitive), or one of the contact columns
  `status`, `sms_status`, `tags` (`created_at`, `updated_at`, `id` are read and ignored,
  so an export imports back as it is). `mapping` overrides names; an unknown column
  stops the import before anything is written unless `ignore_unknown` is set
  (services/contacts/columns.py).
- Each column gets its own normaliser chosen up front (values.py's check for the field's
  type, memoised for the low-cardinality types), so the row loop never switches on types
  (services/contacts/rows.py).
- The parsed rows are written in batches, each one transaction and ONE upsert statement
  (services/contacts/batches.py: the batch size, the update semantics, the allowance).
- A bad row is reported with its line number and every reason; the other rows still go
  in. A bad optional cell (a number, a date, a phone number beside an email address) is
  left out and reported with its line, column and reason, and the contact goes in without
  it; `bad_cells="reject-row"` rejects the row instead (rows.py says which cells are never
  optional). Every rejected file row is one entry: `skipped` counts them, `errors` lists
  them (the first MAX_ERRORS) and `errors_out` gets each one, rows repeating a key included
  (each with its own line); `rejections` counts them by kind with what to do
  (rows.REJECTION_KINDS). Both faces work this way: a file-level error (encoding, header, options) writes
  nothing; row errors reject their rows only; batches before a crash stay committed
  (each is whole). Ctrl-C raises ImportInterrupted with what the committed batches hold,
  so the CLI can say what was kept (re-running the import is safe: it upserts).
- On PostgreSQL the file is read and its rows checked one batch ahead of the writer, in a
  thread of its own (`_read_ahead`): while a batch is written (the writer waits on the
  server, GIL released) the next one is parsed, so the two overlap instead of taking turns
  (dialect.contacts_import_reads_ahead says why SQLite takes turns). Either way a batch's
  rejected and warned rows reach the report in file order, before its writer's own
  rejections.
- On SQLite the CLI's import of a large file reads and checks its rows in a forked worker
  process while this one writes (parse_worker.py): the same code on the same rows, so the
  report is the same.
- A running import holds the workspace's io lock (services/contacts/io_lock.py).
- Addresses: every address email-validator accepts goes in, internationalised ones
  included (RFC 6531/6532). A domain in Unicode is sendable everywhere (it goes out in
  IDNA form); an address with non-ASCII characters before the @ only through an SMTP
  server that offers SMTPUTF8. The import cannot know the server, so it says so: such a
  row is imported with a warning (`warnings`, the first MAX_ERRORS; `warned` counts them).
"""

from __future__ import annotations

import csv
import gc
import itertools
import queue
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, closing, contextmanager
from typing import Any, NamedTuple, TextIO

from marketing_cli.errors import MktError
from marketing_cli.kernel import limits
from marketing_cli.kernel.addresses import needs_smtputf8
from marketing_cli.kernel.inputs import check_unicode
from marketing_cli.kernel.text_files import DELIMITERS, Decoding, check_delimiter, sniff_delimiter
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import consents, tags, values
from marketing_cli.services.contacts.batches import BATCH_SIZE, BatchWriter, check_batch_size
from marketing_cli.services.contacts.bulk_load import import_cache
from marketing_cli.services.contacts.checks import allows_no_email
from marketing_cli.services.contacts.columns import map_columns
from marketing_cli.services.contacts.dates import check_date_options
from marketing_cli.services.contacts.io_lock import held_io_lock
from marketing_cli.services.contacts.parse_worker import worker_batches, worth_a_worker
from marketing_cli.services.contacts.records import STATUS_INVALID, STATUSES
from marketing_cli.services.contacts.rows import (
    LEAVE_OUT,
    REJECTION_KINDS,
    ContactRow,
    Rejection,
    RowParser,
    check_bad_cells,
)
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG
from marketing_cli.storage import dialect

MAX_ERRORS = 1_000
NEEDS_SMTPUTF8 = ("{email} has non-ASCII characters before the @: only an SMTP server that offers SMTPUTF8 "
                  "(RFC 6531) can deliver to it; through another server its messages fail.")


class _Report:
    """The rejected rows: counted (in all and by kind), the first `max_errors` kept, every one
    written to `errors_out`; the rows imported with a warning and the cells left out, counted
    and kept the same way."""

    def __init__(self, header: list[str], errors_out: TextIO | None, max_errors: int) -> None:
        self.header = header
        self.max_errors = max_errors
        self.skipped = self.warned = self.cells_left_out = 0
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []
        self.left_out: list[dict[str, Any]] = []
        self.kinds: Counter[tuple[str, str]] = Counter()
        self.columns: Counter[str] = Counter()
        self.errors_writer = None
        if errors_out is not None:
            self.errors_writer = csv.writer(errors_out)
            self.errors_writer.writerow(["line", "reason", *header])

    def reject(self, line: int, cells: list[str], reason: str, kind: str | None = None) -> None:
        """One rejected file row. `kind`: a key of REJECTION_KINDS; any other rejection is
        counted under its own reason."""
        self.skipped += 1
        self.kinds[(kind, "") if kind in REJECTION_KINDS else ("other", reason)] += 1
        if len(self.errors) < self.max_errors:
            self.errors.append({"line": line, "reason": reason})
        if self.errors_writer is not None:
            self.errors_writer.writerow([line, reason, *cells])

    def leave_out(self, line: int, index: int, reason: str) -> None:
        """A bad optional cell left out of a row that was imported."""
        self.cells_left_out += 1
        self.columns[self.header[index]] += 1
        if len(self.left_out) < self.max_errors:
            self.left_out.append({"line": line, "column": self.header[index], "reason": reason})

    def rejections(self, allowed: Callable[[], int]) -> list[dict[str, Any]]:
        """The rejected rows by kind, most first: {kind, count, reason} ("791 over the contacts
        allowance of 1,000: ..." is count 791 and the reason after the number)."""
        out = []
        for (kind, reason), n in self.kinds.most_common():
            if kind != "other":
                reason = REJECTION_KINDS[kind].format(allowed=allowed() if kind == "allowance" else 0)
            out.append({"kind": kind, "count": n, "reason": reason})
        return out

    def warn(self, line: int, reason: str) -> None:
        self.warned += 1
        if len(self.warnings) < self.max_errors:
            self.warnings.append({"line": line, "reason": reason})


def _contacts_allowed(conn: sqlite3.Connection, workspace_id: int) -> int:
    return next(r["allowed"] for r in billing.resources(conn, workspace_id) if r["name"] == "contacts")


def _check_tags(conn: sqlite3.Connection, workspace_id: int, tag_ids: Iterable[int]) -> list[int]:
    ids = list(dict.fromkeys(tag_ids))
    limits.check_count(len(ids), limits.IMPORT_TAG_IDS,
                       f"An import can tag contacts with at most {limits.IMPORT_TAG_IDS} tags (--tag / tag=).")
    tags.tags_by_id(conn, workspace_id, ids)  # 400 "Tag ID <id> does not exist in this workspace"
    return ids


def _reader(source: Iterable[str], delimiter: str | None) -> tuple[Any, str]:
    """A csv reader of `source` and its delimiter (given, or read from the header line)."""
    if delimiter is not None:
        return csv.reader(source, delimiter=delimiter), delimiter
    lines = iter(source)
    first = next(lines, None)
    if first is None:
        return csv.reader(()), ","
    delimiter = sniff_delimiter(first)
    return csv.reader(itertools.chain([first], lines), delimiter=delimiter), delimiter


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
    if not allows_no_email(conn, workspace_id) or PHONE_TAG not in columns.values():
        raise MktError(400, "The file has no email_address column (map one with --map 'Column=email_address'; "
                            "API: map=Column=email_address).")


class _Notes:
    """The report's calls for the rows read since the last `take`, to be made in order by the
    writer's thread (`replay`)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    def reject(self, line: int, cells: list[str], reason: str, kind: str) -> None:
        self.calls.append((_Report.reject, (line, cells, reason, kind)))

    def warn(self, line: int, reason: str) -> None:
        self.calls.append((_Report.warn, (line, reason)))

    def take(self) -> list[tuple[Callable[..., None], tuple[Any, ...]]]:
        calls, self.calls = self.calls, []
        return calls


def _replay(calls: list[tuple[Callable[..., None], tuple[Any, ...]]], report: _Report) -> None:
    for method, args in calls:
        method(report, *args)


class _Batch(NamedTuple):
    rows: int  # rows read up to the end of this batch (its last line)
    contacts: list[ContactRow]
    notes: list[tuple[Callable[..., None], tuple[Any, ...]]]  # its rejected and warned rows (_Notes)


def _batches(reader: Any, parser: RowParser, batch_size: int, stop: threading.Event) -> Iterator[_Batch]:
    """The file's rows in batches of `batch_size` accepted rows (the last one may be smaller)."""
    notes = _Notes()
    contacts: list[ContactRow] = []
    rows = 0
    for rows, row in _parsed_rows(reader, parser, notes):
        if stop.is_set():
            return
        if row is not None:
            contacts.append(row)
            if len(contacts) >= batch_size:
                yield _Batch(rows, contacts, notes.take())
                contacts = []
    yield _Batch(rows, contacts, notes.take())


def _read_ahead(make: Callable[[threading.Event], Iterator[_Batch]]) -> Iterator[_Batch]:
    """`make(stop)`'s batches, produced in a thread one batch ahead of the caller. Its errors are
    raised here, where the caller reaches them; leaving early (an error, Ctrl-C) stops it
    within a row and waits for it, so it never reads the source after the import returned.

    The thread starts on the next batch only once the caller took the one it made, so two
    batches are held at a time (the one written, the one read), not three: a batch of 20,000
    rows is some 21 MiB of Python objects, and a million-row import on PostgreSQL peaked at
    129.5 MiB with a finished batch waiting beside the two."""
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    taken = threading.Event()  # the caller took the batch handed over: the next may be read
    stop = threading.Event()

    def produce() -> None:
        try:
            for batch in make(stop):
                taken.clear()
                while not stop.is_set():
                    try:
                        handoff.put(("batch", batch), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                del batch
                while not stop.is_set() and not taken.wait(0.1):
                    continue
            handoff.put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            handoff.put(("error", exc))

    reader = threading.Thread(target=produce, name="mkt-import-reader", daemon=True)
    reader.start()
    try:
        while True:
            kind, value = handoff.get()
            taken.set()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
            del value  # written: let it go before the next one is read
    finally:
        stop.set()
        while reader.is_alive():  # it may wait to hand over a batch nobody will take
            try:
                handoff.get_nowait()
            except queue.Empty:
                pass
            reader.join(0.05)


def _parsed_rows(reader: Any, parser: RowParser, report: _Notes) -> Iterator[tuple[int, ContactRow | None]]:
    """(rows read so far, the parsed row or None when it was rejected or blank).

    A row with problems is rejected with all its reasons at once.
    """
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
            report.reject(line, [], f"The line is not valid CSV: {exc}", "csv")
            yield rows, None
            continue
        line = previous_line + 1
        previous_line = reader.line_num
        if not cells:
            continue  # a blank line
        rows += 1
        row = parser.parse(line, cells)
        if isinstance(row, Rejection):
            report.reject(line, cells, row.reason, row.kind)
            yield rows, None
        else:
            if row.email is not None and needs_smtputf8(row.email):
                report.warn(line, NEEDS_SMTPUTF8.format(email=row.email))
            yield rows, row


FILE_NAME_TOO_LONG = f"The file name can hold at most {consents.MAX_FILE_NAME} characters."


def check_file_name(value: Any) -> str | None:
    """The name of the imported file, as the consent ledger keeps it (None: not given)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise MktError(400, "The file name must be text.")
    check_unicode(value, "file_name")
    if len(value) > consents.MAX_FILE_NAME:
        raise MktError(400, FILE_NAME_TOO_LONG)
    return value or None


@contextmanager
def _few_collections() -> Iterator[None]:
    """Python's cyclic garbage collector off while the import runs, and the young objects
    collected once a batch instead (importer's loop).

    A batch is some 400,000 new objects (each row's cells, values, dict), none in a cycle, so the
    collector's runs (one per 700 new objects, and a full pass over every object whenever the
    older generations fill) found nothing and cost a third of reading the rows: 200,000 rows of
    issue 42's list read and checked in 4.1-4.6 s with it, 2.6 s without, and unpickled from the
    parse worker in 3.0 s against 0.5 s. Once a batch, `gc.collect(1)` looks at the objects made
    since the last one, so a cycle made by the import (none known) is still freed, a batch late.
    The worker process (parse_worker.py) is forked inside this, collector off, and collects the
    same way once a batch."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C (or any KeyboardInterrupt) during an import, with what was kept: the batches
    committed before it (`rows` rows read, `created` and `updated` contacts); the batch being
    written was rolled back whole. Still a KeyboardInterrupt for callers that only know that."""

    def __init__(self, rows: int, created: int, updated: int, dry_run: bool) -> None:
        super().__init__(rows, created, updated)
        self.rows, self.created, self.updated, self.dry_run = rows, created, updated, dry_run


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
    delimiter: str | None = None,
    decoding: Decoding | None = None,
    date_format: str | None = None,
    day_first: bool | None = None,
    bad_cells: str = LEAVE_OUT,
    consent_text: str | None = None,
    file_name: str | None = None,
    parse_in_worker: bool = False,
) -> dict[str, Any]:
    """Import CSV text (an open file or any iterable of lines) into the workspace.

    Returns {"rows", "created", "updated", "skipped", "errors": [{"line", "reason"}...]
    (one per rejected file row, the first `max_errors`; "skipped" counts them all),
    "rejections": [{"kind", "count", "reason"}] (the rejected rows by kind, most first),
    "bad_cells", "cells_left_out", "left_out": [{"line", "column", "reason"}] (the cells left
    out, the first `max_errors`), "left_out_by_column": [{"column", "count"}], "warned",
    "warnings" (rows imported with a warning, the same way), "tags_created", "columns"
    {column: merge tag}, "dry_run", "delimiter", "encoding", "encoding_detected"}. A dry run
    validates and looks up every row and reports what would happen, writing nothing.

    `bad_cells`: "leave-out" (a bad optional cell is left out, the row imported) or
    "reject-row" (the row is rejected).

    `delimiter`: `,` `;` tab `|` (also by name), None to read it from the header line.
    `decoding`: how the faces decoded the file (kernel/text_files.py), for the summary.
    `date_format` / `day_first`: how DATE cells other than YYYY-MM-DD are read.
    `consent_text` / `file_name`: the wording and the file the consent ledger records for
    each consent a row changes (with the row's line).
    `parse_in_worker`: on SQLite, read and check a large file's rows in a forked worker process
    while this one writes (parse_worker.py; the CLI asks for it, a server does not fork).
    """
    status = (default_status or "").strip().upper()
    if status not in STATUSES:
        raise MktError(400, STATUS_INVALID)
    batch_size = check_batch_size(batch_size)
    delimiter = check_delimiter(delimiter)
    check_date_options(date_format, day_first)
    bad_cells = check_bad_cells(bad_cells)
    origin = consents.Source("import", consent_text=consents.check_consent_text(consent_text),
                             file_name=check_file_name(file_name))
    tag_list = _check_tags(conn, workspace_id, tag_ids)
    in_worker = parse_in_worker and worth_a_worker(source)
    reader, delimiter = _reader(source, delimiter)
    header = _read_header(reader)
    fields = values.load_fields(conn, workspace_id)
    columns = map_columns(header, fields, mapping, ignore_unknown)
    _check_identity(conn, workspace_id, columns)
    with ExitStack() as stack:
        stack.enter_context(_few_collections())
        lock = None if dry_run else stack.enter_context(held_io_lock(conn, workspace_id, "import"))
        stack.enter_context(import_cache(conn))
        parser = RowParser(len(header), columns, fields, allows_no_email(conn, workspace_id), date_format, day_first,
                           bad_cells)
        report = _Report(header, errors_out, max_errors)
        writer = BatchWriter(conn, workspace_id, fields, tag_list, status, dry_run, report.reject, origin)
        writer.leave_out = report.leave_out
        if parser.leave_out:  # a phone number another contact has is left out too
            writer.phone_index = parser.phone_idx
        rows = 0
        kept = (0, 0, 0)  # (rows, created, updated) of the batches committed so far
        try:
            def batches(stop: threading.Event) -> Iterator[_Batch]:
                return _batches(reader, parser, batch_size, stop)

            ahead = dialect.contacts_import_reads_ahead(conn)
            if ahead:
                source = _read_ahead(batches)
            elif in_worker:
                source = worker_batches(batches)
            else:
                source = batches(threading.Event())
            try:
                with closing(source):  # an error here stops the reader now, not when its traceback is freed
                    for batch in source:
                        rows = batch.rows
                        _replay(batch.notes, report)
                        if batch.contacts:
                            writer.apply(batch.contacts, lock)
                            kept = (rows, writer.created, writer.updated)
                        del batch  # written: not kept while the next one is read
                        gc.collect(1)  # the young objects only (see _few_collections)
                        if progress is not None:
                            progress(rows)
            except BaseException:
                writer.finish(quietly=True)
                raise
            writer.finish()  # field indexes dropped for a large load are built again (batches.py)
        except KeyboardInterrupt:
            raise ImportInterrupted(*kept, dry_run) from None
    return {
        "rows": rows,
        "created": writer.created,
        "updated": writer.updated,
        "skipped": report.skipped,
        "errors": report.errors,
        "rejections": report.rejections(lambda: _contacts_allowed(conn, workspace_id)),
        "bad_cells": bad_cells,
        "cells_left_out": report.cells_left_out,
        "left_out": report.left_out,
        "left_out_by_column": [{"column": c, "count": n} for c, n in report.columns.most_common()],
        "warned": report.warned,
        "warnings": report.warnings,
        "tags_created": writer.tags_created,
        "columns": {header[i]: tag for i, tag in columns.items()},
        "dry_run": dry_run,
        "delimiter": DELIMITERS[delimiter],
        "encoding": (decoding or Decoding("utf-8")).encoding,
        "encoding_detected": (decoding or Decoding("utf-8")).detected,
    }

"""Contact import and export: the names both faces use, from their focused modules.

- kernel/text_files.py: the one check and decoding of uploaded files (UTF-8, a bad
  byte named by line and offset before anything is written);
- services/contacts/columns.py: a CSV header mapped to merge tags, one normaliser per column;
- services/contacts/dates.py: how an import reads dates (--date-format, --day-first / --month-first);
- services/contacts/rows.py: one CSV row checked and normalised into a contact row (a bad
  optional cell left out, or the row rejected: BAD_CELLS);
- services/contacts/importer.py: CSV import (the file read, rows checked, the report);
- services/contacts/batches.py: the import's batched upserts, at most MAX_BATCH_SIZE rows
  per write transaction;
- services/contacts/export.py: CSV / JSON Lines export, streamed in chunks;
- services/contacts/io_lock.py: the workspace's import/export lock, held by a live
  process (renewed by a thread, expires LOCK_SECONDS after its holder dies).
"""

from __future__ import annotations

from marketing_cli.kernel.text_files import (
    NOT_UTF8,
    Decoding,
    check_delimiter,
    check_encoding,
    count_lines,
    decode_text,
    open_text,
    spool_text,
)
from marketing_cli.services.contacts.batches import (
    BATCH_SIZE,
    BATCH_SIZE_RANGE,
    MAX_BATCH_SIZE,
    check_batch_size,
)
from marketing_cli.services.contacts.bulk_load import IMPORT_CACHE_KIB
from marketing_cli.services.contacts.columns import column_key, column_normaliser, map_columns, parse_column_map
from marketing_cli.services.contacts.consents import check_consent_text
from marketing_cli.services.contacts.dates import check_date_options
from marketing_cli.services.contacts.export import (
    EXPORT_CHUNK,
    EXPORT_FORMATS,
    ContactExport,
    begin_export,
    export_contacts,
    iter_contact_rows,
)
from marketing_cli.services.contacts.importer import MAX_ERRORS, check_file_name, import_contacts
from marketing_cli.services.contacts.io_lock import (
    LOCK_SECONDS,
    LOCKED,
    acquire_io_lock,
    held_io_lock,
    io_in_progress,
    lock_owner,
    release_io_lock,
    renew_io_lock,
)
from marketing_cli.services.contacts.rows import BAD_CELLS, LEAVE_OUT, REJECT_ROW, check_bad_cells

__all__ = [
    "BAD_CELLS", "BATCH_SIZE", "BATCH_SIZE_RANGE", "LEAVE_OUT", "REJECT_ROW", "check_bad_cells", "EXPORT_CHUNK", "EXPORT_FORMATS", "IMPORT_CACHE_KIB", "LOCKED", "LOCK_SECONDS",
    "MAX_BATCH_SIZE", "MAX_ERRORS", "NOT_UTF8", "ContactExport", "Decoding", "acquire_io_lock", "begin_export",
    "check_batch_size", "check_consent_text", "check_date_options", "check_file_name", "check_delimiter", "check_encoding", "column_key", "column_normaliser", "count_lines", "decode_text", "export_contacts",
    "held_io_lock", "import_contacts", "io_in_progress", "iter_contact_rows", "lock_owner", "map_columns",
    "open_text", "parse_column_map", "release_io_lock", "renew_io_lock", "spool_text",
]

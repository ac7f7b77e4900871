"""POST /v1/contacts/import and GET /v1/contacts/export (extensions, envelope B / a stream):
the HTTP twins of `mkt contacts import` / `mkt contacts export` over services/bulk.py.

Routed from api/contacts.py, above the `/{contact_id}` paths. Both take seconds at scale,
so the service runs in worker threads and the event loop keeps serving other requests:
the import on the worker thread's own connection, the export on a connection opened for
its stream (the stream's pieces are produced on whichever pool thread is free) and closed,
with the import/export lock released, when the response ends, however it ends.
"""

from __future__ import annotations

import io
import sqlite3
import threading
import time
from typing import Any

import anyio
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from marketing_cli.api.auth import require_workspace
from marketing_cli.api.responses import envelope_b, read_body
from marketing_cli.errors import MktError
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.services.contacts import bulk
from marketing_cli.storage import dialect
from marketing_cli.storage.db import connect

IMPORT_MAX_BYTES = 64 * 1024 * 1024  # a CSV file, not a JSON body: 64 MiB (docs/api.md)
CSV_TYPES = ("text/csv", "application/csv", "text/plain", "application/octet-stream")
EMPTY_BODY = "The request body is empty: send the CSV file (header line first) as the body, Content-Type: text/csv."
WRONG_TYPE = "The request body must be the CSV file itself, sent with Content-Type: text/csv."
EXPORT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    text = raw.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise MktError(400, f"The query parameter '{name}' must be true or false.")


def _tag_ids(request: Request) -> list[int]:
    raws = request.query_params.getlist("tag")
    return [parse_int_id(raw, f"The query parameter 'tag' must be a tag ID (an integer), got {raw!r}.")
            for raw in raws]


async def import_contacts(request: Request) -> Response:
    workspace_id = require_workspace(request)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and content_type not in CSV_TYPES:
        raise MktError(415, WRONG_TYPE)
    # Query parameters are checked before the body is read: a bad call fails fast.
    dry_run = _flag(request, "dry_run")
    ignore_unknown = _flag(request, "ignore_unknown")
    tag_ids = _tag_ids(request)
    status = request.query_params.get("status", "SUBSCRIBED")
    batch_size = bulk.check_batch_size(request.query_params.get("batch_size", bulk.BATCH_SIZE))
    try:
        mapping = bulk.parse_column_map(request.query_params.getlist("map"))
    except ValueError as exc:
        raise MktError(400, f"Invalid query parameter 'map': {exc}.") from None
    delimiter = bulk.check_delimiter(request.query_params.get("delimiter"))
    encoding = request.query_params.get("encoding")
    bulk.check_encoding(encoding)
    date_format = request.query_params.get("date_format") or None
    day_first = _flag(request, "day_first") if "day_first" in request.query_params else None
    bulk.check_date_options(date_format, day_first)
    bad_cells = bulk.check_bad_cells(request.query_params.get("bad_cells", bulk.LEAVE_OUT))
    consent_text = bulk.check_consent_text(request.query_params.get("consent_text"))
    file_name = bulk.check_file_name(request.query_params.get("file_name"))
    raw = await read_body(request, max_bytes=IMPORT_MAX_BYTES, timeout_factor=10)
    if not raw.strip():
        raise MktError(400, EMPTY_BODY)
    # all of it up front: a file that is not UTF-8 (or `encoding`) is refused before any write
    text, decoding = bulk.decode_text(raw, encoding)
    del raw
    db = request.app.state.db
    stop = StopOnShutdown(getattr(request.state, "shutting_down", None))

    def run() -> dict[str, Any]:
        # newline="": the csv module sees the line endings as sent, as with a file opened for it.
        return bulk.import_contacts(
            db.conn(), workspace_id, io.StringIO(text, newline=""), mapping=mapping,
            ignore_unknown=ignore_unknown, tag_ids=tag_ids, default_status=status, dry_run=dry_run,
            batch_size=batch_size, progress=stop.progress, delimiter=delimiter, decoding=decoding,
            date_format=date_format, day_first=day_first, bad_cells=bad_cells, consent_text=consent_text,
            file_name=file_name)

    return envelope_b(await run_in_threadpool(stop.run, db.conn, run))


SHUTTING_DOWN = "The server is shutting down: nothing was imported. Send the file again when it is back."
SHUTTING_DOWN_PART = ("The server is shutting down: the first {rows} rows of the file were imported, the rest "
                      "were not. Send the rest again when it is back.")


class _ShuttingDown(Exception):
    pass


class StopOnShutdown:
    """Stops an HTTP import at a safe point when the server begins a graceful stop (SIGTERM).

    The import commits batch by batch and reports each committed batch to `progress`: that
    is where it stops once the server is stopping, so the client learns exactly how many rows
    were committed (503 with that number) and the server exits within its graceful-shutdown
    time. A batch still running GRACE seconds after the stop began is interrupted and rolled
    back: on SQLite by the connection's progress handler, on PostgreSQL (which has no such
    hook) by a watchdog thread that cancels the running statement. An import that finishes
    answers as usual: its rows are committed.
    """

    GRACE = 2.0

    def __init__(self, event: Any) -> None:
        self.event = event
        self.committed = 0
        self.deadline: float | None = None
        self._ending = threading.Lock()

    def progress(self, rows: int) -> None:
        self.committed = rows
        if self.stopping():
            raise _ShuttingDown

    def stopping(self) -> bool:
        return self.event is not None and self.event.is_set()

    def _interrupt(self) -> int:
        """SQLite's progress handler: non-zero aborts the running statement."""
        if not self.stopping():
            return 0
        if self.deadline is None:
            self.deadline = time.monotonic() + self.GRACE
        return int(time.monotonic() > self.deadline)

    def _watch(self, conn: Any, finished: threading.Event) -> None:
        """PostgreSQL's stand-in for the progress handler: once the stop began, the import has
        GRACE seconds to reach its next committed batch, then its running statement is cancelled
        (sqlite3.OperationalError("interrupted"), as SQLite's interrupt raises)."""
        while not finished.wait(0.2):
            if self.stopping():
                if not finished.wait(self.GRACE):
                    with self._ending:  # never after run() returned: the thread's connection serves others next
                        if not finished.is_set():
                            conn.interrupt()
                return

    def run(self, conn_of: Any, fn: Any) -> dict[str, Any]:
        if self.stopping():
            raise MktError(503, SHUTTING_DOWN)
        conn = conn_of()
        conn.set_progress_handler(self._interrupt, 10_000)
        finished = threading.Event()
        if dialect.postgresql(conn) and self.event is not None:
            threading.Thread(target=self._watch, args=(conn, finished), name="mkt-import-stop", daemon=True).start()
        try:
            return fn()
        except (_ShuttingDown, sqlite3.OperationalError) as exc:
            if not self.stopping() or (isinstance(exc, sqlite3.OperationalError) and "interrupt" not in str(exc)):
                raise
            if self.committed:
                raise MktError(503, SHUTTING_DOWN_PART.format(rows=self.committed)) from None
            raise MktError(503, SHUTTING_DOWN) from None
        finally:
            with self._ending:
                finished.set()
            conn.set_progress_handler(None, 0)


class ExportStream(StreamingResponse):
    """Streams an export begun with the lock held; releases it and closes the connection at the end.

    The cleanup is in __call__'s finally, not in the body generator, so it runs even when the
    body is never iterated (the client left before the first byte) or the client disconnects
    mid-stream; it is shielded from the cancellation a disconnect brings. A pool thread that
    is producing a piece is waited for (anyio's run_sync is not abandoned on cancel), so the
    generator is never closed under it.
    """

    def __init__(self, export: bulk.ContactExport, conn: sqlite3.Connection) -> None:
        self.export = export
        self.conn = conn
        self.pieces = export.chunks(conn)
        super().__init__(
            iterate_in_threadpool(self.pieces), media_type=EXPORT_TYPES[export.fmt],
            headers={"Content-Disposition": f'attachment; filename="contacts.{export.fmt}"'},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.finish)

    def finish(self) -> None:
        try:
            self.pieces.close()
            self.export.release(self.conn)
        finally:
            self.conn.close()


def _begin_export(path: Any, workspace_id: int, fmt: str,
                  fields: list[str] | None) -> tuple[bulk.ContactExport, sqlite3.Connection]:
    conn = connect(path, upgrade=False)
    try:
        return bulk.begin_export(conn, workspace_id, fmt=fmt, fields=fields), conn
    except BaseException:
        conn.close()
        raise


async def export_contacts(request: Request) -> Response:
    workspace_id = require_workspace(request)
    fmt = request.query_params.get("format", "csv")
    raw_fields = request.query_params.get("fields")
    fields = [t.strip() for t in raw_fields.split(",") if t.strip()] if raw_fields else None
    # Validation (400) and the lock (409) happen here, before a byte of the stream is sent.
    export, conn = await run_in_threadpool(_begin_export, request.app.state.db.path, workspace_id, fmt, fields)
    return ExportStream(export, conn)

"""Who runs what: the handlers, gave-up hooks and schedulers that service modules register.

    @jobs.handler("segment.count")     fn(conn, job) runs a claimed job of that type
    @jobs.gave_up("email.send")        fn(conn, job, error) runs in the transaction that fails it for good
    @jobs.scheduler                    fn(conn) runs at the start of a pass and enqueues periodic work

Handlers register in the service module that owns the work: this package names no service.
The services package lists its modules with handlers (`marketing_cli.services.JOB_MODULES`)
and the faces that run jobs load them (`services.load_job_handlers()`); modules named in the
MKT_JOB_MODULES environment variable (comma-separated) are loaded here as plugins. A runner
claims only jobs of the types it has a handler for, so a process that lacks one leaves those
jobs to a runner that has it.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from typing import Any

log = logging.getLogger("mkt.jobs")

Handler = Callable[[sqlite3.Connection, dict[str, Any]], Any]
GaveUp = Callable[[sqlite3.Connection, dict[str, Any], str], Any]
_handlers: dict[str, Handler] = {}
_gave_up: dict[str, GaveUp] = {}
_schedulers: list[Callable[[sqlite3.Connection], Any]] = []
_loaded_plugins = False


def handler(job_type: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _handlers[job_type] = fn
        return fn

    return register


def gave_up(job_type: str) -> Callable[[GaveUp], GaveUp]:
    """Register fn(conn, job, error), run inside the transaction that fails a job of that type for good.

    `job` is what the handler got (id, workspace_id, attempt and the payload's members).
    """
    def register(fn: GaveUp) -> GaveUp:
        _gave_up[job_type] = fn
        return fn

    return register


def _call_gave_up(conn: sqlite3.Connection, job: sqlite3.Row, error: str) -> None:
    fn = _gave_up.get(job["type"])
    if fn is None:
        return
    conn.execute("SAVEPOINT gave_up")
    try:
        fn(conn, {"id": job["id"], "workspace_id": job["workspace_id"], "attempt": job["attempts"],
                  **json.loads(job["payload"])}, error)
    except Exception:  # noqa: BLE001 - the job stays failed; the hook's own writes are undone
        conn.execute("ROLLBACK TO gave_up")
        log.exception("the gave-up hook of job %s (%s) failed", job["id"], job["type"])
    conn.execute("RELEASE gave_up")


def scheduler(fn: Callable[[sqlite3.Connection], Any]) -> Callable[[sqlite3.Connection], Any]:
    _schedulers.append(fn)
    return fn


def load_modules(names: list[str] | tuple[str, ...]) -> None:
    """Import modules that register handlers (a missing module is skipped, a broken one raises)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real import error inside the module
                raise


def load_handlers() -> dict[str, Handler]:
    """The registered handlers, after loading the MKT_JOB_MODULES plugins once."""
    global _loaded_plugins
    if not _loaded_plugins:
        load_modules([m.strip() for m in os.environ.get("MKT_JOB_MODULES", "").split(",") if m.strip()])
        _loaded_plugins = True
    return _handlers

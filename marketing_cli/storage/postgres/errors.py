"""PostgreSQL's errors, raised as the sqlite3 classes the services already catch, and the one that is
answered by running the transaction again.

A serialization failure or a deadlock (SQLSTATE 40001, 40P01) is raised as `Conflict`, which
`retry_conflicts` runs again with bounded, jittered backoff (each retry logged). A statement whose
connection the server dropped, and that cannot simply be tried again, raises OperationalError(LOST).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
# What a statement that lost its connection raises (db.STORAGE_ERRORS answers it 503).
LOST = "the connection to the database was lost"


class IntegrityError(sqlite3.IntegrityError):
    pass


class OperationalError(sqlite3.OperationalError):
    pass


class DatabaseError(sqlite3.DatabaseError):
    pass


class Conflict(OperationalError):
    """A serialization failure or a deadlock (SQLSTATE 40001 / 40P01): the transaction was rolled
    back and may simply be run again (`retry_conflicts`)."""


CONFLICT_STATES = ("40001", "40P01")
CONFLICT_RETRIES = 5
CONFLICT_BACKOFF = 0.05  # seconds, doubled at each retry, with full jitter, capped at 2 s


def retry_conflicts(fn: Callable[[], T], what: str) -> T:
    """fn() (one whole transaction), run again after a serialization failure or a deadlock, at
    most CONFLICT_RETRIES times, sleeping a jittered, doubling backoff; each retry is logged.
    On SQLite (one writer at a time) no Conflict is ever raised: fn runs once."""
    import logging
    import random
    import time

    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            return fn()
        except Conflict as exc:
            if attempt == CONFLICT_RETRIES:
                raise
            delay = random.uniform(0, min(2.0, CONFLICT_BACKOFF * 2 ** attempt))
            logging.getLogger("mkt.db").warning("%s: %s; retry %d of %d in %.3f s", what, str(exc).splitlines()[0],
                                                attempt + 1, CONFLICT_RETRIES, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def mapped(exc: Exception) -> sqlite3.Error:
    import psycopg

    text = str(exc).strip()
    if getattr(exc, "sqlstate", None) in CONFLICT_STATES:
        return Conflict(text)
    if isinstance(exc, psycopg.errors.IntegrityError):
        return IntegrityError(text)
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return OperationalError("interrupted")
    if isinstance(exc, (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction)):
        # A read-only database (a standby, default_transaction_read_only) is SQLite's
        # OperationalError "attempt to write a readonly database": db.STORAGE_ERRORS answers both.
        return OperationalError(text)
    return DatabaseError(text)

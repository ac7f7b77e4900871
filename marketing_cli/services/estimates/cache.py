"""The estimate of a campaign's audience, kept per campaign and state, so a list reads it.

An estimate before the freeze (email) or the expansion (SMS) counts the whole audience: for
SMS one grouped query over it plus a quiet-hours verdict per place, 0.1-0.3 s at 10,000
contacts. A list of 50 such campaigns must not run 50 of them (bench/bench_estimates.py).
So the parts computed from the audience (before the caps, which are applied afresh each
time) are kept in the campaign's `estimate_cache` (schema step 36) with the state they were
computed in:

    the campaign's status, updated_at, scheduled_at and local-time plan, the next run of the
    series it defines, and the workspace's contacts (their count and last change)

and the moment. `show`, the API's GET of one campaign, its create and update answers,
previews and statistics compute afresh and keep what they computed. A list (a `Budget`):

- uses a kept estimate of the same state younger than MAX_AGE seconds;
- else computes afresh, at most FRESH_PER_LIST of them per page, the oldest kept first (`oldest_first`),
  so lists that follow each other refresh them all in turn;
- past that budget, uses a kept estimate of the same campaign state even if the contacts
  changed or it is older (the next list, or the campaign's own page, refreshes it), and
  computes only for a campaign that has none of its state at all (one never read since it
  changed: rare, as its create and update answers keep one).

So a page costs at most FRESH_PER_LIST audience counts however its campaigns and contacts
change (bench/bench_estimates.py). Writing the cache never fails a read: a database busy
with a send leaves it for the next reader.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.estimates.groups import Part, merge

MAX_AGE = 120  # seconds a list trusts a kept estimate of the same state
FRESH_PER_LIST = 2  # estimates a list computes afresh, at most, past those it may reuse (oldest first)
log = logging.getLogger("mkt.estimates")


def contacts_mark(conn: sqlite3.Connection, workspace_id: int) -> str:
    """The workspace's contacts in a word: their count and last change (one index read each)."""
    count, last = conn.execute("SELECT count(*), max(updated_at) FROM contacts WHERE workspace_id = ?",
                               (workspace_id,)).fetchone()
    return f"{count}:{last}"


class Budget:
    """A list's allowance of estimates computed afresh (FRESH_PER_LIST), and the workspace's
    contacts mark read once for the page."""

    def __init__(self, conn: sqlite3.Connection, workspace_id: int) -> None:
        self.mark = contacts_mark(conn, workspace_id)
        self.left = FRESH_PER_LIST


def oldest_first(rows: list[sqlite3.Row]) -> list[sqlite3.Row]:
    """The order a list spends its budget in: campaigns with nothing kept, then the oldest kept."""
    def kept_at(row: sqlite3.Row) -> str:
        return json.loads(row["estimate_cache"]).get("at", "") if row["estimate_cache"] else ""

    return sorted(rows, key=kept_at)


def state_of(row: sqlite3.Row, series_next: str | None, mark: str) -> str:
    """The campaign's own state, then (after the last `|`) the contacts' mark."""
    keys = ("status", "updated_at", "scheduled_at", "local_time", "local_date", "local_time_missed",
            "local_starts_at")
    return json.dumps([*(row[k] for k in keys), series_next]) + "|" + mark


def _dump(parts: list[Part]) -> list[list[Any]]:
    return [[p.state, p.recipients, clock.format_ts(p.until) if p.until else None, p.reason, p.units] for p in parts]


def _load(items: list[list[Any]]) -> list[Part]:
    return [Part(s, n, clock.parse_ts(u) if u else None, r, c) for s, n, u, r, c in items]


def parts(conn: sqlite3.Connection, table: str, row: sqlite3.Row, state: str, budget: Budget | None,
          compute: Callable[[], list[Part]]) -> list[Part]:
    """The audience parts of `row` (a row of `table`) in `state`: without a `budget`, computed
    afresh and kept; with one (a list), as the module's docstring says."""
    now = clock.utcnow()
    if budget is not None and row["estimate_cache"]:
        kept = json.loads(row["estimate_cache"])
        same = kept.get("state") == state
        if same and clock.parse_ts(kept["at"]) > now - timedelta(seconds=MAX_AGE):
            return _load(kept["parts"])
        if budget.left <= 0 and str(kept.get("state", "")).rpartition("|")[0] == state.rpartition("|")[0]:
            return _load(kept["parts"])  # the campaign's state, the contacts since changed: the next list's
    if budget is not None:
        budget.left -= 1
    found = merge(compute())
    _keep(conn, table, row["id"], {"state": state, "at": clock.format_ts(now), "parts": _dump(found)})
    return found


def _keep(conn: sqlite3.Connection, table: str, campaign_id: str, value: dict[str, Any]) -> None:
    from marketing_cli.storage.db import transaction

    if conn.in_transaction:  # a caller's transaction (a test, a job): not ours to commit
        return
    try:
        with transaction(conn):
            conn.execute(f"UPDATE {table} SET estimate_cache = ? WHERE id = ?", (json.dumps(value), campaign_id))
    except sqlite3.Error as exc:  # busy (a send holds the write lock): the next reader keeps it
        log.debug("estimate of %s not kept: %s", campaign_id, exc)

"""Bulk tagging that fires events: POST /v1/tags/{id}/contacts (and .../contacts/remove),
`mkt contacts tag|untag --search|--segment|--file TAG` (docs/api.md, "Tags").

A selection (contacts/tagging.py: a search's filters, a segment, a list of email addresses
or contact ids) is tagged batch by batch, each batch ONE transaction of a handful of
set-based statements whatever its size:

1. contacts/tagging.change_tag: the TAG_ADDED (TAG_REMOVED) events of the contacts whose
   tags change, their contact_tags rows and their `updated_at` (the per-contact endpoints
   write through the same function);
2. triggers.read_until: the event log read through those events, by the statements the
   automations cursor runs for every other change (enrollment per each flow's re-entry
   policy, only ACTIVE flows, segment triggers, goals, waits), and the cursor moved past
   them. So a contact tagged here and one tagged through /v1/contacts/:id/tags/add enter
   the same flows in the same way: the second only waits for the next automations pass.

The events before the selection's (other writers') are read first, in their own
transactions, so the log is still read in order. The function lives here rather than in
contacts/ because reading the log into enrollments is the automations' (contacts sits below
automations and never imports it).

Batches of contacts/tagging.BATCH contacts keep each transaction short on SQLite (one writer
at a time: a concurrent `mkt serve` waits at most one batch; docs/performance.md).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from marketing_cli.services.automations import triggers
from marketing_cli.services.contacts import tagging
from marketing_cli.storage.db import transaction

Progress = Callable[[int, "int | None"], None]


def tag_contacts(conn: sqlite3.Connection, workspace_id: int, tag_id: Any, body: Any, *, add: bool = True,
                 progress: Progress | None = None, batch: int = tagging.BATCH) -> dict[str, Any]:
    """Tag (add=True) or untag the selected contacts; the flows their events trigger take them in.

    {"tag_id", "selected", "tagged"|"untagged", "already_tagged"|"not_tagged", "not_found", "enrolled"}:
    `selected` contacts matched; of them `tagged` got the tag (one TAG_ADDED event each) and
    `already_tagged` had it (no event); `not_found` counts the listed emails or ids that are
    no contact of the workspace (0 for a search or a segment); `enrolled` the enrollments
    those events made. `progress(selected so far, total or None)` after each batch."""
    tag = tagging.tag_row(conn, workspace_id, tag_id)
    selection = tagging.parse_selection(conn, workspace_id, body)
    while triggers.read_events(conn, workspace_id)["events"] >= triggers.EVENT_BATCH:
        pass  # the log's backlog first, as the automations pass reads it, one transaction a batch
    changed = enrolled = 0
    while True:
        with transaction(conn):
            source = selection.next_batch(conn, batch)
            if source is None:
                break
            count, before, last = tagging.change_tag(conn, workspace_id, tag, *source, add=add)
            if count:
                triggers.read_until(conn, workspace_id, before)  # a writer's events between two batches
                made = triggers.read_until(conn, workspace_id, last)["enrolled"]
                if made:
                    triggers.queue_run(conn)  # their first steps now, not at the next scheduled pass
                enrolled += made
            changed += count
        if progress is not None:
            progress(selection.selected, selection.listed)
    done, kept = ("tagged", "already_tagged") if add else ("untagged", "not_tagged")
    return {"tag_id": tag["id"], "selected": selection.selected, done: changed, kept: selection.selected - changed,
            "not_found": selection.not_found, "enrolled": enrolled}


def untag_contacts(conn: sqlite3.Connection, workspace_id: int, tag_id: Any, body: Any, *,
                   progress: Progress | None = None, batch: int = tagging.BATCH) -> dict[str, Any]:
    """POST /v1/tags/{id}/contacts/remove: tag_contacts' twin (TAG_REMOVED)."""
    return tag_contacts(conn, workspace_id, tag_id, body, add=False, progress=progress, batch=batch)

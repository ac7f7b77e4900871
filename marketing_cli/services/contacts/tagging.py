"""A tag put on (or taken off) many contacts at once, in set-based SQL, with its events.

One writer for both paths: `change_tag` tags or untags the contacts a SELECT names in four
statements, whatever their number:

1. one TAG_ADDED (TAG_REMOVED) event per contact whose tags change, that is only those that
   did not have the tag (that had it), appended in contact id order;
2. the contact_tags rows inserted (deleted);
3. those contacts' `updated_at` moved (the fourth reads the newest event id before and after).

The per-contact endpoints (records.add_contact_tags / remove_contact_tags) call it with a
one-contact source per tag (`one_contact`); the bulk path (services/automations/tagging.py, which also enrolls the
flows those events trigger, in the same transaction) with batches of a selection.

A selection is one of a contact search's filters (`search`: its `fields`, `tags` and `status`,
compiled by search.py), a segment (`segment_id`: its stored filters, compiled by
segment_filters.py), or a list (`emails`, `contact_ids`). `Selection.next_batch` reads it in
contact id order after the last id of the batch before (keyset), inside each batch's
transaction, so a long run holds the write lock one batch at a time and no session state
(a temporary table) has to outlive a transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, limits
from marketing_cli.kernel.ids import parse_hex_id, parse_int_id
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.services.contacts.values import normalize_email

INVALID_BODY = "Invalid request body."
SELECTORS = ("search", "segment_id", "emails", "contact_ids")
ONE_SELECTOR = ("Please provide exactly one of 'search', 'segment_id', 'emails' or 'contact_ids' to say which"
                " contacts to tag.")
SEARCH_MEMBERS = ("fields", "tags", "status")
TAG_NOT_FOUND = "We couldn't find a tag with that ID in this workspace."
TAG_INVALID_ID = "Please provide a valid tag ID."
LIST_TOO_LONG = "The member '{member}' can hold at most {limit:,} entries; split the list or use a search or a segment."
LIST_EMPTY = "The member '{member}' must hold at least one entry."
BAD_EMAIL = "The member 'emails' holds an entry that is not an email address: '{value}' (entry {n})."
BAD_CONTACT_ID = "The member 'contact_ids' holds an entry that is not a contact ID: '{value}' (entry {n})."
# Contacts per transaction (SQLite's one writer: a concurrent `mkt serve` waits at most one batch;
# docs/performance.md has the time a batch takes).
BATCH = 5_000


def tag_row(conn: sqlite3.Connection, workspace_id: int, tag_id: Any) -> sqlite3.Row:
    """The tag {id, name} of the path's id; 400 for a malformed id, 404 for one the workspace lacks."""
    tag_id = parse_int_id(tag_id, TAG_INVALID_ID)
    row = conn.execute("SELECT id, name FROM tags WHERE id = ? AND workspace_id = ?", (tag_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(404, TAG_NOT_FOUND)
    return row


# --- the writer ----------------------------------------------------------------------------

_HAS_TAG = "EXISTS (SELECT 1 FROM contact_tags ct WHERE ct.contact_id = s.id AND ct.tag_id = ?)"


def change_tag(conn: sqlite3.Connection, workspace_id: int, tag: Mapping[str, Any], source: str,
               params: Sequence[Any], *, add: bool) -> tuple[int, int, int]:
    """Tag (untag) the contacts that `source` selects (a SELECT of the workspace's contact ids as
    column `id`, each once, with its `params`), inside the caller's transaction: (changed,
    first event id - 1, last event id). Events go only to the contacts whose tags change."""
    kind = "TAG_ADDED" if add else "TAG_REMOVED"
    payload = json.dumps({"tag_id": tag["id"], "tag_name": tag["name"]}, ensure_ascii=False, separators=(",", ":"))
    now = clock.now()
    before = _newest_event(conn, workspace_id)
    changed = conn.execute(
        "INSERT INTO contact_events (workspace_id, contact_id, type, payload, created_at)"
        f" SELECT ?, s.id, ?, ?, ? FROM ({source}) AS s WHERE {'NOT ' if add else ''}{_HAS_TAG} ORDER BY s.id",
        (workspace_id, kind, payload, now, *params, tag["id"])).rowcount
    if not changed:
        return 0, before, before
    last = _newest_event(conn, workspace_id)
    # The contacts whose tags change are exactly those the events just appended name.
    mine = "SELECT contact_id FROM contact_events WHERE workspace_id = ? AND id > ? AND id <= ?"
    if add:
        conn.execute(f"INSERT INTO contact_tags (contact_id, tag_id) SELECT contact_id, ? FROM ({mine}) AS added",
                     (tag["id"], workspace_id, before, last))
    else:
        conn.execute(f"DELETE FROM contact_tags WHERE tag_id = ? AND contact_id IN ({mine})",
                     (tag["id"], workspace_id, before, last))
    conn.execute(f"UPDATE contacts SET updated_at = ? WHERE id IN ({mine})", (now, workspace_id, before, last))
    return changed, before, last


def one_contact(contact_id: str) -> tuple[str, list[Any]]:
    """change_tag's source for one contact (the per-contact endpoints)."""
    return "SELECT id FROM contacts WHERE id = ?", [contact_id]


def _newest_event(conn: sqlite3.Connection, workspace_id: int) -> int:
    return conn.execute("SELECT coalesce(max(id), 0) FROM contact_events WHERE workspace_id = ?",
                        (workspace_id,)).fetchone()[0]


# --- selections ----------------------------------------------------------------------------

@dataclass
class Selection:
    """Which contacts. A search or a segment: `sql` selects their ids (column `id`, written
    `key` in its conditions) after `?` (the last id of the batch before), with `params`
    before that one. A list: `chunks` of at most BATCH distinct entries as JSON arrays, `sql`
    selecting the contacts of the chunk in `?`. `listed` counts a list's distinct entries
    (None for a search or a segment); `selected` the contacts read so far."""

    sql: str
    params: list[Any]
    key: str = "id"
    chunks: list[str] | None = None
    listed: int | None = None
    last: str = ""
    selected: int = 0

    def next_batch(self, conn: sqlite3.Connection, size: int = BATCH) -> tuple[str, list[Any]] | None:
        """change_tag's source for the next `size` contacts in id order (a list's next chunk), None
        when the selection is done. Call inside the batch's transaction, so the batch is read and
        written at one moment. A search's or a segment's batch is the id range it spans, its
        conditions evaluated again by the statements (no list of ids goes through Python or JSON)."""
        while True:
            if self.chunks is None:
                count, upto = conn.execute(f"SELECT count(*), max(id) FROM ({self.sql} ORDER BY id LIMIT ?) AS b",
                                           [*self.params, self.last, size]).fetchone()
                if not count:
                    return None
                source, params = f"{self.sql} AND {self.key} <= ?", [*self.params, self.last, upto]
                self.last = upto
            elif self.chunks:
                source, params = self.sql, [*self.params, self.chunks.pop(0)]
                count = conn.execute(f"SELECT count(*) FROM ({source}) AS b", params).fetchone()[0]
            else:
                return None
            if count:
                self.selected += count
                return source, params

    @property
    def not_found(self) -> int:
        return 0 if self.listed is None else self.listed - self.selected


def parse_selection(conn: sqlite3.Connection, workspace_id: int, body: Any) -> Selection:
    """A selection body ({"search": {...}} | {"segment_id": N} | {"emails": [...]} |
    {"contact_ids": [...]}) checked and compiled; 400 (404 for a missing segment) before any write."""
    body = require_object(body, INVALID_BODY)
    for key in body:
        if key not in SELECTORS:
            raise MktError(400, f"Unknown member '{key}'")
    given = [k for k in SELECTORS if body.get(k) is not None]
    if len(given) != 1:
        raise MktError(400, ONE_SELECTOR)
    kind = given[0]
    if kind == "search":
        return _search(conn, workspace_id, member(body, "search", dict))
    if kind == "segment_id":
        return _segment(conn, workspace_id, body["segment_id"])
    return _listed(conn, workspace_id, kind, member(body, kind, list))


def _search(conn: sqlite3.Connection, workspace_id: int, search: dict[str, Any]) -> Selection:
    from marketing_cli.services.contacts.search import compile_search

    for key in search:
        if key not in SEARCH_MEMBERS:
            raise MktError(400, f"Unknown member 'search.{key}'")
    query = compile_search(conn, workspace_id, {k: v for k, v in search.items() if k in SEARCH_MEMBERS})
    # `where`: the conditions over `contacts` as the search's ordered walk reads them.
    return Selection(f"SELECT id FROM contacts WHERE {query.where} AND id > ?", list(query.params))


def _segment(conn: sqlite3.Connection, workspace_id: int, segment_id: Any) -> Selection:
    from marketing_cli.services.contacts.segment_filters import member_query
    from marketing_cli.services.contacts.segments import get_segment

    segment = get_segment(conn, workspace_id, segment_id)
    query = member_query(conn, workspace_id, segment["filters"], "c.id AS id")
    return Selection(f"{query.sql} AND c.id > ?", list(query.params), key="c.id")


def _listed(conn: sqlite3.Connection, workspace_id: int, kind: str, entries: list[Any]) -> Selection:
    if not entries:
        raise MktError(400, LIST_EMPTY.format(member=kind))
    limits.check_count(len(entries), limits.TAG_LIST,
                       LIST_TOO_LONG.format(member=kind, limit=limits.TAG_LIST))
    values: list[str] = []
    for n, entry in enumerate(entries, 1):
        if kind == "emails":
            try:
                values.append(normalize_email(entry))
            except ValueError:
                raise MktError(400, BAD_EMAIL.format(value=str(entry)[:100], n=n)) from None
        else:
            values.append(parse_hex_id(entry if isinstance(entry, str) else "",
                                       BAD_CONTACT_ID.format(value=str(entry)[:100], n=n)))
    distinct = sorted(set(values))
    chunks = [json.dumps(distinct[i:i + BATCH]) for i in range(0, len(distinct), BATCH)]
    column = "email" if kind == "emails" else "id"
    sql = (f"SELECT c.id AS id FROM contacts c WHERE c.workspace_id = ?"
           f" AND c.{column} IN (SELECT value FROM json_each(?))")
    return Selection(sql, [workspace_id], chunks=chunks, listed=len(distinct))

"""Expansion's first phase (the `sms.expand` job, expansion.py): a QUEUED campaign's
recipients become message rows, and each batch's charge is written to the ledger.

The audience resolver's query (SMS eligibility) runs once into a temporary snapshot, and
each distinct number prefix gets its country and price once; each batch of BATCH_SIZE
recipients (batches.py) becomes message rows in ONE SQL statement (`INSERT ... SELECT ...
ON CONFLICT DO NOTHING`: merge tags rendered and segments counted in SQL, Python only for the texts
SQL cannot measure; country and price joined by prefix), and the batch's charge (an
exact integer SUM) is written to the ledger in the same transaction. A recipient already written (a re-run after a
crash) is ignored by the UNIQUE key, and a batch that wrote nothing charges nothing:
no recipient is ever charged twice. (PostgreSQL writes a batch without ON CONFLICT first and
takes its charge from the statement's RETURNING: _write_batches.) Recipients in countries without a price are
`suppressed`: written, never charged.

Every batch's transaction first checks that the campaign is still QUEUED (batches.still_queued):
a cancel stops the expansion at the next batch.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms.batches import batch_pause, batch_size, next_batch, still_queued
from marketing_cli.services.sms.pricing import Pricing, price_units
from marketing_cli.services.sms.render import Renderer, register_renderer, sql_text
from marketing_cli.services.sms.segments import count_segments
from marketing_cli.storage import dialect
from marketing_cli.storage.db import checkpoint_after, transaction


@contextmanager
def _rows_of_one_campaign(conn: sqlite3.Connection, one_lock: bool) -> Iterator[None]:
    """PostgreSQL's form of _campaign_checked_here, around one batch statement: its per-row
    triggers off (`session_replication_role = replica`, for a role that may set it), so the
    foreign key check of each row's campaign_id does not run (23-38 ms of a 5,000-row batch,
    EXPLAIN ANALYZE). Every row of the statement carries the :cid the transaction has just read
    as QUEUED and locked FOR KEY SHARE (batches.next_batch), the one lock those checks would
    each have taken: the reference holds. sms_messages has no other INSERT trigger
    (tests/sms/test_services_sms.py checks it). A role that may not set it keeps the checks.
    On an error the transaction's rollback restores the setting."""
    if one_lock:
        conn.execute("SET LOCAL session_replication_role = replica")
    yield
    if one_lock:
        conn.execute("SET LOCAL session_replication_role = DEFAULT")


@contextmanager
def _campaign_checked_here(conn: sqlite3.Connection) -> Iterator[None]:
    """Foreign key checks off for one expansion batch's transaction (the pragma cannot change
    inside one). Every row the batch writes belongs to the campaign that the same transaction
    has just read as QUEUED, under the write lock, so the per-row check of sms_messages'
    campaign_id could not fail; it cost 0.27 s per 1,000,000 rows (measured)."""
    enabled = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if enabled else 'OFF'}")


def expand_recipients(conn: sqlite3.Connection, campaign: sqlite3.Row) -> bool:
    """Phase 1: message rows and charges, batch by batch. False when the campaign was cancelled.

    Before the batches, three small steps keep the per-batch statement a plain join: the
    audience is frozen into a snapshot (the contact's rowid and id); each distinct
    number prefix gets its country and price once (Pricing); then each batch reads its slice
    of the snapshot, the contact by rowid (a contact deleted, unsubscribed from SMS or left
    without a number since the snapshot is skipped) and the prefix's row.
    """
    from marketing_cli.services.contacts.audience import resolve_audience
    from marketing_cli.services.sms import links

    workspace_id = campaign["workspace_id"]
    renderer = Renderer(conn, workspace_id, campaign["message"])
    if renderer.has_tags:
        register_renderer(conn, renderer)
    prices = price_units(conn, workspace_id)
    # Links can only appear through the message or a merge tag's value.
    track_links = links.tracking_on(conn, workspace_id) and (
        renderer.has_tags or bool(links.find_urls(renderer.text)))
    snapshot = f"sms_snapshot_{uuid.uuid4().hex}"  # our own name, never user text
    # n numbers the snapshot in contacts' order; rid finds the contact (SQLite: its rowid, and
    # id is the contact's id; PostgreSQL: rid is the id, kept once).
    rid, rid_type = dialect.sms_row_locator(conn)
    query = resolve_audience(conn, workspace_id, json.loads(campaign["audience"]), "sms", f"c.{rid}{_ids(rid, 'c.')}")
    conn.execute(f"CREATE {dialect.sms_work_table(conn)} {snapshot} (n {dialect.sms_serial_key(conn)}, rid {rid_type} NOT NULL"
                 f"{_ids(rid, '', ' TEXT NOT NULL')}, zone TEXT, zone_source TEXT, due_at TEXT)")
    try:
        with Pricing(conn, workspace_id, prices) as pricing:
            # In rowid order: each batch then reads its contacts in table order and appends their
            # ids to sms_messages' (campaign_id, contact_id) key. Without it, an index plan (by
            # phone, without ANALYZE's statistics) made each batch's rows land all over the key:
            # 3.4 s against 1.8 s at 200,000 recipients. With a table scan the order is free.
            if campaign["local_time"]:
                _snapshot_local(conn, campaign, snapshot)
            else:
                conn.execute(f"INSERT INTO {snapshot} (rid{_ids(rid)}) {query.sql} ORDER BY c.{rid}", query.params)
            dialect.sms_serial_index(conn, snapshot)
            last = conn.execute(f"SELECT MAX(n) FROM {snapshot}").fetchone()[0] or 0
            pricing.resolve(f"SELECT c.phone FROM {snapshot} s JOIN contacts c ON c.{rid} = s.rid", size=last)
            # SQLite: one form, ON CONFLICT DO NOTHING. PostgreSQL: the three guards, each
            # answering the batch's summary (see _write_batches).
            pg = dialect.postgresql(conn)
            forms = {guard: _batch_statement(campaign["message"], renderer, snapshot, pricing, guard, summary=pg,
                                             track_links=track_links)
                     for guard in ((CONFLICT, NOT_EXISTS, BARE) if pg else (CONFLICT,))}
            # A number changed since the snapshot is priced as it now is: by SQL's call into Python,
            # or (SQL that cannot call Python) resolved right after its batch's statement, before
            # the charge (Pricing.price_unresolved).
            return _write_batches(conn, campaign, forms, last, prices, track_links, pricing.price_unresolved)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {snapshot}")


def _ids(rid: str, prefix: str = "", kind: str = "") -> str:
    """The snapshot's id column (`, id`, with `prefix` and `kind`) where rid is not the contact's
    id (SQLite's rowid); nothing where it is (PostgreSQL)."""
    return "" if rid == "id" else f", {prefix}id{kind}"


def _snapshot_local(conn: sqlite3.Connection, campaign: sqlite3.Row, snapshot: str) -> None:
    """The snapshot of a local-time campaign: each recipient's zone and its source in the one
    INSERT ... SELECT (the audience query reads them, services/contacts/zones.py), then each
    zone's instant computed once (services/contacts/local_time.py); recipients whose time had
    passed under `skip` leave the snapshot (counted on the campaign)."""
    from marketing_cli.kernel.localtime import local_instant
    from marketing_cli.services.contacts import local_time, zones
    from marketing_cli.services.contacts.audience import resolve_audience

    day, hhmm, missed, start = local_time.plan_day(campaign)
    rid = dialect.sms_row_locator(conn)[0]
    with zones.Zones(conn, campaign["workspace_id"], local_instant(day, hhmm, "UTC")) as found:
        found.resolve()
        query = resolve_audience(conn, campaign["workspace_id"], json.loads(campaign["audience"]), "sms",
                                 f"c.{rid} AS rid{_ids(rid, 'c.')}, {found.columns('c')}", found.join("c"))
        sql, params = found.select(query, f"a.rid{_ids(rid, 'a.')}")
        conn.execute(f"INSERT INTO {snapshot} (rid{_ids(rid)}, zone, zone_source) {sql} ORDER BY a.rid", params)
    due = f"{snapshot}_due"
    try:
        names = [r[0] for r in conn.execute(f"SELECT DISTINCT zone FROM {snapshot}")]
        local_time.fill_due_table(conn, due, names, day, hhmm, missed, start)
        skipped = conn.execute(f"DELETE FROM {snapshot} WHERE zone IN (SELECT zone FROM {due} WHERE due_at IS NULL)"
                               ).rowcount
        conn.execute(f"UPDATE {snapshot} SET due_at = (SELECT d.due_at FROM {due} d WHERE d.zone = {snapshot}.zone)")
        with transaction(conn):
            conn.execute("UPDATE sms_campaigns SET local_time_skipped = ? WHERE id = ?", (skipped, campaign["id"]))
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {due}")


CONFLICT, NOT_EXISTS, BARE = "on conflict", "not exists", "bare"  # _batch_statement's guards


def _batch_statement(message: str, renderer: Renderer, snapshot: str, pricing: Pricing,
                     guard: str = CONFLICT, summary: bool = False, track_links: bool = False) -> str:
    """The INSERT of one batch's message rows (parameters :start, :end, :cid, :batch, :now).

    `guard`, how a recipient already written is met: CONFLICT, left out by ON CONFLICT DO
    NOTHING; NOT_EXISTS, left out by NOT EXISTS on the (campaign, contact) key; BARE, not looked
    for (a unique violation: the forms PostgreSQL tries first, see _write_batches).
    `summary` (PostgreSQL, parameter :message): the statement answers one row about the rows
    it wrote (_summary) from their RETURNING, so that the batch need not read them again;
    `track_links`: whether it must count the pending texts with "http" in them."""
    country, units = pricing.country("c.phone"), pricing.units("c.phone")
    rid = dialect.sms_row_locator(pricing.conn)[0]
    written = (" AND NOT EXISTS (SELECT 1 FROM sms_messages w WHERE w.campaign_id = :cid AND w.contact_id = c.id)"
               if guard == NOT_EXISTS else "")
    conflict = " ON CONFLICT DO NOTHING" if guard == CONFLICT else ""
    returning = f" RETURNING {_summary(renderer, track_links)}" if summary else ""
    # (PostgreSQL: the snapshot's rid is the contact's id: one equality, not two that the planner
    # takes for independent filters, estimating one row per batch.)
    key = f"c.{rid} = s.rid" + ("" if rid == "id" else " AND c.id = s.id")
    recipients = (f"FROM {snapshot} s JOIN contacts c ON {key}{pricing.join('c.phone')}"
                  " WHERE s.n > :start AND s.n <= :end AND c.phone IS NOT NULL AND c.phone <> ''"
                  f" AND (c.sms_status IS NULL OR c.sms_status = 'SUBSCRIBED'){written}")
    columns = ("INSERT INTO sms_messages (campaign_id, contact_id, batch, phone, country, body,"
               " encoding, segments, price_units, status, created_at, zone, zone_source, due_at)")
    if not renderer.has_tags:  # one text for all: its encoding and segments are values of ours
        fixed = count_segments(renderer.text)
        body = "NULL" if renderer.text == message else sql_text(renderer.text)  # NULL: the message as written
        return (("WITH ins AS (" if summary else "") +
                f"{columns} SELECT :cid, c.id, :batch, c.phone, {country}, {body}, '{fixed.encoding}',"
                f" {int(fixed.segments)}, COALESCE(({units}) * {int(fixed.segments)}, 0),"
                f" CASE WHEN ({units}) IS NULL THEN 'suppressed' ELSE 'pending' END, :now, s.zone, s.zone_source,"
                f" s.due_at {recipients}{conflict}{returning}")
    # Two steps, each MATERIALIZED so that its columns are computed once per recipient: b
    # reads the tags' texts (one json_extract each), r renders and measures from them.
    # m packs a message's measure in one integer: segments * 2, plus 1 for UCS-2.
    texts = renderer.texts_sql("c")
    body, measure = renderer.rendered_sql("b")
    return (f"WITH b AS MATERIALIZED (SELECT c.id, c.phone, {country} AS country, {units} AS units,"
            f" s.zone AS zone, s.zone_source AS zone_source, s.due_at AS due_at, {texts}"
            f" {recipients}), r AS MATERIALIZED (SELECT b.id, b.phone, b.country, b.units, {body} AS body,"
            f" {measure} AS m, b.zone, b.zone_source, b.due_at FROM b){', ins AS (' if summary else ' '}{columns}"
            " SELECT :cid, r.id, :batch, r.phone, r.country, r.body, CASE WHEN r.m & 1 = 1 THEN 'UCS-2' ELSE 'GSM-7'"
            " END, r.m >> 1, COALESCE(r.units * (r.m >> 1), 0),"
            " CASE WHEN r.units IS NULL THEN 'suppressed' ELSE 'pending' END, :now, r.zone, r.zone_source, r.due_at"
            f" FROM r WHERE true{conflict}{returning}")


# A batch's pending messages and their price. PostgreSQL's form tests the status per row: with
# `status = 'pending'` in the WHERE it may read the batch through the partial index
# sms_messages_pending (campaign_id, id), every pending row of the campaign for each batch
# (65 ms per 5,000-row batch at 100,000 recipients, growing with the campaign), where this
# form reads the batch by sms_messages_batch (16 ms). SQLite already reads it by
# sms_messages_batch with either form.
_BATCH_CHARGE = ("SELECT COUNT(*), COALESCE(SUM(price_units), 0) FROM sms_messages"
                 " WHERE campaign_id = ? AND batch = ? AND status = 'pending'")
# The charge of a batch's rows, one definition for both reads below: its pending messages, their price.
_CHARGE_COLUMNS = ("COALESCE(SUM(CASE WHEN status = 'pending' THEN 1 END), 0),"
                   " COALESCE(SUM(CASE WHEN status = 'pending' THEN price_units END), 0)")


def _summary(renderer: Renderer, track_links: bool) -> str:
    """What a PostgreSQL batch's statement answers about the rows it wrote (the RETURNING columns
    and the SELECT over them): how many, how many pending and their price (the charge), how
    many without a country (Pricing.price_unresolved has work), how many pending with "http"
    in their text (links.shorten_batch has work). When neither has work, the batch reads none
    of its rows again. Each row's cost is kept to what the campaign needs: "http" is looked
    for in each text only for a campaign with merge tags and tracked links (one text for all:
    it is looked for once, here; no tracking: nothing to count). Measured per 1,000,000 rows
    (server CPU, load 20): 2.0-2.3 s for the summary with a CASE and a pattern per row, 0.9 s
    of it the pattern, 0.3 s for a count alone."""
    if not track_links or not renderer.has_tags:
        linked = "COUNT(*) FILTER (WHERE status = 'pending')" if track_links and "http" in renderer.text.lower() \
            else "0"
        columns = "status, price_units, country"
    else:
        linked = "COUNT(*) FILTER (WHERE status = 'pending' AND COALESCE(body, :message) ILIKE '%http%')"
        columns = "status, price_units, country, body"
    return (f"{columns}) SELECT COUNT(*), COUNT(*) FILTER (WHERE status = 'pending'),"
            " COALESCE(SUM(price_units) FILTER (WHERE status = 'pending'), 0),"
            f" COUNT(*) FILTER (WHERE country IS NULL), {linked} FROM ins")


_BATCH_CHARGE_PG = f"SELECT {_CHARGE_COLUMNS} FROM sms_messages WHERE campaign_id = ? AND batch = ?"


def _write_batches(conn: sqlite3.Connection, campaign: sqlite3.Row, forms: dict[str, str], last: int,
                   prices: dict[str, int], track_links: bool, after_insert: Any) -> bool:
    """Snapshot rows 1..last, BATCH_SIZE at a time: each batch's rows and its charge in one
    transaction that first checks the campaign is still QUEUED. False when it is not.

    SQLite writes each batch with `forms[CONFLICT]` (ON CONFLICT DO NOTHING). PostgreSQL's
    speculative insertion for ON CONFLICT measured 1.5-1.8x a plain INSERT of the same 100,000
    rows, so there a batch is written first without it: BARE (no guard at all) while the
    campaign had no message when this run began, NOT_EXISTS (leaves out the rows an earlier
    run wrote) when it resumes one. Writers hold the write lock (BEGIN IMMEDIATE), and the
    snapshot holds each contact once, so neither form should meet a written row; should one
    anyway (a unique violation), the batch's transaction is rolled back and the batch runs
    again, in a new one, with ON CONFLICT (no savepoint: two round trips and a subtransaction
    less for every batch that meets none).
    A PostgreSQL batch's statement also answers its summary (_summary): the charge without
    reading the rows again, unless prices or links changed some (after_insert, shorten_batch).
    The foreign key check of each row's campaign is replaced by one lock of the campaign row
    where the role may (_rows_of_one_campaign)."""
    cid = campaign["id"]
    pg = dialect.postgresql(conn)
    one_lock = pg and dialect.sms_may_skip_row_triggers(conn)
    # no automatic checkpoint between the batches (storage/db.checkpoint_after): at 1,000,000
    # recipients 2.1-2.2x the raw statement's CPU with it, 1.8-1.9x without
    with checkpoint_after(conn):
        size, start, first = batch_size(), 0, None
        while start < last:
            params = {"start": start, "end": start + size, "cid": cid, "message": campaign["message"]}
            try:
                batch = _write_batch(conn, campaign, forms, params, first, prices, track_links, after_insert, one_lock)
            except sqlite3.IntegrityError:
                if not pg:
                    raise
                batch = _write_batch(conn, campaign, {BARE: forms[CONFLICT], NOT_EXISTS: forms[CONFLICT]}, params,
                                     first, prices, track_links, after_insert, one_lock)
            if batch is None:
                return False
            first = batch if first is None else first
            start += size
            jobs.heartbeat(conn)
            batch_pause()
    with transaction(conn):
        if not still_queued(conn, cid):
            return False
        conn.execute("UPDATE sms_campaigns SET expanded_at = ?, updated_at = ? WHERE id = ?",
                     (clock.now(), clock.now(), cid))
    return True


def _write_batch(conn: sqlite3.Connection, campaign: sqlite3.Row, forms: dict[str, str], params: dict[str, Any],
                 first: int | None, prices: dict[str, int], track_links: bool, after_insert: Any,
                 one_lock: bool) -> int | None:
    """One batch's transaction (_write_batches): its number, or None when the campaign is no longer
    QUEUED. `first`: the number of this run's first batch (None: this is it)."""
    from marketing_cli.services.sms import links

    workspace_id, cid = campaign["workspace_id"], campaign["id"]
    pg = dialect.postgresql(conn)
    with _campaign_checked_here(conn), transaction(conn):
        batch = next_batch(conn, cid, lock=pg)
        if batch is None:
            return None
        params = {**params, "batch": batch, "now": clock.now()}
        if not pg:
            before = conn.total_changes  # (rowcount is -1 for a statement that starts with WITH)
            conn.execute(forms[CONFLICT], params)
            written, reread, unresolved, linked = conn.total_changes - before, True, 1, 1
        else:
            with _rows_of_one_campaign(conn, one_lock):
                summary = conn.execute(forms[BARE if (first or batch) == 1 else NOT_EXISTS], params).fetchone()
            written, pending, units, unresolved, linked = summary
            reread = bool(unresolved) or bool(linked and track_links)
        if written > 0 and unresolved:
            after_insert(cid, batch)
        if written > 0 and track_links and linked:
            # short links change the text as sent: before the charge
            links.shorten_batch(conn, workspace_id, cid, batch, campaign["message"], prices)
        if written > 0:
            if reread:
                pending, units = conn.execute(_BATCH_CHARGE_PG if pg else _BATCH_CHARGE, (cid, batch)).fetchone()
            if units > 0:
                ledger.append(conn, workspace_id, "charge", -ledger.from_units(units),
                              f"Campaign '{campaign['name']}': {pending:,} messages (batch {batch})",
                              campaign_id=cid, batch=batch)
    return batch

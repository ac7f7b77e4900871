"""Preparing an email send: the audience frozen into one message per recipient, the
content checked again, then the send job queued.

    email.preprocess   QUEUED -> PREPROCESSING: one email_messages row per recipient
                       (A/B: the test share split evenly, the rest held back), then
                       IN_REVIEW (content checked again) -> SENDING, and email.send queued
                       (services/delivery/sender.py sends)

The freeze is idempotent: recipients are ranked by a keyed hash of their id (the same
order on every run), written in batches with INSERT OR IGNORE, so a rerun after a crash
completes the same assignment. A preparation whose job fails for good (`@jobs.gave_up`)
takes the campaign back to DRAFT with the reason: nothing was handed over yet.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.kernel.localtime import local_instant
from marketing_cli.services.email import campaigns, stats
from marketing_cli.services.email.schedule import content_problems
from marketing_cli.storage import dialect
from marketing_cli.storage.db import transaction

FREEZE_BATCH = 5_000
DOMAIN = "lower(substr(email, instr(email, '@') + 1))"  # a message's mail domain, from its `email` column
PREPARE_GAVE_UP = ("The send could not be prepared: the job failed for good ({error}). Nothing was sent; "
                   "fix the cause and schedule the campaign again.")


def load_campaign(conn: sqlite3.Connection, campaign_id: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()


def load_variants(conn: sqlite3.Connection, campaign_id: str) -> dict[str, sqlite3.Row]:
    return {r["type"]: r for r in conn.execute("SELECT * FROM campaign_variants WHERE campaign_id = ?", (campaign_id,))}


def freeze_audience(conn: sqlite3.Connection, row: sqlite3.Row) -> int:
    """Write one message per recipient (A/B: test share split, the rest held back); returns the total.

    The snapshot is a temporary table. On SQLite it lives across the batches' transactions (the
    file's one write lock is released between batches); on PostgreSQL the whole freeze is one
    transaction, so the temporary tables live and die inside it: nothing outlives a transaction,
    which a pooler in transaction mode (PgBouncer) needs, as each transaction may get another
    session.
    """
    with transaction(conn) if dialect.postgresql(conn) else contextlib.nullcontext():
        return _freeze_audience(conn, row)


def _freeze_audience(conn: sqlite3.Connection, row: sqlite3.Row) -> int:
    """freeze_audience's work.

    A local-time campaign also gives each recipient its zone, the zone's source and its due
    instant (services/contacts/zones.py, local_time.py), all in the snapshot's one
    INSERT ... SELECT and a join on a table of one row per zone; recipients are numbered
    earliest zone first, so the sender's claim (in id order) meets the due rows first.
    Skipped recipients (their time had passed, `skip`) get no message and are counted on the
    campaign."""
    from marketing_cli.services.contacts.audience import resolve_audience

    query = resolve_audience(conn, row["workspace_id"], json.loads(row["audience"]), "email", "c.id, c.email")
    variants = load_variants(conn, row["id"])
    rank, rank_params = dialect.email_rank(conn, row["id"], "id")
    table = "temp.mkt_freeze"  # fixed name of ours, per connection
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute("DROP TABLE IF EXISTS temp.mkt_freeze_due")
    conn.execute(f"CREATE TABLE {table} (position {dialect.position_column(conn)}, id TEXT NOT NULL,"
                 " email TEXT NOT NULL, zone TEXT, zone_source TEXT, due_at TEXT)")
    try:
        if row["local_time"]:
            _snapshot_local(conn, row)
        else:
            conn.execute(f"INSERT INTO {table} (id, email) SELECT id, email FROM ({query.sql}) a"
                         f" ORDER BY {rank}, id", (*query.params, *rank_params))
        total = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for low, high, target in _shares(row, total):
            for start in range(low, high, FREEZE_BATCH):
                _freeze_batch(conn, row["id"], target and variants[target]["id"], start, min(high, start + FREEZE_BATCH))
                jobs.heartbeat(conn)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("DROP TABLE IF EXISTS temp.mkt_freeze_due")
    return total


def _snapshot_local(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """The snapshot of a local-time campaign: zone and source per recipient in SQL (the
    audience query reads them, services/contacts/zones.py), each zone's instant computed
    once (services/contacts/local_time.py), earliest first; skipped recipients leave the
    snapshot."""
    from marketing_cli.services.contacts import local_time, zones
    from marketing_cli.services.contacts.audience import resolve_audience

    day, hhmm, missed, start = local_time.plan_day(row)
    with zones.Zones(conn, row["workspace_id"], local_instant(day, hhmm, "UTC")) as found:
        found.resolve()
        query = resolve_audience(conn, row["workspace_id"], json.loads(row["audience"]), "email",
                                 f"c.id, c.email, {found.columns('c')}", found.join("c"))
        sql, params = found.select(query, "a.id, a.email")
        conn.execute("DROP TABLE IF EXISTS temp.mkt_freeze_zones")
        conn.execute(f"CREATE TEMP TABLE mkt_freeze_zones AS {sql}", params)
    try:
        names = [r[0] for r in conn.execute("SELECT DISTINCT zone FROM temp.mkt_freeze_zones")]
        local_time.fill_due_table(conn, "temp.mkt_freeze_due", names, day, hhmm, missed, start)
        rank, rank_params = dialect.email_rank(conn, row["id"], "f.id")
        conn.execute("INSERT INTO temp.mkt_freeze (id, email, zone, zone_source, due_at)"
                     " SELECT f.id, f.email, f.zone, f.zone_source, d.due_at FROM temp.mkt_freeze_zones f"
                     " JOIN temp.mkt_freeze_due d ON d.zone = f.zone WHERE d.due_at IS NOT NULL"
                     f" ORDER BY d.due_at, {rank}, f.id", rank_params)
        skipped = conn.execute("SELECT count(*) FROM temp.mkt_freeze_zones f JOIN temp.mkt_freeze_due d"
                               " ON d.zone = f.zone WHERE d.due_at IS NULL").fetchone()[0]
        with transaction(conn):
            conn.execute("UPDATE campaigns SET local_time_skipped = ? WHERE id = ?", (skipped, row["id"]))
    finally:
        conn.execute("DROP TABLE IF EXISTS temp.mkt_freeze_zones")


def _shares(row: sqlite3.Row, total: int) -> list[tuple[int, int, str | None]]:
    """Position ranges (1-based, half-open) and their variant; None = held back for the winner."""
    if row["type"] != "AB_TESTING":
        return [(1, total + 1, "A")]
    ab = json.loads(row["ab_test"] or "{}") or {"test_percentage": 100}
    test = total if ab["test_percentage"] >= 100 else round(total * ab["test_percentage"] / 100)
    half = (test + 1) // 2
    return [(1, half + 1, "A"), (half + 1, test + 1, "B"), (test + 1, total + 1, None)]


# A contact erased since the snapshot was taken (services/privacy/erase.py) gets no message: on
# SQLite the snapshot outlives the batches' transactions (freeze_audience), so each batch keeps
# only the recipients still in contacts (one primary-key probe per recipient).
_STILL_HERE = "EXISTS (SELECT 1 FROM contacts c WHERE c.id = f.id)"


def _freeze_batch(conn: sqlite3.Connection, campaign_id: str, variant_id: str | None, start: int, end: int) -> None:
    with transaction(conn):
        if variant_id is None:
            conn.execute("INSERT OR IGNORE INTO email_ab_holdout (campaign_id, contact_id, email)"
                         f" SELECT ?, id, email FROM temp.mkt_freeze f WHERE position >= ? AND position < ?"
                         f" AND {_STILL_HERE}", (campaign_id, start, end))
            return
        conn.execute(
            "INSERT OR IGNORE INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider,"
            f" created_at, zone, zone_source, due_at) SELECT ?, ?, id, email, {DOMAIN},"
            f" {stats.provider_sql(conn, DOMAIN)}, ?, zone, zone_source,"
            f" due_at FROM temp.mkt_freeze f WHERE position >= ? AND position < ? AND {_STILL_HERE} ORDER BY position",
            (campaign_id, variant_id, clock.now(), start, end))


@jobs.handler("email.preprocess")
def preprocess(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    campaign_id = payload["campaign_id"]
    row = load_campaign(conn, campaign_id)
    if row is None or row["status"] not in ("QUEUED", "PREPROCESSING"):
        return  # cancelled, or already past this step
    if row["status"] == "QUEUED":
        campaigns.set_campaign_status(conn, campaign_id, "PREPROCESSING")
    freeze_audience(conn, row)
    campaigns.set_campaign_status(conn, campaign_id, "IN_REVIEW")
    problems = [p for v in load_variants(conn, campaign_id).values()
                for p in content_problems(conn, row["workspace_id"], v)]
    with transaction(conn):
        if problems:  # the content was checked at schedule time; this catches what changed since
            conn.execute("DELETE FROM email_messages WHERE campaign_id = ?", (campaign_id,))
            conn.execute("DELETE FROM email_ab_holdout WHERE campaign_id = ?", (campaign_id,))
            campaigns.set_campaign_status(conn, campaign_id, "DRAFT", detail=" ".join(problems))
            return
        campaigns.set_campaign_status(conn, campaign_id, "SENDING")
        conn.execute("UPDATE campaigns SET send_started_at = ? WHERE id = ?", (clock.now(), campaign_id))
        jobs.enqueue(conn, "email.send", {"campaign_id": campaign_id}, workspace_id=row["workspace_id"],
                     dedupe_key=f"email.send:{campaign_id}")


@jobs.gave_up("email.preprocess")
def preprocess_gave_up(conn: sqlite3.Connection, job: dict[str, Any], error: str) -> None:
    """Nothing was handed over yet: the campaign goes back to DRAFT with the reason."""
    row = load_campaign(conn, job["campaign_id"])
    if row is None or row["status"] not in ("QUEUED", "PREPROCESSING", "IN_REVIEW"):
        return
    conn.execute("DELETE FROM email_messages WHERE campaign_id = ?", (row["id"],))
    conn.execute("DELETE FROM email_ab_holdout WHERE campaign_id = ?", (row["id"],))
    campaigns.set_campaign_status(conn, row["id"], "DRAFT", detail=PREPARE_GAVE_UP.format(error=error.rstrip(".")))

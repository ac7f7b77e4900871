"""Erasing one person in a big workspace: 1,000,000 contacts and 1,000,000 events (full) or
20,000 of each (--quick), on SQLite.

One temporary database. Contacts are written set-based (one INSERT ... SELECT, each with an
email address, a phone number, two field values and tags), events the same way (one per
contact on average, spread over them, as custom events with properties). The people who are
erased also got an email message and a text each (one campaign of each kind), so the erase
does its message work too.

Rows (medians; baselines measured in the same run, on contacts of the same shape):
- the erase (services/privacy/erase.py, with suppression: the log read for the person's events,
  then one write transaction that reads the catalog, strips the messages, deletes the events
  by id, the tags and the contact, hashes and suppresses) against a bare DELETE of the same
  person's rows (events, tags, email and SMS messages, the contact) in one transaction. Both
  read the workspace's log for the person's events: the schema has no index of events by
  contact. Target: <= 500 ms at 1,000,000 events (an HTTP call a person waits for).
- the erase's write transaction alone (the log read is done before it, holding no lock)
  against the bare DELETE's, which reads the log under the write lock: what every other writer
  waits behind. Target: <= 50 ms.
- why there is no such index: the bare DELETE with an index on contact_events(contact_id, id)
  against without it (what it would save an erase), and an event appended (one per
  transaction, as POST /v1/events and a tag change append them) with that index against
  without it (what it would cost every event).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import row  # noqa: E402

from marketing_cli.kernel import clock  # noqa: E402
from marketing_cli.storage.db import connect, transaction  # noqa: E402

CONTACTS = (
    "INSERT INTO contacts (id, workspace_id, email, phone, status, data, created_at, updated_at)"
    " WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < :n)"
    " SELECT printf('%024x', i), :ws, 'user' || i || '@example.com', '+1415' || printf('%07d', i), 'SUBSCRIBED',"
    " json_object(:city, 'City ' || (i % 500), :plan, 'plan ' || (i % 3)), :now, :now FROM seq")
TAGS = ("INSERT INTO contact_tags (contact_id, tag_id) WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1"
        " FROM seq WHERE i + 1 < :n) SELECT printf('%024x', i), :a FROM seq UNION ALL"
        " SELECT printf('%024x', i), :b FROM seq WHERE i % 2 = 0")
EVENTS = (
    "INSERT INTO contact_events (workspace_id, contact_id, type, payload, created_at)"
    " WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < :n)"
    " SELECT :ws, printf('%024x', (i * 7919) % :n), 'CUSTOM_EVENT',"
    " json_object('name', 'order', 'properties', json_object('total', i % 100, 'sku', 'A' || i)), :now FROM seq")
APPENDS = 5_000
APPEND = "INSERT INTO contact_events (workspace_id, contact_id, type, payload, created_at) VALUES (?, ?, ?, ?, ?)"


def _bare_delete(conn, contact_id: str, sms_campaign: str) -> None:  # noqa: ANN001
    with transaction(conn):
        conn.execute("DELETE FROM contact_events WHERE contact_id = ?", (contact_id,))
        conn.execute("DELETE FROM contact_tags WHERE contact_id = ?", (contact_id,))
        conn.execute("DELETE FROM email_messages WHERE contact_id = ?", (contact_id,))
        conn.execute("DELETE FROM sms_messages WHERE campaign_id = ? AND contact_id = ?", (sms_campaign, contact_id))
        conn.execute("DELETE FROM contacts WHERE id = ?", (contact_id,))


def _median(times: list[float]) -> float:
    times = sorted(times)
    return times[len(times) // 2]


def _build(conn, ws: int, n: int, people: list[str]) -> tuple[str, str]:  # noqa: ANN001
    """The workspace's contacts, tags and events, and a sent email and SMS campaign to `people`."""
    from marketing_cli.kernel.ids import new_id
    from marketing_cli.services.email import stats
    from tests import factories as f

    now = clock.now()
    city, plan = f.field(conn, ws, "city"), f.field(conn, ws, "plan")
    vip, news = f.tag(conn, ws, "vip"), f.tag(conn, ws, "news")
    with transaction(conn):
        conn.execute(CONTACTS, {"n": n, "ws": ws, "city": str(city), "plan": str(plan), "now": now})
        conn.execute(TAGS, {"n": n, "a": vip, "b": news})
        conn.execute(EVENTS, {"n": n, "ws": ws, "now": now})
        conn.execute("INSERT INTO usage_counters (workspace_id, resource, period, used) VALUES (?, 'contacts', '', ?)"
                     " ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = excluded.used", (ws, n))
    campaign = f.email_campaign(conn, ws)
    ids = stats.add_messages(conn, campaign["id"], campaign["variants"]["A"],
                             [(p, f"user{int(p, 16)}@example.com") for p in people])
    stats.record_deliveries(conn, ids)
    sms = new_id()
    with transaction(conn):
        conn.execute("INSERT INTO sms_campaigns (id, workspace_id, name, message, status, created_at, updated_at)"
                     " VALUES (?, ?, 'Bench', 'Hello', 'COMPLETED', ?, ?)", (sms, ws, now, now))
        conn.executemany("INSERT INTO sms_messages (campaign_id, contact_id, batch, phone, country, encoding, segments,"
                         " price_units, status, handed_at, created_at) VALUES (?, ?, 0, ?, 'US', 'GSM-7', 1, 830,"
                         " 'sent', ?, ?)",
                         [(sms, p, f"+1415{int(p, 16):07d}", now, now) for p in people])
    return campaign["id"], sms


def run(quick: bool) -> list[dict]:
    from marketing_cli.services.account import workspaces
    from marketing_cli.services.privacy import erase

    n = 20_000 if quick else 1_000_000
    k = 15 if quick else 21  # people erased, and as many deleted bare
    label = f"{n:,} contacts, {n:,} events"
    step = n // (3 * k + 1)
    erased = [f"{(i + 1) * step:024x}" for i in range(k)]
    bare = [f"{(i + 1) * step + 1:024x}" for i in range(k)]
    indexed = [f"{(i + 1) * step + 2:024x}" for i in range(k)]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        conn = connect(Path(tmp) / "bench.db")
        ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
        _, sms = _build(conn, ws, n, erased + bare + indexed)
        conn.execute("ANALYZE")
        load = time.perf_counter() - started
        t_erase, t_bare, t_locked = [], [], []
        for mine, theirs in zip(erased, bare, strict=True):  # interleaved: the machine's noise hits both
            t0 = time.perf_counter()
            found = erase.person_events(conn, ws, mine)  # the log read, before the write transaction
            t1 = time.perf_counter()
            with _found(erase, found):
                assert erase.erase_contact(conn, ws, mine, suppress=True)["deleted"]
            t2 = time.perf_counter()
            _bare_delete(conn, theirs, sms)
            t_erase.append(t2 - t0)
            t_locked.append(t2 - t1)
            t_bare.append(time.perf_counter() - t2)
        assert conn.execute("SELECT count(*) FROM suppressions").fetchone()[0] == 2 * k
        assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == n - 2 * k
        t_append = _appends(conn, ws, n)
        conn.execute("CREATE INDEX bench_events_contact ON contact_events(contact_id, id)")
        t_indexed = []
        for theirs in indexed:
            t0 = time.perf_counter()
            _bare_delete(conn, theirs, sms)
            t_indexed.append(time.perf_counter() - t0)
        t_append_indexed = _appends(conn, ws, n)
        conn.close()
    if os.environ.get("MKT_BENCH_VERBOSE"):
        print(f"load: {load:.1f} s for {label}", file=sys.stderr)
    e, b, i = _median(t_erase) * 1000, _median(t_bare) * 1000, _median(t_indexed) * 1000
    locked = _median(t_locked) * 1000
    a, ai = t_append / APPENDS * 1e6, t_append_indexed / APPENDS * 1e6
    return [
        row(f"erase one contact (with suppression), {label}", e, "ms", "bare DELETE of the same rows", b, e / b,
            "<= 500 ms", e <= 500),
        row(f"the erase's write transaction (other writers wait behind it), {label}", locked, "ms",
            "the bare DELETE's (all of it)", b, locked / b, "<= 50 ms", locked <= 50),
        row(f"bare DELETE of one person's rows if events had a contact index, {label}", i, "ms",
            "as the schema has it (the log read)", b, i / b, "(what an index would save)", True),
        row(f"append one event per transaction if events had a contact index, {n:,} events", ai, "us",
            "as the schema has it", a, ai / a, "(what it would cost every event)", True),
    ]


@contextmanager
def _found(erase, found: tuple[list[int], int]) -> Iterator[None]:  # noqa: ANN001
    """The erase with its log read already done (timed apart): its write transaction alone."""
    real = erase.person_events
    erase.person_events = lambda *_: found
    try:
        yield
    finally:
        erase.person_events = real


def _appends(conn, ws: int, n: int) -> float:  # noqa: ANN001
    """Seconds to append APPENDS events one per transaction (as POST /v1/events and a tag change
    append them), then the same events deleted again (so each measurement sees the same table)."""
    now = clock.now()
    first = conn.execute("SELECT max(id) FROM contact_events").fetchone()[0]
    started = time.perf_counter()
    for i in range(APPENDS):
        with transaction(conn):
            conn.execute(APPEND, (ws, f"{(i * 104_729) % n:024x}", "TAG_ADDED", '{"tag_id":1}', now))
    seconds = time.perf_counter() - started
    with transaction(conn):
        conn.execute("DELETE FROM contact_events WHERE id > ?", (first,))
    return seconds

"""Bulk tagging that fires events (issue 42, item 4), on SQLite and on PostgreSQL.

    python bench/run.py --only bulk_tag [--quick]     (--quick: 5,000 contacts; full: 100,000)
    python bench/bench_bulk_tag.py [--quick] [sqlite|postgresql]

The world: N SUBSCRIBED contacts, a tag and an ACTIVE flow triggered by that tag (re-entry
once, one exit step). Rows, per engine:

- `automations.tagging.tag_contacts` of every contact (a search without conditions): the
  contact_tags rows, N TAG_ADDED events, the updated_at of each contact, and the flow's N
  enrollments (the log read through the events by the automations' own statements), in
  batches of contacts/tagging.BATCH, one transaction each; against ONE bare
  `INSERT ... SELECT` of the same N enrollments into a table of the same columns, unique
  key, indexes and foreign keys (SQLite: the same DDL; PostgreSQL: `LIKE ... INCLUDING ALL`
  and the three foreign keys). Target: within 5x. Informational: the same against a
  table with only the unique key and the due index (bench_automations' baseline), and the
  time of one batch's transaction (what a concurrent writer may wait).
- informational: the per-contact path on a sample (records.add_contact_tags, one call per
  contact, then the automations pass `triggers.read_all_events`), its time per contact
  against the bulk path's: what the bulk path replaces (issue 42 measured 85x the bare
  statement for it).

Alternated: ROUNDS rounds, each on fresh copies of the same world (a file copy on SQLite, a
database made from a template on PostgreSQL), mkt first in odd rounds and the bare
statement first in even ones; the medians are compared, and each row says the load average
(1 minute) at its start and end, the machine being shared. The row's `rounds` gives every
round's ratio.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import postgres_server, row  # noqa: E402

ROUNDS = 3
FLOW = {"name": "VIP welcome", "triggers": [{"type": "tag_added", "tag": "vip"}],
        "steps": [{"id": "bye", "type": "exit"}]}
ENROLLMENT_COLUMNS = ("automation_id, version_id, workspace_id, contact_id, entry_key, entry_event_id, status, step_id,"
                      " seq, next_run_at, entered_at, updated_at")


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _world(conn: Any, count: int) -> dict[str, Any]:
    """The workspace, its N contacts (one statement, not measured), the tag, the ACTIVE flow and
    the bare table of the baseline."""
    from marketing_cli.kernel import clock
    from marketing_cli.services.account import billing, workspaces
    from marketing_cli.services.automations import flows
    from marketing_cli.services.contacts import tags
    from marketing_cli.storage.db import is_postgresql, transaction

    ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
    billing.set_allowance(conn, ws, "contacts", 100_000_000)
    billing.set_allowance(conn, ws, "automations", 10)
    tag = tags.create_tag(conn, ws, {"name": "vip"})["id"]
    flows.publish_automation(conn, ws, flows.create_automation(conn, ws, FLOW)["id"])
    now = clock.now()
    hex_id = "lpad(to_hex(i + 1), 24, '0')" if is_postgresql(conn) else "printf('%024x', i + 1)"
    with transaction(conn):
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
            " INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
            f" SELECT {hex_id}, ?, 'user' || i || '@example' || (i % 50) || '.org', 'SUBSCRIBED',"
            " '{}', ?, ? FROM n", (count - 1, ws, now, now))
    if is_postgresql(conn):
        conn.execute("CREATE TABLE bare_enrollments (LIKE automation_enrollments INCLUDING ALL)")
        conn.execute("ALTER TABLE bare_enrollments ADD FOREIGN KEY (automation_id) REFERENCES automations(id)"
                     " ON DELETE CASCADE, ADD FOREIGN KEY (version_id) REFERENCES automation_versions(id),"
                     " ADD FOREIGN KEY (contact_id) REFERENCES contacts(id) ON DELETE CASCADE")
        conn.execute("CREATE TABLE bare_min_enrollments"
                     " (LIKE automation_enrollments INCLUDING DEFAULTS INCLUDING IDENTITY)")
    else:
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE type IN ('table', 'index')"
                           " AND tbl_name = 'automation_enrollments' AND sql IS NOT NULL").fetchall()
        for (sql,) in ddl:
            conn.execute(sql.replace("automation_enrollments", "bare_enrollments"))
        conn.execute("CREATE TABLE bare_min_enrollments AS SELECT * FROM automation_enrollments WHERE 0")
    # bench_automations' baseline: the unique key and the due index only
    conn.execute("CREATE UNIQUE INDEX bare_min_key ON bare_min_enrollments (automation_id, contact_id, entry_key)")
    conn.execute("CREATE INDEX bare_min_due ON bare_min_enrollments (next_run_at) WHERE status = 'active'")
    conn.execute("ANALYZE")
    aid, vid = conn.execute("SELECT automation_id, id FROM automation_versions").fetchone()
    return {"ws": ws, "tag": tag, "automation": aid, "version": vid}


BATCH_TIMES: list[float] = []  # seconds between two progress calls: one batch's transaction and its reads


def _bulk(conn: Any, w: dict[str, Any], count: int) -> float:
    from marketing_cli.services.automations import tagging

    stamps: list[float] = []
    started = time.perf_counter()
    done = tagging.tag_contacts(conn, w["ws"], w["tag"], {"search": {}},
                                progress=lambda n, total: stamps.append(time.perf_counter()))
    elapsed = time.perf_counter() - started
    if done["tagged"] != count or done["enrolled"] != count:
        raise RuntimeError(f"bulk tag: {done}")
    BATCH_TIMES.extend(b - a for a, b in zip([started, *stamps], stamps))
    return elapsed


def _bare(conn: Any, w: dict[str, Any], count: int, table: str = "bare_enrollments") -> float:
    from marketing_cli.kernel import clock
    from marketing_cli.storage.db import transaction

    now = clock.now()
    started = time.perf_counter()
    with transaction(conn):
        made = conn.execute(
            f"INSERT INTO {table} ({ENROLLMENT_COLUMNS}) SELECT ?, ?, ?, id, 'once', 0, 'active', 'bye', 0,"
            " ?, ?, ? FROM contacts WHERE workspace_id = ?",
            (w["automation"], w["version"], w["ws"], now, now, now, w["ws"])).rowcount
    elapsed = time.perf_counter() - started
    if made != count:
        raise RuntimeError(f"bare: {made} rows")
    return elapsed


def _per_contact(conn: Any, w: dict[str, Any], sample: int) -> float:
    from marketing_cli.services.automations import triggers
    from marketing_cli.services.contacts import records

    ids = [r[0] for r in conn.execute("SELECT id FROM contacts WHERE workspace_id = ? ORDER BY id LIMIT ?",
                                      (w["ws"], sample))]
    started = time.perf_counter()
    for contact_id in ids:
        records.add_contact_tags(conn, w["ws"], contact_id, {"tag_ids": [w["tag"]]})
    read = triggers.read_all_events(conn)
    elapsed = time.perf_counter() - started
    if read["enrolled"] != sample:
        raise RuntimeError(f"per contact: {read}")
    return elapsed


class _Engine:
    """Fresh copies of one prepared world: a file copy (SQLite) or a database from a template."""

    def __init__(self, name: str, folder: Path, server: Any) -> None:
        from marketing_cli.storage.db import connect

        self.name, self.folder, self.server, self.n = name, folder, server, 0
        self.template = server.fresh() if server else str(folder / "template.db")
        conn = connect(self.template)
        self.world: dict[str, Any] = {}
        self._conn = conn

    def prepare(self, count: int) -> None:
        self.world = _world(self._conn, count)
        self._conn.close()

    def copy(self) -> Any:
        from marketing_cli.storage.db import connect

        self.n += 1
        if self.server:
            return connect(self.server.copy(self.template))
        target = self.folder / f"copy{self.n}.db"
        shutil.copyfile(self.template, target)
        return connect(target)

    def drop(self, conn: Any) -> None:
        conn.close()
        if self.server is None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.folder / f'copy{self.n}.db'}{suffix}").unlink(missing_ok=True)


def _rows(engine: _Engine, count: int, sample: int) -> list[dict]:
    load_before = _load()
    mkt: list[float] = []
    bare: list[float] = []
    bare_min: list[float] = []
    BATCH_TIMES.clear()
    for i in range(ROUNDS):
        order = ("mkt", "bare", "bare_min") if i % 2 == 0 else ("bare_min", "bare", "mkt")
        for which in order:
            conn = engine.copy()
            try:
                if which == "mkt":
                    mkt.append(_bulk(conn, engine.world, count))
                elif which == "bare":
                    bare.append(_bare(conn, engine.world, count))
                else:
                    bare_min.append(_bare(conn, engine.world, count, "bare_min_enrollments"))
            finally:
                engine.drop(conn)
    conn = engine.copy()
    try:
        single = _per_contact(conn, engine.world, sample)
    finally:
        engine.drop(conn)
    load_after = _load()
    m, b, bm = statistics.median(mkt), statistics.median(bare), statistics.median(bare_min)
    rounds = ", ".join(f"{x / y:.2f}" for x, y in zip(mkt, bare))
    rounds_min = ", ".join(f"{x / y:.2f}" for x, y in zip(mkt, bare_min))
    label = f"{engine.name}: bulk tag of {count:,} contacts -> {count:,} enrollments"
    load = f"load {load_before} -> {load_after}"
    batches = (f"a batch's transaction: median {statistics.median(BATCH_TIMES) * 1000:.0f} ms,"
               f" max {max(BATCH_TIMES) * 1000:.0f} ms")
    same_table = "bare INSERT ... SELECT of the enrollments (same table: columns, keys, indexes, foreign keys)"
    main = row(f"{label} (rounds {rounds}; {batches}; {load})", m, "s", same_table, b, m / b, "<= 5x", m / b <= 5)
    minimal = row(f"{label} (rounds {rounds_min}; {load})", m, "s",
                  "bare INSERT ... SELECT into a table with the unique key and due index only", bm, m / bm,
                  "informational", True)
    per = single / sample * count
    info = row(f"{engine.name}: per-contact calls + automations pass, {sample:,} contacts, time scaled to {count:,}"
               f" ({load})", per, "s", "the bulk tag above", m, per / m, "informational", True)
    return [main, minimal, info]


def run(quick: bool) -> list[dict]:
    """Both engines; MKT_BENCH_ENGINES=sqlite (or postgresql) runs one (`python bench/bench_bulk_tag.py sqlite`)."""
    engines = tuple(os.environ.get("MKT_BENCH_ENGINES", "sqlite,postgresql").split(","))
    count = 5_000 if quick else 100_000
    sample = 500 if quick else 2_000  # per-contact calls: about 1 ms each on SQLite, 10-20 ms on PostgreSQL
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mkt-bulk-tag-") as tmp:
        if "sqlite" in engines:
            engine = _Engine("SQLite", Path(tmp), None)
            engine.prepare(count)
            rows += _rows(engine, count, sample)
        if "postgresql" in engines:
            server = postgres_server("bulk_tag")
            if server is not None:
                try:
                    engine = _Engine("PostgreSQL", Path(tmp), server)
                    engine.prepare(count)
                    rows += _rows(engine, count, sample // 4)
                finally:
                    server.stop()
    return rows


if __name__ == "__main__":
    picked = [a for a in sys.argv[1:] if a in ("sqlite", "postgresql")]
    if picked:
        os.environ["MKT_BENCH_ENGINES"] = ",".join(picked)
    for r in run("--quick" in sys.argv):
        print(r)

"""Automations (issue 24): the event log into enrollments, due steps drained as email, and the
tick with everyone waiting. Each figure beside a baseline measured in the same run.

1. Enrollment: 100,000 new CUSTOM_EVENT events matched by one ACTIVE flow's trigger and
   turned into enrollments by `triggers.read_all_events` (cursor, match, NOT EXISTS, in
   batches of 5,000), against a bare `INSERT ... SELECT` of the same rows into a table with
   the same columns and unique key. Target: within 5x.
2. Drain: N contacts enrolled at once in a flow of one send_email step, run by one
   `mkt jobs run` (the automations job writes each step run and message, the sender renders,
   DKIM-signs, tracks and delivers) to the lean sink, against the campaign send of the same
   audience and HTML (bench_email_send's `_send`: same command, environment, sink), alternated
   rounds (MKT_BENCH_ROUNDS, default 3), medians. Target: >= 0.9x (issue 42). MKT_BENCH_DRAIN
   sets N.
   N is 100,000 at full scale (1,000,000 would take over an hour twice on this machine).
3. Tick: 1,000,000 enrollments waiting and none due; one tick (`steps.due_enrollments`,
   `steps.next_due_at`, `runner.schedule`), the median of 20, against the same tick on an
   empty table. Target: under 50 ms.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, row

sys.path.insert(0, str(REPO))

import bench_email_send as email_bench  # noqa: E402  (bench/ is on the path: run.py runs modules there)


def _services_db(path: Path) -> tuple[sqlite3.Connection, int]:
    from marketing_cli.services.account import billing, workspaces
    from marketing_cli.storage.db import connect

    conn = connect(path)
    ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
    billing.set_allowance(conn, ws, "automations", 10)
    return conn, ws


def _flow(conn: sqlite3.Connection, ws: int, doc: dict) -> None:
    from marketing_cli.services.automations import flows

    flows.publish_automation(conn, ws, flows.create_automation(conn, ws, doc)["id"])


def _bulk_contacts(conn: sqlite3.Connection, ws: int, count: int) -> None:
    """`count` SUBSCRIBED contacts written in one statement (setup, not measured)."""
    from marketing_cli.kernel import clock

    now = clock.now()
    conn.execute("BEGIN")
    conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
        " INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
        " SELECT printf('%024x', i + 1), ?, 'user' || i || '@example' || (i % 50) || '.org', 'SUBSCRIBED', '{}', ?, ?"
        " FROM n", (count - 1, ws, now, now))
    conn.execute("COMMIT")


def _enrollment_rows(count: int) -> list[dict]:
    from marketing_cli.kernel import clock
    from marketing_cli.services.automations import triggers

    with tempfile.TemporaryDirectory() as tmp:
        conn, ws = _services_db(Path(tmp) / "enroll.db")
        _bulk_contacts(conn, ws, count)
        _flow(conn, ws, {"name": "Signup", "reentry": "every_time",
                                "triggers": [{"type": "custom_event", "name": "signup",
                                              "properties": {"plan": "pro"}}],
                                "steps": [{"id": "bye", "type": "exit"}]})
        after = conn.execute("SELECT last_event_id FROM automation_cursors WHERE workspace_id = ?", (ws,)).fetchone()[0]
        now = clock.now()
        conn.execute("BEGIN")
        conn.execute("INSERT INTO contact_events (workspace_id, contact_id, type, payload, created_at)"
                     " SELECT ?, id, 'CUSTOM_EVENT', json_object('event_name', 'signup', 'properties',"
                     " json_object('plan', 'pro')), ? FROM contacts WHERE workspace_id = ? ORDER BY id",
                     (ws, now, ws))
        conn.execute("COMMIT")
        started = time.perf_counter()
        read = triggers.read_all_events(conn)
        mkt = time.perf_counter() - started
        if read["enrolled"] != count:
            raise RuntimeError(f"{read['enrolled']} of {count} events enrolled")
        # The baseline: the same rows into a table of the same columns and unique key, one statement.
        conn.execute("CREATE TABLE bare_enrollments AS SELECT * FROM automation_enrollments WHERE 0")
        conn.execute("CREATE UNIQUE INDEX bare_key ON bare_enrollments (automation_id, contact_id, entry_key)")
        conn.execute("CREATE INDEX bare_due ON bare_enrollments (next_run_at) WHERE status = 'active'")
        conn.execute("BEGIN")
        started = time.perf_counter()
        conn.execute("INSERT INTO bare_enrollments (automation_id, version_id, workspace_id, contact_id, entry_key,"
                     " entry_event_id, status, step_id, seq, next_run_at, entered_at, updated_at)"
                     " SELECT 1, 1, e.workspace_id, e.contact_id, 'event:' || e.id, e.id, 'active', 'bye', 0, ?, ?, ?"
                     " FROM contact_events e WHERE e.workspace_id = ? AND e.id > ?", (now, now, now, ws, after))
        conn.execute("COMMIT")
        bare = time.perf_counter() - started
        conn.close()
    ratio = mkt / bare
    return [row(f"automation enrollment, {count:,} new events", count / mkt, "events/s",
                "bare INSERT ... SELECT of the same rows", count / bare, ratio, "<= 5x the bare time", ratio <= 5)]


def _flow_db(folder: Path, count: int) -> Path:
    """The campaign bench's database (the same contacts, domain and sender, prepared the same
    way) with a flow of one send_email step (the same subject and HTML) holding every contact,
    due now. The campaign email_bench._prepare schedules is taken back (its send job deleted,
    the campaign and its frozen audience, if any, removed), so the drain sends only the flow's
    messages."""
    db, campaign_id = email_bench._prepare(folder, count)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM jobs")
        for table in ("campaign_audience", "email_messages"):
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone():
                conn.execute(f"DELETE FROM {table} WHERE campaign_id = ?", (campaign_id,))
        conn.execute("UPDATE campaigns SET status = 'DRAFT', scheduled_at = NULL WHERE id = ?", (campaign_id,))
        sender = conn.execute("SELECT id FROM sender_identities").fetchone()[0]
    flow = folder / "flow.json"
    flow.write_text(json.dumps({"name": "Drain", "triggers": [{"type": "manual"}], "steps": [
        {"id": "mail", "type": "send_email", "sender_id": sender, "subject": "Hello {{contact.first_name}}",
         "html": email_bench.BODY}]}))
    email_bench._mkt(db, "billing", "allowance", "set", "automations", "5")
    created = json.loads(email_bench._mkt(db, "automations", "create", "--file", str(flow), "--json"))
    email_bench._mkt(db, "automations", "publish", str(created["id"]))
    email_bench._mkt(db, "automations", "backfill", str(created["id"]), "--yes")
    return db


def _say(text: str) -> None:
    print(f"automations: {text} (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def _drain_rows(count: int) -> list[dict]:
    """Each round: the campaign and the drain, each one `mkt jobs run` (email_bench._send: the
    same command, environment and sink) from a fresh copy of its prepared database, the
    campaign first in odd rounds and the drain first in even ones (A B B A ...); medians of
    the rates and of the per-round ratios, CPU a message from the rusage of the process and
    its children, the load average beside each."""
    rounds = int(os.environ.get("MKT_BENCH_ROUNDS", "3"))
    sink, port = email_bench._sink()
    points: dict[str, list[float]] = {k: [] for k in ("flow", "campaign", "flow_cpu", "campaign_cpu", "ratio")}
    loads = [os.getloadavg()[0]]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "campaign").mkdir()
            (folder / "flow").mkdir()
            campaign_template, _ = email_bench._prepare(folder / "campaign", count)
            flow_template = _flow_db(folder / "flow", count)
            for round_ in range(1, rounds + 1):
                results = {}
                for kind in (("campaign", "flow") if round_ % 2 else ("flow", "campaign")):
                    db = email_bench._copy(campaign_template if kind == "campaign" else flow_template, folder)
                    seconds, _, cpu = email_bench._send(db, port)
                    with sqlite3.connect(db) as conn:
                        delivered = conn.execute("SELECT count(*) FROM email_messages WHERE status = 'delivered'"
                                                 ).fetchone()[0]
                        ran = conn.execute("SELECT count(*) FROM automation_step_runs").fetchone()[0]
                    db.unlink()
                    if delivered != count or (kind == "flow" and ran != count):
                        raise RuntimeError(f"{kind}: {ran} steps ran and {delivered} of {count} messages were delivered")
                    results[kind] = (count / seconds, 1000 * cpu / count)
                    loads.append(os.getloadavg()[0])
                    _say(f"round {round_}: {kind} {count / seconds:,.0f} msg/s, {1000 * cpu / count:.3f} ms CPU a"
                         f" message, {cpu / seconds:.2f} of a core")
                points["flow"].append(results["flow"][0])
                points["campaign"].append(results["campaign"][0])
                points["flow_cpu"].append(results["flow"][1])
                points["campaign_cpu"].append(results["campaign"][1])
                points["ratio"].append(results["flow"][0] / results["campaign"][0])
    finally:
        sink.terminate()
        sink.wait(10)
    med = {k: statistics.median(v) for k, v in points.items()}
    each = ", ".join(f"{r:.2f}" for r in points["ratio"])
    load = f"load average {min(loads):.1f}-{max(loads):.1f}"
    return [row(f"automation drain, {count:,} enrollments due at once (send_email step), median of {rounds}"
                f" alternated rounds (rounds {each}; {load})", med["flow"], "msg/s",
                "the same audience and HTML as a campaign, same sink and command", med["campaign"], med["ratio"],
                ">= 0.9x", med["ratio"] >= 0.9),
            row(f"automation drain CPU a message, {count:,} (the process and its children)", med["flow_cpu"], "ms",
                "the campaign's", med["campaign_cpu"], med["flow_cpu"] / med["campaign_cpu"], "reported", True)]


def _tick(conn: sqlite3.Connection) -> float:
    from marketing_cli.services.automations import runner, steps

    times = []
    for _ in range(20):
        started = time.perf_counter()
        steps.due_enrollments(conn)
        steps.next_due_at(conn)
        runner.schedule(conn)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _tick_rows(count: int) -> list[dict]:
    from marketing_cli.kernel import clock

    with tempfile.TemporaryDirectory() as tmp:
        conn, ws = _services_db(Path(tmp) / "tick.db")
        _flow(conn, ws, {"name": "Waiting", "triggers": [{"type": "manual"}],
                                "steps": [{"id": "w", "type": "wait", "duration": {"days": 30}}]})
        empty = _tick(conn)
        _bulk_contacts(conn, ws, count)
        aid, vid = conn.execute("SELECT automation_id, id FROM automation_versions").fetchone()
        now = clock.now()
        later = clock.format_ts(clock.utcnow().replace(year=clock.utcnow().year + 1))
        conn.execute("BEGIN")
        conn.execute("INSERT INTO automation_enrollments (automation_id, version_id, workspace_id, contact_id,"
                     " entry_key, entry_event_id, status, step_id, seq, next_run_at, entered_at, updated_at)"
                     " SELECT ?, ?, ?, id, 'once', 0, 'active', 'w', 1,"
                     " strftime('%Y-%m-%dT%H:%M:%fZ', ?, '-' || (abs(random()) % 86400) || ' seconds'), ?, ?"
                     " FROM contacts WHERE workspace_id = ?", (aid, vid, ws, later, now, now, ws))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        full = _tick(conn)
        conn.close()
    return [row(f"automation tick, {count:,} contacts waiting, none due", full * 1000, "ms",
                "the same tick, nobody waiting", empty * 1000, full / empty, "< 50 ms", full * 1000 < 50)]


def run(quick: bool) -> list[dict]:
    events = 5_000 if quick else 100_000
    drain = int(os.environ.get("MKT_BENCH_DRAIN", 1_000 if quick else 100_000))
    waiting = 20_000 if quick else 1_000_000
    return [*_enrollment_rows(events), *_drain_rows(drain), *_tick_rows(waiting)]


if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None
    quick = "--quick" in sys.argv
    parts = {"enroll": lambda: _enrollment_rows(5_000 if quick else 100_000),
             "drain": lambda: _drain_rows(int(os.environ.get("MKT_BENCH_DRAIN", 1_000 if quick else 100_000))),
             "tick": lambda: _tick_rows(20_000 if quick else 1_000_000)}
    for r in (parts[only]() if only else run(quick)):
        print(r)

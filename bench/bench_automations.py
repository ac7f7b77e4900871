"""Automations (issue 24): the event log into enrollments, due steps drained as email, and the
tick with everyone waiting. Each figure beside a baseline measured in the same run.

1. Enrollment: 100,000 new CUSTOM_EVENT events matched by one ACTIVE flow's trigger and
   turned into enrollments by `triggers.read_all_events` (cursor, match, NOT EXISTS, in
   batches of 5,000), against a bare `INSERT ... SELECT` of the same rows into a table with
   the same columns and unique key. Target: within 5x.
2. Drain: N contacts enrolled at once in a flow of one send_email step, run by one
   `mkt jobs run` (the automations job writes each step run and message, the sender renders,
   DKIM-signs, tracks and delivers) to an aiosmtpd sink, against the campaign send rate of
   the same audience and HTML (bench_email_send's path) in the same run. Target: >= 0.8x.
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

from common import REPO, row, run_measured

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
    """The campaign bench's database (contacts, domain, sender) with a flow of one send_email
    step (the same subject and HTML) holding every contact, due now."""
    db, _ = email_bench._prepare(folder, count)
    with sqlite3.connect(db) as conn:  # the campaign of email_bench._prepare is not sent here
        conn.execute("DELETE FROM jobs")
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


def _drain_rows(count: int) -> list[dict]:
    sink, port = email_bench._sink()
    env = {**os.environ, "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "campaign").mkdir()
            (folder / "flow").mkdir()
            campaign_db, _ = email_bench._prepare(folder / "campaign", count)
            flow_db = _flow_db(folder / "flow", count)
            campaign_seconds, _ = email_bench._send(campaign_db, port)
            flow_seconds, _ = run_measured([sys.executable, "-m", "marketing_cli", "--db", str(flow_db), "jobs",
                                            "run"], env=env)
            with sqlite3.connect(flow_db) as conn:
                delivered = conn.execute("SELECT count(*) FROM email_messages WHERE status = 'delivered'").fetchone()[0]
                ran = conn.execute("SELECT count(*) FROM automation_step_runs").fetchone()[0]
            if delivered != count or ran != count:
                raise RuntimeError(f"{ran} steps ran and {delivered} of {count} messages were delivered")
    finally:
        sink.terminate()
        sink.wait(10)
    flow_rate, campaign_rate = count / flow_seconds, count / campaign_seconds
    ratio = flow_rate / campaign_rate
    return [row(f"automation drain, {count:,} enrollments due at once (send_email step)", flow_rate, "msg/s",
                "campaign send rate, same audience and HTML", campaign_rate, ratio, ">= 0.8x", ratio >= 0.8)]


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
    drain = 1_000 if quick else 100_000
    waiting = 20_000 if quick else 1_000_000
    return [*_enrollment_rows(events), *_drain_rows(drain), *_tick_rows(waiting)]


if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None
    quick = "--quick" in sys.argv
    parts = {"enroll": lambda: _enrollment_rows(5_000 if quick else 100_000),
             "drain": lambda: _drain_rows(1_000 if quick else 100_000),
             "tick": lambda: _tick_rows(20_000 if quick else 1_000_000)}
    for r in (parts[only]() if only else run(quick)):
        print(r)

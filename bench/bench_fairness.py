"""The job runner's fairness across workspaces (issue 40, item 3): how long workspace B's
campaign send and segment count take beside workspace A's stalled webhooks, against B alone.

    python bench/run.py --only fairness [--quick]
    python bench/bench_fairness.py [--quick]        (the rows as JSON lines)

B: 1,000 subscribed contacts, one campaign to all of them (bench_email_send's merge tags and
unsubscribe link, DKIM-signed, to the outbox folder) and a segment. A: a flow whose webhook step
calls a receiver that sends its answer a byte a second for 60 s (tests/hostile_http.py), for 16
contacts, so A has 16 webhook jobs queued, each holding its worker for the webhook's whole
deadline (10 s) and then queued again with backoff.

One round: a fresh database (a SQLite file; a fresh database on a throwaway PostgreSQL server,
tests/engines.py), serve's worker (jobs.Worker, the defaults: MKT_JOB_WORKERS or 4 threads, each
workspace at most half of them) started; with A, once A's webhooks hold their share of the
workers, B's campaign is scheduled NOW and its segment recount asked for; the time is until the
campaign is SENT and the segment counted. Rounds alternate, B alone then B beside A, 5 pairs
(--quick: 3; MKT_BENCH_PAIRS sets it); the rows give the medians. Target: B beside A within 20 % of B alone (the issue's).

Full scale adds, per engine, the runner as it was (one worker: `--workers 1`) beside 4 of A's
webhooks only (40 s of them), for comparison: B waits for A's queue.
"""

from __future__ import annotations

import json
import logging
import os
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

HOOKS = 16
RECIPIENTS = 1000
TARGET = 1.2


def _round(db: Any, *, hooks: int, workers: int | None = None) -> float:
    """Seconds from B's schedule to its campaign SENT and its segment counted, beside `hooks` of
    A's stalled webhooks (none: B alone), on serve's worker with `workers` threads."""
    from marketing_cli import jobs
    from marketing_cli.storage.db import connect
    from tests import factories
    from tests.hostile_http import HostileServer

    conn = connect(db)
    try:
        with HostileServer("slow_head", interval=1.0, lasting=60.0) as receiver:
            if hooks:
                factories.stalled_webhooks(conn, receiver.url("/hook"), hooks)
            ws, campaign, segment = factories.campaign_and_segment(conn, RECIPIENTS)
            worker = jobs.Worker(db, interval=0.05, workers=workers)
            worker.start()
            try:
                deadline = time.monotonic() + 60
                while hooks and len(receiver.requests) < min(hooks, worker.share):
                    if time.monotonic() > deadline:
                        raise RuntimeError("A's webhooks did not reach the receiver")
                    time.sleep(0.02)
                started = time.monotonic()
                factories.send_and_count(conn, ws, campaign, segment)
                deadline = started + 600
                while not factories.sent_and_counted(conn, campaign, segment):
                    if time.monotonic() > deadline:
                        raise RuntimeError("B's campaign was not sent within 10 minutes")
                    time.sleep(0.02)
                return time.monotonic() - started
            finally:
                worker.stop(timeout=30)
    finally:
        conn.close()


def _engine(name: str, fresh: Any, quick: bool) -> list[dict]:
    from marketing_cli import jobs

    pairs = int(os.environ.get("MKT_BENCH_PAIRS", 3 if quick else 5))
    alone: list[float] = []
    beside: list[float] = []
    for _ in range(pairs):  # alternated: a slower minute of the shared machine falls on both
        alone.append(_round(fresh(), hooks=0))
        beside.append(_round(fresh(), hooks=HOOKS))
    print(f"fairness ({name}): B alone {[round(t, 2) for t in alone]} s, beside A {[round(t, 2) for t in beside]} s",
          file=sys.stderr)
    workers = jobs.default_workers()
    value, baseline = statistics.median(beside), statistics.median(alone)
    rows = [row(f"{name}: B's send of {RECIPIENTS:,} + segment count beside A's {HOOKS} stalled webhooks "
                f"({workers} workers, share {jobs.default_share(workers)})", value, "s", "B alone", baseline,
                value / baseline, f"<= {TARGET:g}x B alone", value / baseline <= TARGET)]
    if not quick:
        before = _round(fresh(), hooks=4, workers=1)
        rows.append(row(f"{name}: the same on one worker (before) beside 4 of A's stalled webhooks", before, "s",
                        "B alone (4 workers)", baseline, before / baseline, "for comparison", True))
    return rows


def run(quick: bool) -> list[dict]:
    logging.getLogger("mkt").setLevel(logging.ERROR)  # A's webhook failures, 16 a round, are the point
    folder = Path(tempfile.mkdtemp(prefix="mkt-bench-fairness-"))
    os.environ["MKT_ALLOW_PRIVATE_URLS"] = "1"  # the receiver listens on 127.0.0.1
    os.environ["MKT_OUTBOX"] = str(folder / "outbox")
    os.environ.pop("MKT_SMTP_URL", None)
    from marketing_cli import services

    services.load_job_handlers()
    made = iter(range(1_000_000))
    rows = _engine("SQLite", lambda: folder / f"mkt-{next(made)}.db", quick)
    server = postgres_server("fairness")
    if server is not None:
        try:
            rows += _engine("PostgreSQL", server.fresh, quick)
        finally:
            server.stop()
    return rows


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(json.dumps(r))

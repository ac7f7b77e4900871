"""Email send on PostgreSQL with 1, 2 and 4 `mkt jobs run` workers (issue 22, item 7).

    python bench/run.py --only email_workers [--quick]

Every point is a fresh database on a throwaway PostgreSQL server (tests/engines.py) with the
recipients imported, a verified domain, a sender and campaigns with bench_email_send's body
(merge tags, tracking, DKIM), made once per size and copied for every point (CREATE
DATABASE ... TEMPLATE); the point's campaigns are scheduled NOW and N `mkt jobs run`
processes start at once. The rate is the messages over the time from the first delivery to
the last (delivered_at): the send, without the processes' start and the audience freeze
(the wall time is printed beside it). Two SMTP
servers (bench/smtp_sink.py): one that takes 100 ms per message, as a slow provider does,
and one that answers at once. Each worker sends with the default concurrency
(MKT_SEND_CONCURRENCY, 10 connections).

Two shapes, each a curve of rows against the 1-worker rate of the same shape and server:
- "one campaign": ONE campaign to every recipient, N workers. This is the target of the
  issue (N workers >= 0.8 x N x one on the slow server; 2 workers >= 1.5x one on the
  instant one). It scales only where several workers can share one campaign's send.
- "N campaigns": the recipients split by tag into N campaigns, one per worker: what the
  job queue spreads today (each campaign's send is one job).
Sizes: --quick 100 (slow) and 200 (instant) recipients; full MKT_BENCH_EMAILS (default
10,000 slow, 20,000 instant: 100k to a 100 ms server takes 1,000 s for one worker).
Needs initdb and pg_ctl; without them the module has no rows and says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import REPO, postgres_server, row, smtp_sink  # noqa: E402

WORKERS = (1, 2, 4)
SLICES = 4  # recipients tagged s0..s3; N campaigns take SLICES / N tags each


def _sink(delay: float) -> tuple[subprocess.Popen, int]:
    return smtp_sink([sys.executable, str(HERE / "smtp_sink.py"), "{port}", str(delay)])


def _mkt(url: str, *args: str) -> str:
    """One mkt command, run in this process (typer's runner: no interpreter start per command)."""
    from typer.testing import CliRunner

    from marketing_cli.cli.main import app

    result = CliRunner().invoke(app, ["--db", url, *args], catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"mkt {' '.join(args)} failed: {result.output.strip()}")
    return result.stdout


def _prepare(url: str, folder: Path, count: int) -> dict[int, list[str]]:
    """count recipients tagged s0..s3 and DRAFT campaigns with the bench body: {N: the ids of the
    N campaigns that share the recipients} for N in WORKERS (1: one campaign to everyone)."""
    import psycopg
    from bench_email_send import BODY

    _mkt(url, "init", "--name", "Bench")
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        _mkt(url, "billing", "allowance", "set", resource, str(count * 20))
    csv = folder / f"contacts-{count}.csv"
    csv.write_text("email,first_name,tags\n"
                   + "".join(f"user{i}@example{i % 50}.org,Name{i},s{i % SLICES}\n" for i in range(count)))
    _mkt(url, "contacts", "import", str(csv))
    tags = {t["name"]: t["id"] for t in json.loads(_mkt(url, "tags", "list", "--json"))}
    domain = json.loads(_mkt(url, "domains", "add", "example.com", "--json"))
    with psycopg.connect(url, autocommit=True) as conn:  # the DNS records taken as published (no DNS here)
        conn.execute("UPDATE domains SET verified = 1")
        conn.execute("UPDATE dns_records SET verified = 1")
    sender = json.loads(_mkt(url, "senders", "add", "--domain-id", str(domain["id"]), "--local-part", "news",
                             "--display-name", "News", "--json"))
    html = folder / "body.html"
    html.write_text(BODY)
    made: dict[int, list[str]] = {}
    for campaigns in WORKERS:
        share = SLICES // campaigns
        for c in range(campaigns):
            campaign = json.loads(_mkt(url, "campaigns", "create", "--name", f"Bench {campaigns}.{c}", "--json"))
            audience = ["--audience-type", "ENTIRE_AUDIENCE"]
            if campaigns > 1:
                audience = ["--audience-type", "TAGS"]
                for s in range(c * share, (c + 1) * share):
                    audience += ["--include-tag", str(tags[f"s{s}"])]
            _mkt(url, "campaigns", "configure", campaign["id"], "--sender-id", str(sender["id"]), "--subject-a",
                 "Hello {{contact.first_name}}", *audience)
            _mkt(url, "campaigns", "html", "set", campaign["id"], "A", str(html))
            made.setdefault(campaigns, []).append(campaign["id"])
    return made


def _send(url: str, port: int, workers: int) -> float:
    """Seconds from starting `workers` `mkt jobs run` processes at once until the last one exits."""
    env = {**os.environ, "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    cmd = [sys.executable, "-m", "marketing_cli", "--db", url, "jobs", "run"]
    started = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for _ in range(workers)]
    failed = []
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            failed.append(err.decode(errors="replace")[-500:])
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"mkt jobs run failed: {failed[0]}")
    return elapsed


def _sent(url: str) -> tuple[int, float]:
    """(messages delivered, seconds from the first delivery to the last): the send itself,
    without the processes' start and the audience freeze."""
    import psycopg

    from marketing_cli.kernel import clock

    with psycopg.connect(url, autocommit=True) as conn:
        count, first, last = conn.execute("SELECT count(*), min(delivered_at), max(delivered_at) FROM email_messages"
                                          " WHERE status = 'delivered'").fetchone()
    if not count:
        return 0, 0.0
    return count, (clock.parse_ts(last) - clock.parse_ts(first)).total_seconds()


def _clone(server: Any, template: str) -> str:
    """A copy of the prepared database (CREATE DATABASE ... TEMPLATE)."""
    import psycopg

    name = f"{template}_{time.monotonic_ns()}"
    with psycopg.connect(server.url("postgres"), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    return server.url(name)


def _point(server: Any, template: str, campaigns: list[str], port: int, count: int, workers: int) -> float:
    url = _clone(server, template)
    try:
        for campaign in campaigns:
            _mkt(url, "campaigns", "schedule", campaign, "--now")
        wall = _send(url, port, workers)
        delivered, seconds = _sent(url)
        if delivered != count:
            raise RuntimeError(f"only {delivered} of {count} messages were delivered ({workers} workers)")
        print(f"email_workers: {workers} worker(s), {len(campaigns)} campaign(s): {count:,} sent in {seconds:.1f} s"
              f" ({wall:.1f} s from the workers' start to the last exit)", file=sys.stderr)
        return count / seconds
    finally:
        server.drop(url)


def _curve(server: Any, folder: Path, delay: float, count: int) -> list[dict]:
    import psycopg

    template = f"mkt_bench_send_{count}"
    with psycopg.connect(server.url("postgres"), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {template}")
    made = _prepare(server.url(template), folder, count)
    sink, port = _sink(delay)
    label = "SMTP server taking 100 ms a message" if delay else "SMTP server answering at once"
    rows = []
    try:
        for shape in ("one campaign", "N campaigns"):
            one = None
            for n in WORKERS:
                rate = _point(server, template, made[n if shape == "N campaigns" else 1], port, count, n)
                print(f"email_workers: {label}, {shape}, {n} worker(s): {rate:,.1f} msg/s", file=sys.stderr)
                if one is None:
                    one = rate
                    continue
                ratio = rate / one
                if delay:
                    target, ok = f">= {0.8 * n:.1f}x (0.8 x N)", ratio >= 0.8 * n
                else:
                    target, ok = (">= 1.5x", ratio >= 1.5) if n == 2 else ("reported", True)
                if shape == "N campaigns":
                    target, ok = "informational (" + target + " is the one-campaign target)", True
                rows.append(row(f"PostgreSQL email send, {count:,} recipients, {label}, {shape}, {n} workers",
                                rate, "msg/s", "1 worker, same shape and server", one, ratio, target, ok))
    finally:
        sink.terminate()
        sink.wait(10)
    return rows


def run(quick: bool) -> list[dict]:
    server = postgres_server("email_workers")
    if server is None:
        return []
    import tempfile

    slow = 100 if quick else int(os.environ.get("MKT_BENCH_EMAILS", 10_000))
    instant = 200 if quick else int(os.environ.get("MKT_BENCH_EMAILS_INSTANT", 20_000))
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="mkt-bench-workers-") as tmp:
            rows += _curve(server, Path(tmp), 0.1, slow)
            rows += _curve(server, Path(tmp), 0.0, instant)
    finally:
        server.stop()
    return rows


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(json.dumps(r))

"""Email send of ONE campaign by 1, 2 and 4 `mkt jobs run` workers (issue 22, item 7).

    python bench/run.py --only email_workers [--quick]
    python bench/bench_email_workers.py [--quick]        (the rows as JSON lines)

The issue's target: one campaign of 100,000 recipients, sent by N worker processes to an
SMTP server that takes 100 ms a message: N workers reach at least 0.8 x N x the rate of
one; to a server that answers at once, 2 workers reach 1.5x one or better (2 cores).

Every point starts from the same prepared database: the recipients imported, a verified
domain, a sender and one campaign with bench_email_send's body (merge tags, tracking,
DKIM) to all of them, scheduled NOW and its audience frozen (the email.preprocess job run
here), so the database holds a SENDING campaign, its 100,000 queued messages and its
email.send job. On PostgreSQL (a throwaway server, tests/engines.py) each point gets a copy
(CREATE DATABASE ... TEMPLATE); on SQLite a copy of the file. N `mkt jobs run --forever`
processes start at once: the first to claim the send job queues its helpers
(services/delivery/sender.py: MKT_SEND_WORKERS - 1 of them, set to N here) and the other
processes take them, so the N processes share the one campaign's queue of messages. Each
sends with the default concurrency (MKT_SEND_CONCURRENCY, 10 connections).

The rate is measured in steady state, from the messages' delivered_at: the messages
delivered in a window that opens WARMUP seconds after the first delivery (the processes'
start, the helpers' start) and closes WINDOW seconds later or at the last delivery. Full
scale has the issue's 100,000 recipients but does not send them all: one worker at 100 ms
and concurrency 10 needs ~1,000 s for them, and the curve would take ~35 minutes per
engine; a 60 s window in the middle of a 100,000-message send measures the same steady
rate (the campaign is cancelled once the window closed: the send jobs stop after
their round, then the processes get SIGTERM). --quick: 3,000 recipients (above the 1,000 from
which a send calls its helpers, jobs.HELPERS_FROM), sent to the end, window 20 s.

Beside each rate stderr gives the CPU time per message inside the window (from /proc) of
every process of the send: the workers, the SMTP sink, and on PostgreSQL the bench's own
server (the postmaster and all its children: the backends serving the workers, the
background processes, and what exited children used), with their sum and the load
average. Rate x CPU per message is the share of a core a process used: on 2 cores the
sum bounds the rate (2,000 ms of CPU a second / the sum's ms a message); far below what
the machine has, with a high load average, the processes were waiting for a core (the run
queue), not for each other (see pg_stat_activity for lock waits).

Two SMTP servers (bench/smtp_sink.py): 100 ms per message (a slow provider) and at once;
a lean asyncio sink, which costs the shared cores about a quarter of what aiosmtpd's does
(MKT_BENCH_SINK=aiosmtpd runs that one instead, as the runs before 2026-11-26 08:30 did).
The PostgreSQL rows carry the targets; SQLite rows (one writer at a time: its default is one
worker per campaign) are beside them for information.
MKT_BENCH_FORKED=1 starts each point as one `mkt jobs run --forever --processes N` instead of N
commands (MKT_BENCH_WORKERS picks the points, e.g. 1,2).
Needs initdb and pg_ctl for the PostgreSQL rows; without them only the SQLite rows are given.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import REPO, postgres_server, row, smtp_sink  # noqa: E402

WORKERS = tuple(int(n) for n in os.environ.get("MKT_BENCH_WORKERS", "1,2,4").split(","))
# MKT_BENCH_FORKED=1: each point is ONE `mkt jobs run --forever --processes N` (jobs/processes.py)
# instead of N commands; its CPU is the command's and its children's.
FORKED = os.environ.get("MKT_BENCH_FORKED") == "1"


def _sizes(quick: bool) -> tuple[int, float, float]:
    """(recipients, warm-up seconds, window seconds)."""
    if quick:
        return int(os.environ.get("MKT_BENCH_EMAILS", 3_000)), 2.0, 20.0
    return (int(os.environ.get("MKT_BENCH_EMAILS", 100_000)), 10.0,
            float(os.environ.get("MKT_BENCH_WINDOW", 60)))


def _sink(delay: float) -> tuple[subprocess.Popen, int]:
    """bench/smtp_sink.py's lean sink; MKT_BENCH_SINK=aiosmtpd: its aiosmtpd one (the earlier runs')."""
    extra = ["--aiosmtpd"] if os.environ.get("MKT_BENCH_SINK") == "aiosmtpd" else []
    return smtp_sink([sys.executable, str(HERE / "smtp_sink.py"), "{port}", str(delay), *extra])


def _mkt(db: str, *args: str) -> str:
    """One mkt command, run in this process (typer's runner: no interpreter start per command)."""
    from typer.testing import CliRunner

    from marketing_cli.cli.main import app

    result = CliRunner().invoke(app, ["--db", db, *args], catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"mkt {' '.join(args)} failed: {result.output.strip()}")
    return result.stdout


def _prepare(db: str, folder: Path, count: int) -> str:
    """count recipients and one campaign to all of them, SENDING with its audience frozen and
    its email.send job queued; returns the campaign's id."""
    from bench_email_send import BODY

    from marketing_cli import jobs, services
    from marketing_cli.storage.db import connect, transaction

    _mkt(db, "init", "--name", "Bench")
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        _mkt(db, "billing", "allowance", "set", resource, str(count * 20))
    csv = folder / f"contacts-{count}.csv"
    if not csv.exists():
        csv.write_text("email,first_name\n" + "".join(f"user{i}@example{i % 50}.org,Name{i}\n" for i in range(count)))
    _mkt(db, "contacts", "import", str(csv))
    domain = json.loads(_mkt(db, "domains", "add", "example.com", "--json"))
    conn = connect(db)
    try:  # the DNS records taken as published (no DNS here)
        with transaction(conn):
            conn.execute("UPDATE domains SET verified = 1")
            conn.execute("UPDATE dns_records SET verified = 1")
    finally:
        conn.close()
    sender = json.loads(_mkt(db, "senders", "add", "--domain-id", str(domain["id"]), "--local-part", "news",
                             "--display-name", "News", "--json"))
    html = folder / "body.html"
    html.write_text(BODY)
    campaign = json.loads(_mkt(db, "campaigns", "create", "--name", "Bench", "--json"))["id"]
    _mkt(db, "campaigns", "configure", campaign, "--sender-id", str(sender["id"]), "--subject-a",
         "Hello {{contact.first_name}}", "--audience-type", "ENTIRE_AUDIENCE")
    _mkt(db, "campaigns", "html", "set", campaign, "A", str(html))
    _mkt(db, "campaigns", "schedule", campaign, "--now")
    services.load_job_handlers()
    conn = connect(db)
    try:  # the audience freeze, here: the points measure the send only
        owner = jobs.new_owner()
        while (job := jobs.claim(conn, owner, types=["email.preprocess"])) is not None:
            jobs.run_job(conn, job, owner)
        status = conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign,)).fetchone()[0]
        queued = conn.execute("SELECT count(*) FROM email_messages WHERE status = 'queued'").fetchone()[0]
    finally:
        conn.close()
    if status != "SENDING" or queued != count:
        raise RuntimeError(f"the prepared campaign is {status} with {queued} of {count} messages queued")
    return campaign


def _scalar(db: str, sql: str) -> Any:
    from marketing_cli.storage.db import connect

    conn = connect(db, upgrade=False)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name: [0] is the state, [1] the parent's pid,
    [11] and [12] user and system time, [13] and [14] those of the children it waited for."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu_seconds(pids: list[int], children: bool = False) -> float | None:
    """The CPU time (user + system, every thread) the processes used so far; with `children`,
    also that of all their descendants, alive (from /proc) or exited and waited for (the
    cumulative children's times); None off Linux."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = {pid: _stat(pid) for pid in pids}
        if children:
            parents: dict[int, list[int]] = {}
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    with contextlib.suppress(OSError, IndexError):  # (a process that just ended)
                        parents.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
            todo = list(pids)
            while todo:
                for child in parents.get(todo.pop(), ()):
                    with contextlib.suppress(OSError):
                        fields[child] = _stat(child)
                        todo.append(child)
        columns = (11, 12, 13, 14) if children else (11, 12)
        return sum(int(f[i]) for f in fields.values() for i in columns) / tick
    except (OSError, ValueError, IndexError):
        return None


def _postmaster(server: Any) -> int | None:
    """The pid of the bench's PostgreSQL server (the first line of its postmaster.pid)."""
    try:
        return int((server.data / "postmaster.pid").read_text().split()[0])
    except (AttributeError, OSError, ValueError, IndexError):
        return None


class _Cpu:
    """The CPU time of each process group of a send: the workers, the sink and the server."""

    def __init__(self, workers: list[subprocess.Popen], sink: subprocess.Popen, server: Any) -> None:
        self.groups: dict[str, tuple[list[int], bool]] = {
            "workers": ([p.pid for p in workers], FORKED), "sink": ([sink.pid], False)}
        postmaster = _postmaster(server) if server is not None else None
        if postmaster is not None:
            self.groups["PostgreSQL"] = ([postmaster], True)

    def read(self) -> dict[str, float | None]:
        return {name: _cpu_seconds(pids, children) for name, (pids, children) in self.groups.items()}


def _per_message(start: dict[str, float | None], end: dict[str, float | None], messages: int) -> dict[str, float]:
    """CPU milliseconds per message of each group between two readings (and their sum)."""
    out = {name: 1000 * (end[name] - start[name]) / messages for name in start
           if start[name] is not None and end.get(name) is not None}
    if out:
        out["all"] = sum(out.values())
    return out


def _cpu_text(cpu: dict[str, float]) -> str:
    if not cpu:
        return "CPU: - ms a message"
    return "CPU ms a message: " + ", ".join(f"{name} {ms:.2f}" for name, ms in cpu.items())


def _send(db: str, sink: subprocess.Popen, port: int, server: Any, workers: int, campaign: str, count: int,
          warmup: float, window: float) -> tuple[float, dict[str, float]]:
    """Start `workers` `mkt jobs run --forever` processes at once; once the window is over
    (or everything was sent), cancel the campaign and stop them. Returns the seconds from
    their start to the last exit, and the CPU milliseconds per message delivered inside the
    window of the workers, the sink and the PostgreSQL server (`_Cpu`; what one message
    costs each; empty when not measured)."""
    env = {**os.environ, "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}", "MKT_SEND_WORKERS": str(workers),
           "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "marketing_cli", "--db", db, "jobs", "run", "--forever", "--interval", "0.2"]
    started = time.perf_counter()
    if FORKED:  # one command forking the workers (`mkt jobs run --processes N`)
        procs = [subprocess.Popen(cmd + ["--processes", str(workers)] * (workers > 1), env=env, cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)]
    else:
        procs = [subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for _ in range(workers)]
    first = None
    meter = _Cpu(procs, sink, server)
    mark: tuple[int, dict[str, float | None]] | None = None  # (delivered, CPU seconds) when the window opened
    cpu_per_message: dict[str, float] = {}
    try:
        while True:
            time.sleep(1.0)
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"a worker exited: {procs[0].stderr.read().decode(errors='replace')[-800:]}")
            delivered = _scalar(db, "SELECT coalesce(sum(delivered), 0) FROM email_campaign_counters")  # (no scan)
            if first is None and delivered:
                first = time.perf_counter()
            if first is not None and time.perf_counter() - first >= warmup:
                cpu = meter.read()
                if mark is None:
                    mark = (delivered, cpu)
                elif delivered > mark[0]:
                    cpu_per_message = _per_message(mark[1], cpu, delivered - mark[0])
            if delivered >= count or (first is not None and time.perf_counter() - first > warmup + window + 1):
                break
            if time.perf_counter() - started > warmup + window + 600:
                raise RuntimeError(f"only {delivered} of {count} messages delivered after 600 s")
        if delivered < count:
            _mkt(db, "campaigns", "cancel", campaign)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        errors = []
        for p in procs:
            try:
                _, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            if p.returncode not in (0, -signal.SIGTERM):
                errors.append(err.decode(errors="replace")[-800:])
    if errors:
        raise RuntimeError(f"mkt jobs run failed: {errors[0]}")
    return time.perf_counter() - started, cpu_per_message


def _rate(db: str, warmup: float, window: float) -> tuple[int, float, int]:
    """(messages delivered in the window, its seconds, messages delivered in all) from delivered_at."""
    from marketing_cli.kernel import clock
    from marketing_cli.storage.db import connect

    conn = connect(db, upgrade=False)
    try:
        stamps = sorted(clock.parse_ts(r[0]) for r in conn.execute(
            "SELECT delivered_at FROM email_messages WHERE status = 'delivered'"))
    finally:
        conn.close()
    if len(stamps) < 2:
        return 0, 0.0, len(stamps)
    start = stamps[0].timestamp() + warmup
    end = min(stamps[-1].timestamp(), start + window)
    if end - start < window / 4:  # a short send (--quick, 4 workers): its whole span instead
        start, end = stamps[0].timestamp(), stamps[-1].timestamp()
    inside = sum(1 for s in stamps if start < s.timestamp() <= end)
    return inside, end - start, len(stamps)


class _Engine:
    """Copies of one prepared database: PostgreSQL (a throwaway server) or a SQLite file."""

    def __init__(self, name: str, server: Any, folder: Path) -> None:
        self.name, self.server, self.folder = name, server, folder

    def prepared(self, count: int) -> tuple[str, str]:
        if self.server is None:
            self.template = str(self.folder / f"template-{count}.db")
            return self.template, _prepare(self.template, self.folder, count)
        import psycopg

        self.template = f"mkt_bench_workers_{count}"
        with psycopg.connect(self.server.url("postgres"), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {self.template}")
        return self.template, _prepare(self.server.url(self.template), self.folder, count)

    def copy(self) -> str:
        if self.server is None:
            target = self.folder / f"point-{time.monotonic_ns()}.db"
            shutil.copyfile(self.template, target)
            return str(target)
        import psycopg

        name = f"{self.template}_{time.monotonic_ns()}"
        with psycopg.connect(self.server.url("postgres"), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name} TEMPLATE {self.template}")
        return self.server.url(name)

    def drop(self, db: str) -> None:
        if self.server is None:
            for suffix in ("", "-wal", "-shm"):
                Path(db + suffix).unlink(missing_ok=True)
        else:
            self.server.drop(db)


def _curve(engine: _Engine, campaign: str, delay: float, count: int, warmup: float, window: float) -> list[dict]:
    sink, port = _sink(delay)
    label = "SMTP server taking 100 ms a message" if delay else "SMTP server answering at once"
    rows, one = [], None
    try:
        for n in WORKERS:
            db = engine.copy()
            try:
                wall, cpu = _send(db, sink, port, engine.server, n, campaign, count, warmup, window)
                inside, seconds, delivered = _rate(db, warmup, window)
            finally:
                engine.drop(db)
            rate = inside / seconds if seconds else 0.0
            print(f"email_workers: {engine.name}, {label}, {n} worker(s): {rate:,.1f} msg/s ({inside:,} messages in"
                  f" {seconds:.1f} s; {delivered:,} delivered in all, {wall:.1f} s from start to exit;"
                  f" {_cpu_text(cpu)}; load average {os.getloadavg()[0]:.1f})",
                  file=sys.stderr, flush=True)
            if one is None:
                one = rate
                continue
            ratio = rate / one if one else 0.0
            if engine.server is None:
                target, ok = "informational (SQLite)", True
            elif delay:
                target, ok = f">= {0.8 * n:.1f}x (0.8 x N)", ratio >= 0.8 * n
            else:
                target, ok = (">= 1.5x", ratio >= 1.5) if n == 2 else ("reported", True)
            rows.append(row(f"{engine.name} email send, one campaign of {count:,} recipients, {label}, {n} workers",
                            rate, "msg/s", "1 worker, same engine and server", one, ratio, target, ok))
    finally:
        sink.terminate()
        sink.wait(10)
    return rows


def run(quick: bool) -> list[dict]:
    import tempfile

    count, warmup, window = _sizes(quick)
    engines = os.environ.get("MKT_BENCH_ENGINES", "postgresql,sqlite").split(",")
    delays = [float(d) for d in os.environ.get("MKT_BENCH_DELAYS", "0.1,0").split(",")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mkt-bench-workers-") as tmp:
        for name in engines:
            server = postgres_server("email_workers") if name == "postgresql" else None
            if name == "postgresql" and server is None:
                continue
            engine = _Engine("PostgreSQL" if server else "SQLite", server, Path(tmp))
            try:
                _, campaign = engine.prepared(count)
                for delay in delays:
                    rows += _curve(engine, campaign, delay, count, warmup, window)
            finally:
                if server is not None:
                    server.stop()
    return rows


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(json.dumps(r))

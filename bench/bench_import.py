"""`mkt contacts import` against the loaders a user would reach for, on a realistic list (issue 42).

    python bench/run.py --only import [--quick]

MKT_BENCH_IMPORT_ROWS sets the size (default 200,000; --quick 20,000), MKT_BENCH_IMPORT_ROUNDS
the rounds (default 3), MKT_BENCH_IMPORT_PARTS=sqlite and/or postgresql (both by default), MKT_BENCH_IMPORT_BEFORE
the folder of another tree of mkt (`git archive COMMIT | tar -x -C DIR`) whose import takes
its turn in the same rounds, SQLite's and PostgreSQL's (before and after a change, alternated;
on PostgreSQL into a database whose schema that tree made).
The list is bench/contact_list.py's (fixed seed): email, accented names, 93 cities, phones
in five countries on 85% of rows, a signup date, about one bad row in 2,000.

Each loader runs as its own process, the way a user runs it, on a fresh database, and the
loaders take turns (round 1 mkt first, round 2 the others first, ...) so that the shared
machine's load falls on all of them alike; each row gives the medians, the load average
(1 minute) at the start of every run beside it, and peak RSS (the process's ru_maxrss).

- SQLite: `mkt contacts import FILE --json` (into mkt's schema: its indexes, the counter
  trigger, the consent ledger, every value checked) against `sqlite-utils insert DB t FILE
  --csv` (a table of text columns, no index, nothing checked; target ratio >= 1.0), and
  against `sqlite3 DB ".import --csv FILE t"` (the floor: SQLite's own C loader; informational).
- PostgreSQL (a throwaway server, tests/engines.py): `mkt contacts import` with MKT_DB the
  server's URL against `psql -c "\\copy t FROM FILE CSV HEADER"` into a bare table of text
  columns (informational: no loader that checks and indexes comes near it), and mkt's rows/s
  against the 40,000 rows/s goal at 1,000,000.
- peak RSS of the mkt import at the size run (target under 128 MiB at 1,000,000).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import contact_list  # noqa: E402
from common import postgres_server, row  # noqa: E402

REPO = HERE.parent
MAP = ["--map", "email=email_address", "--map", "phone=phone_number"]
FIELDS = ({"label": "City", "merge_tag": "city", "type": "TEXT"},
          {"label": "Signup", "merge_tag": "signup", "type": "DATE"},
          {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT"})


class Run:
    """One loader run: wall seconds, CPU seconds (user + system), peak RSS (MiB), load average
    (1 minute) when it started, its standard output."""

    load: float
    seconds: float
    cpu: float
    rss_mib: float
    out: bytes
    summary: dict[str, Any]
    server_cpu: float  # PostgreSQL: the server's CPU seconds during the run


def _timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> Run:
    """`cmd` run to its end; os.wait4 gives the child's own CPU time and peak RSS."""
    run = Run()
    run.load = os.getloadavg()[0]
    started = time.perf_counter()
    # stderr into a file, not a pipe read after stdout: a child that writes more than a pipe holds
    # to stderr (the io lock renewer's warnings on a loaded machine) would wait for ever.
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                                stderr=errors)
        out = proc.stdout.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)
        errors.seek(0)
        err = errors.read()
    run.seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed ({code}): {err.decode()[-2000:]}")
    run.out = out
    run.cpu = usage.ru_utime + usage.ru_stime
    run.rss_mib = usage.ru_maxrss / 1024
    return run


def prepare(url: str, repo: Path = REPO) -> None:
    """A database with one workspace (allowance raised) and the list's fields (made by `repo`'s
    code when it is another tree: MKT_BENCH_IMPORT_BEFORE)."""
    if repo != REPO:
        code = f"import sys; sys.path.insert(0, {str(repo / 'bench')!r}); import bench_import; bench_import.prepare({url!r})"
        subprocess.run([sys.executable, "-c", code], cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                       check=True)
        return
    from marketing_cli.services.account import billing, workspaces
    from marketing_cli.services.contacts import fields
    from marketing_cli.storage.db import connect

    conn = connect(url)
    ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
    billing.set_allowance(conn, ws, "contacts", 100_000_000)
    for body in FIELDS:
        fields.create_field(conn, ws, dict(body))
    conn.close()


def _fresh_file(path: Path) -> Path:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return path


def mkt_import(url: str, csv_path: Path, expect: int, repo: Path = REPO) -> Run:
    run = _timed([sys.executable, "-m", "marketing_cli", "contacts", "import", str(csv_path), *MAP, "--json"],
                 {"MKT_DB": url, "PYTHONPATH": str(repo), "MKT_WORKSPACE": "1"}, cwd=repo)  # -m reads cwd first
    summary = json.loads(run.out)
    assert summary["created"] + summary["skipped"] == expect, {k: summary[k] for k in ("created", "skipped")}
    run.summary = summary
    return run


def _sqlite_rounds(tmp: Path, csv_path: Path, n: int, rounds: int) -> dict[str, list[Run]]:
    db = tmp / "load.db"
    loaders: dict[str, Any] = {}

    def mkt() -> Run:
        prepare(str(_fresh_file(db)))
        return mkt_import(str(db), csv_path, n)

    loaders["mkt"] = mkt
    before = os.environ.get("MKT_BENCH_IMPORT_BEFORE")
    if before:  # another tree of mkt (an export of an earlier commit), run in the same rounds
        def mkt_before() -> Run:
            prepare(str(_fresh_file(db)), Path(before))
            return mkt_import(str(db), csv_path, n, Path(before))

        loaders["mkt-before"] = mkt_before
    utils = shutil.which("sqlite-utils")
    if utils:
        loaders["sqlite-utils"] = lambda: _timed([utils, "insert", str(_fresh_file(db)), "contacts", str(csv_path),
                                                  "--csv"])
    sqlite3_cli = shutil.which("sqlite3")
    if sqlite3_cli:
        loaders["sqlite3"] = lambda: _timed([sqlite3_cli, str(_fresh_file(db)), f".import --csv {csv_path} contacts"])
    return _alternate(loaders, rounds)


def _alternate(loaders: dict[str, Any], rounds: int) -> dict[str, list[Run]]:
    """Every loader once a round, the order turned round each round."""
    runs: dict[str, list[Run]] = {name: [] for name in loaders}
    names = list(loaders)
    for i in range(rounds):
        for name in (names if i % 2 == 0 else names[::-1]):
            run = loaders[name]()
            runs[name].append(run)
            print(f"{name}: {run.seconds:.2f} s, CPU {run.cpu:.2f} s, RSS {run.rss_mib:.1f} MiB, load {run.load:.1f}",
                  file=sys.stderr, flush=True)
    return runs


def _median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def _loads(*groups: list[Run]) -> str:
    values = [r.load for g in groups for r in g]
    return f"load {min(values):.1f}-{max(values):.1f}"


def _sqlite_rows(runs: dict[str, list[Run]], n: int) -> list[dict]:
    ours = runs["mkt"]
    out = []
    if "sqlite-utils" in runs:
        theirs = runs["sqlite-utils"]
        ratio = _median(theirs, "seconds") / _median(ours, "seconds")
        out.append(row(f"mkt contacts import, {n:,} rows, SQLite, wall (median of {len(ours)}, alternated; "
                       f"{_loads(ours, theirs)})", n / _median(ours, "seconds"), "rows/s",
                       "sqlite-utils insert --csv of the same file", n / _median(theirs, "seconds"), ratio,
                       "ratio >= 1.0", ratio >= 1.0))
        cpu = _median(theirs, "cpu") / _median(ours, "cpu")
        out.append(row("the same, CPU seconds (user + system; a loaded machine stretches them less than wall time)",
                       _median(ours, "cpu"), "s", "sqlite-utils insert --csv", _median(theirs, "cpu"), cpu,
                       "informational", True))
    if "sqlite3" in runs:
        floor = runs["sqlite3"]
        ratio = _median(floor, "seconds") / _median(ours, "seconds")
        out.append(row(f"mkt contacts import, {n:,} rows, SQLite (same runs)", n / _median(ours, "seconds"), "rows/s",
                       "sqlite3 .import --csv (the floor: SQLite's C loader, no index, no check)",
                       n / _median(floor, "seconds"), ratio, "informational", True))
    if "mkt-before" in runs:
        old = runs["mkt-before"]
        out.append(row(f"mkt contacts import, {n:,} rows, SQLite (same runs): this tree, wall", n / _median(ours, "seconds"),
                       "rows/s", "the tree in MKT_BENCH_IMPORT_BEFORE", n / _median(old, "seconds"),
                       _median(old, "seconds") / _median(ours, "seconds"), "informational", True))
        out.append(row(f"the same, CPU seconds; peak RSS {max(r.rss_mib for r in ours):.0f} MiB against "
                       f"{max(r.rss_mib for r in old):.0f} MiB", _median(ours, "cpu"), "s", "the earlier tree",
                       _median(old, "cpu"), _median(old, "cpu") / _median(ours, "cpu"), "informational", True))
    rss = max(r.rss_mib for r in ours)
    out.append(row(f"mkt contacts import, {n:,} rows, SQLite: peak RSS (largest of {len(ours)})", rss, "MiB",
                   "goal at 1,000,000 rows", 128.0, rss / 128.0, "under 128 MiB at 1,000,000",
                   rss < 128.0 or n < 1_000_000))
    return out


def _psql_copy(server: Any, csv_path: Path) -> Run:
    import psycopg

    url = server.fresh()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE bare ({', '.join(f'{c} text' for c in contact_list.HEADER)})")
    psql = shutil.which("psql")
    run = _timed([psql, url, "-q", "-c", f"\\copy bare FROM '{csv_path}' CSV HEADER"])
    server.drop(url)
    return run


def _server_cpu(server: Any) -> float:
    """CPU seconds the PostgreSQL server has used so far: the postmaster's own, its reaped
    children's (a connection's backend is reaped when the connection closes), and its live
    children's (checkpointer, WAL writer, ...), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])

    def stat(pid: int) -> list[str]:
        text = Path(f"/proc/{pid}/stat").read_text()
        return text[text.rindex(")") + 2:].split()  # fields from the 3rd (state) on

    own = stat(postmaster)
    total = sum(int(v) for v in own[11:15])  # utime, stime, cutime, cstime
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = stat(int(entry.name))
            except (OSError, ValueError):
                continue
            if int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])
    return total / tick


def _postgresql_rows(csv_path: Path, n: int, rounds: int) -> list[dict]:
    server = postgres_server("bench_import")
    if server is None or shutil.which("psql") is None:
        return []
    try:
        urls: list[str] = []

        def mkt() -> Run:
            if urls:
                server.drop(urls.pop())
            urls.append(server.fresh())
            prepare(urls[-1])
            before = _server_cpu(server)
            run = mkt_import(urls[-1], csv_path, n)
            run.server_cpu = _server_cpu(server) - before
            print(f"  server CPU {run.server_cpu:.2f} s", file=sys.stderr, flush=True)
            return run

        loaders = {"mkt": mkt, "psql": lambda: _psql_copy(server, csv_path)}
        before = os.environ.get("MKT_BENCH_IMPORT_BEFORE")
        if before:  # another tree of mkt: its own empty database, its schema made by its own code (untimed)
            def mkt_before() -> Run:
                if urls:
                    server.drop(urls.pop())
                urls.append(server.empty())
                prepare(urls[-1], Path(before))
                started = _server_cpu(server)
                run = mkt_import(urls[-1], csv_path, n, Path(before))
                run.server_cpu = _server_cpu(server) - started
                print(f"  server CPU {run.server_cpu:.2f} s", file=sys.stderr, flush=True)
                return run

            loaders["mkt-before"] = mkt_before
        runs = _alternate(loaders, rounds)
    finally:
        server.stop()
    ours, theirs = runs["mkt"], runs["psql"]
    rate = n / _median(ours, "seconds")
    load = _loads(ours, theirs)
    compared = []
    if "mkt-before" in runs:
        old = runs["mkt-before"]
        compared = [
            row(f"PostgreSQL: mkt contacts import, {n:,} rows (same runs): this tree, wall", rate, "rows/s",
                "the tree in MKT_BENCH_IMPORT_BEFORE", n / _median(old, "seconds"),
                _median(old, "seconds") / _median(ours, "seconds"), "informational", True),
            row(f"PostgreSQL: the server's CPU, {n:,} rows (same runs): this tree", _median(ours, "server_cpu"), "s",
                "the earlier tree", _median(old, "server_cpu"),
                _median(old, "server_cpu") / _median(ours, "server_cpu"), "informational", True),
            row(f"PostgreSQL: the import's client CPU, {n:,} rows (same runs): this tree", _median(ours, "cpu"), "s",
                "the earlier tree", _median(old, "cpu"), _median(old, "cpu") / _median(ours, "cpu"),
                "informational", True),
        ]
    return compared + [
        row(f"PostgreSQL: mkt contacts import, {n:,} rows, wall (median of {len(ours)}, alternated; {load})", rate,
            "rows/s", "psql \\copy of the same file into a bare table", n / _median(theirs, "seconds"),
            _median(theirs, "seconds") / _median(ours, "seconds"), "informational", True),
        row(f"PostgreSQL: mkt contacts import, {n:,} rows (same runs)", rate, "rows/s", "goal", 40_000.0,
            rate / 40_000, ">= 40,000 rows/s at 1,000,000", rate >= 40_000 or n < 1_000_000),
        row(f"PostgreSQL: the import's client CPU, {n:,} rows (same runs)", _median(ours, "cpu"), "s",
            "the import's wall time", _median(ours, "seconds"), _median(ours, "cpu") / _median(ours, "seconds"),
            "informational (1.0: the client is the bound)", True),
        row(f"PostgreSQL: the server's CPU during the import, {n:,} rows (same runs)", _median(ours, "server_cpu"),
            "s", "the import's wall time", _median(ours, "seconds"),
            _median(ours, "server_cpu") / _median(ours, "seconds"),
            "informational (client + server over 2.0: the 2 cores are the bound)", True),
    ]


def run(quick: bool) -> list[dict]:
    n = int(os.environ.get("MKT_BENCH_IMPORT_ROWS", 20_000 if quick else 200_000))
    rounds = int(os.environ.get("MKT_BENCH_IMPORT_ROUNDS", 3))
    parts = set(os.environ.get("MKT_BENCH_IMPORT_PARTS", "sqlite,postgresql").split(","))
    folder = Path(os.environ.get("MKT_BENCH_IMPORT_DIR") or tempfile.mkdtemp(prefix="mkt-bench-import-"))
    out: list[dict] = []
    try:
        csv_path = contact_list.write(folder / f"contacts-{n}.csv", n)
        if "sqlite" in parts:
            out += _sqlite_rows(_sqlite_rounds(folder, csv_path, n, rounds), n)
        if "postgresql" in parts:
            out += _postgresql_rows(csv_path, n, rounds)
    finally:
        if "MKT_BENCH_IMPORT_DIR" not in os.environ:
            shutil.rmtree(folder, ignore_errors=True)
    return out


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(json.dumps(r))

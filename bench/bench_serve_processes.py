"""GET /v1/workspace with 1 and 4 `mkt serve` processes, on a SQLite file and on PostgreSQL,
and each engine's serve RSS (issue 22, item 7).

    python bench/run.py --only serve_processes [--quick]

Per engine: one database made by `mkt init`; then one serve process loaded by one wrk
(-t2 -c32), then four serve processes on four ports loaded at once by four wrk (-t1 -c8
each, 32 connections in all; the figure is their sum). Without wrk, the asyncio client of
bench/common.py does the same. Every serve process runs its job worker too, as deployed.
Rows:
- 4 processes against 1 process, per engine (this machine has 2 cores: the ceiling is
  about 2x, less the load generators' share);
- PostgreSQL against SQLite at 1 and at 4 processes (informational);
- peak RSS (VmHWM) of a serve process after its load, PostgreSQL against SQLite (its
  connection pool against a SQLite connection).
The PostgreSQL half needs initdb and pg_ctl (a throwaway server, tests/engines.py); without
them only the SQLite rows are measured.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import REPO, _high_water_kib, free_port, http_load, python_cmd, row, wait_until_up  # noqa: E402

CONNECTIONS = 32


def _init(db: str) -> str:
    out = subprocess.run(python_cmd("-m", "marketing_cli", "--db", db, "init", "--name", "Bench", "--json"),
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return json.loads(out)["api_key"]


def _start(db: str, count: int) -> list[tuple[subprocess.Popen, str]]:
    servers = []
    for _ in range(count):
        port = free_port()
        proc = subprocess.Popen(python_cmd("-m", "marketing_cli", "--db", db, "serve", "--port", str(port),
                                           "--no-bootstrap"), cwd=REPO, env=dict(os.environ),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        servers.append((proc, f"http://127.0.0.1:{port}"))
    try:
        for _, base in servers:
            wait_until_up(base + "/", timeout=120)  # four interpreters starting at once on a busy machine
    except BaseException:
        _stop(servers)
        raise
    return servers


def _stop(servers: list[tuple[subprocess.Popen, str]]) -> None:
    for proc, _ in servers:
        proc.send_signal(signal.SIGTERM)
    for proc, _ in servers:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _load(servers: list[tuple[subprocess.Popen, str]], key: str, seconds: float) -> tuple[float, float]:
    """(requests/s summed over the servers, the mean peak RSS of a server in KiB)."""
    per = CONNECTIONS // len(servers)
    results: list[Any] = [None] * len(servers)

    def one(i: int, base: str) -> None:
        try:
            results[i] = http_load(base + "/v1/workspace", seconds, headers={"Authorization": f"Bearer {key}"},
                                   connections=per)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i, base)) for i, (_, base) in enumerate(servers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    rss = sum(_high_water_kib(proc.pid) for proc, _ in servers) / len(servers)
    return sum(r.rps for r in results), rss


def _engine(db: str, seconds: float, rounds: int) -> dict[int, tuple[float, float]]:
    """{processes: (best requests/s of `rounds`, mean serve RSS KiB)} for 1 and 4 processes."""
    key = _init(db)
    out = {}
    for count in (1, 4):
        servers = _start(db, count)
        try:
            _load(servers, key, 1)  # warm up: connections, caches
            best = max((_load(servers, key, seconds) for _ in range(rounds)), key=lambda r: r[0])
        finally:
            _stop(servers)
        out[count] = best
        print(f"serve_processes: {db.split('@')[-1]}: {count} process(es): {best[0]:,.0f} req/s, "
              f"RSS {best[1] / 1024:.0f} MiB", file=sys.stderr)
    return out


def run(quick: bool) -> list[dict]:
    seconds, rounds = (2, 1) if quick else (5, 3)
    with tempfile.TemporaryDirectory(prefix="mkt-bench-serve-") as tmp:
        lite = _engine(str(Path(tmp) / "bench.db"), seconds, rounds)
    try:
        from tests.engines import PostgresServer

        server = PostgresServer()
    except BaseException as exc:  # noqa: BLE001 - pytest.skip's exception when the binaries are missing
        print(f"serve_processes: no PostgreSQL ({exc}): its rows are left out", file=sys.stderr)
        server = None
    pg = None
    if server is not None:
        try:
            pg = _engine(server.empty(), seconds, rounds)
        finally:
            server.stop()
    by = f"{'wrk' if _wrk() else 'asyncio'}, {CONNECTIONS} connections"
    rows = [row(f"GET /v1/workspace, SQLite, 4 serve processes ({by})", lite[4][0], "req/s",
                "1 serve process, SQLite", lite[1][0], lite[4][0] / lite[1][0], "reported (2 cores)", True)]
    if pg is not None:
        rows += [
            row(f"GET /v1/workspace, PostgreSQL, 4 serve processes ({by})", pg[4][0], "req/s",
                "1 serve process, PostgreSQL", pg[1][0], pg[4][0] / pg[1][0], "reported (2 cores)", True),
            row("GET /v1/workspace, 1 serve process: PostgreSQL", pg[1][0], "req/s", "SQLite, same run", lite[1][0],
                pg[1][0] / lite[1][0], "informational", True),
            row("GET /v1/workspace, 4 serve processes: PostgreSQL", pg[4][0], "req/s", "SQLite, same run",
                lite[4][0], pg[4][0] / lite[4][0], "informational", True),
            row("mkt serve peak RSS after the load: PostgreSQL", pg[1][1] / 1024, "MiB", "SQLite, same run",
                lite[1][1] / 1024, pg[1][1] / lite[1][1], "informational", True),
        ]
    else:
        rows.append(row("mkt serve peak RSS after the load: SQLite", lite[1][1] / 1024, "MiB", "SQLite, 4 processes",
                        lite[4][1] / 1024, lite[1][1] / lite[4][1], "informational", True))
    return rows


def _wrk() -> bool:
    from common import wrk_path

    return wrk_path() is not None


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(json.dumps(r))

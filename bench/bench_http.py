"""HTTP throughput and latency of `mkt serve` against a bare async Starlette endpoint on the
same uvicorn settings, measured in the same run by the same load generator.

Rows: GET /v1/workspace (authentication + workspace + billing read) as requests/s beside
the bare endpoint, its p50 and p99 latency beside the bare endpoint's (from the same round),
and POST /v1/contacts/upsert (a write per request) beside GET /v1/workspace. The load
generator is wrk (-t2 -c32, `apt-get install wrk`) or, without it, an asyncio client with
the same 32 keep-alive connections (bench/common.py: http_load); the rows say which. The
servers are measured in paired rounds and the round with the median ratio is reported.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import Load, free_port, http_load, python_cmd, row, server_process

CONNECTIONS = 32

UPSERT_LUA = """
local counter = 0
request = function()
  counter = counter + 1
  local body = string.format('{"email_address":"bench-%d-%d@example.com","fields":{"first_name":"Bench"}}',
                             math.random(1, 1000000000), counter)
  return wrk.format("POST", "/v1/contacts/upsert", {["Content-Type"] = "application/json",
                    ["Authorization"] = "Bearer KEY"}, body)
end
"""


def _upsert_request(key: str, port: int):  # noqa: ANN202 - the asyncio client's request factory
    def request(i: int) -> bytes:
        body = json.dumps({"email_address": f"bench-{i}@example.com", "fields": {"first_name": "Bench"}}).encode()
        return (f"POST /v1/contacts/upsert HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    return request


def _setup_db(directory: Path) -> tuple[Path, str]:
    db = directory / "bench.db"
    out = subprocess.run(python_cmd("-m", "marketing_cli", "--db", str(db), "init", "--name", "Bench", "--json"),
                         capture_output=True, text=True, check=True).stdout
    key = json.loads(out)["api_key"]
    subprocess.run(python_cmd("-m", "marketing_cli", "--db", str(db), "billing", "allowance", "set", "contacts",
                              "100000000"), capture_output=True, check=True)
    return db, key


def run(quick: bool) -> list[dict]:
    seconds = 2 if quick else 5
    rounds = 3 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        db, key = _setup_db(Path(tmp))
        headers = {"Authorization": f"Bearer {key}"}
        bare_port, mkt_port = free_port(), free_port()
        mkt_cmd = python_cmd("-m", "marketing_cli", "--db", str(db), "serve", "--port", str(mkt_port), "--no-bootstrap")
        with server_process(python_cmd("bench/bare_app.py", str(bare_port)), bare_port) as (bare_base, bare_pid), \
                server_process(mkt_cmd, mkt_port) as (mkt_base, mkt_pid):
            # Paired rounds: the two servers back to back (in alternating order), the ratio taken
            # within each round, and the round with the median ratio reported. The shared
            # machine's load drifts over seconds; a pair measured together sees the same load,
            # where the best round of each side could come from different spells.
            pairs: list[tuple[Load, Load]] = []
            for i in range(rounds):
                def bare_load() -> Load:
                    return http_load(bare_base + "/ok", seconds, connections=CONNECTIONS, pid=bare_pid)

                def mkt_load() -> Load:
                    return http_load(mkt_base + "/v1/workspace", seconds, headers=headers, connections=CONNECTIONS,
                                     pid=mkt_pid)

                if i % 2 == 0:
                    b = bare_load()
                    w = mkt_load()
                else:
                    w = mkt_load()
                    b = bare_load()
                pairs.append((b, w))
                print(f"round {i + 1}: bare {b.rps:,.0f} req/s (p50 {b.p50_ms:.2f} ms, p99 {b.p99_ms:.2f} ms, "
                      f"{b.cpu_us:.0f} us CPU/request), GET /v1/workspace {w.rps:,.0f} req/s (p50 {w.p50_ms:.2f} ms, "
                      f"p99 {w.p99_ms:.2f} ms, {w.cpu_us:.0f} us CPU/request): {w.rps / b.rps:.2f}x, "
                      f"CPU {w.cpu_us / b.cpu_us:.2f}x; load {w.load:.1f}")
            bare, workspace = sorted(pairs, key=lambda pair: pair[1].rps / pair[0].rps)[len(pairs) // 2]
            try:
                upsert: Load | None = http_load(mkt_base + "/v1/contacts/upsert", seconds, connections=CONNECTIONS,
                                                lua=UPSERT_LUA.replace("KEY", key),
                                                request=_upsert_request(key, mkt_port))
            except RuntimeError as exc:  # the endpoint answered errors
                upsert = None
                print(f"upsert row skipped: {exc}")
    ratios = sorted(w.rps / b.rps for b, w in pairs)
    print(f"ratios of the {rounds} rounds: {', '.join(f'{r:.2f}' for r in ratios)}")
    loads = [load for b, w in pairs for load in (b.load, w.load)]
    under = f"load {min(loads):.1f}-{max(loads):.1f}"
    by = f"{workspace.generator}, {CONNECTIONS} connections, median of {rounds} paired rounds, {under}"
    ratio = workspace.rps / bare.rps
    # The CPU time each server spends per request: the bound of the rate ratio that the load
    # average does not move (a server that needs twice the CPU per request serves half the
    # rate once it has a core to itself). Median over the rounds of each side.
    bare_cpu = statistics.median(b.cpu_us for b, _ in pairs)
    mkt_cpu = statistics.median(w.cpu_us for _, w in pairs)
    rows = [
        row(f"GET /v1/workspace ({by})", workspace.rps, "req/s", "bare async endpoint", bare.rps, ratio,
            "ratio >= 0.50", ratio >= 0.50),
        row(f"GET /v1/workspace, server CPU per request (median of the {rounds} rounds, {under})", mkt_cpu, "us",
            "bare async endpoint", bare_cpu, mkt_cpu / bare_cpu, "ratio <= 2 (the 0.5x rate without the load)",
            mkt_cpu <= 2 * bare_cpu),
        row("GET /v1/workspace p50 latency (same round)", workspace.p50_ms, "ms", "bare async endpoint", bare.p50_ms,
            workspace.p50_ms / bare.p50_ms, "reported", True),
        row("GET /v1/workspace p99 latency (same round)", workspace.p99_ms, "ms", "bare async endpoint", bare.p99_ms,
            workspace.p99_ms / bare.p99_ms, "reported", True),
    ]
    if upsert is not None:
        rows.append(row(f"POST /v1/contacts/upsert, new contact each ({upsert.generator})", upsert.rps, "req/s",
                        "GET /v1/workspace", workspace.rps, upsert.rps / workspace.rps, "reported (write vs read)",
                        True))
    return rows

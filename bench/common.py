"""Helpers shared by the benchmark modules: free ports, server processes, HTTP load (wrk or asyncio), timing."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

REPO = Path(__file__).resolve().parent.parent


def row(name: str, value: float, unit: str, baseline: str, baseline_value: float, ratio: float,
        target: str, ok: bool) -> dict:
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "baseline_value": baseline_value,
            "ratio": ratio, "target": target, "ok": ok}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_server(bench: str) -> Any:
    """A throwaway PostgreSQL server (tests/engines.PostgresServer), or None, said on stderr,
    when this machine has no PostgreSQL binaries: the bench then gives no rows."""
    try:
        from tests.engines import PostgresServer

        return PostgresServer()
    except BaseException as exc:  # noqa: BLE001 - pytest.skip's exception when the binaries are missing
        print(f"{bench}: no PostgreSQL ({exc}): no rows", file=sys.stderr)
        return None


def smtp_sink(cmd: Sequence[str]) -> tuple[subprocess.Popen, int]:
    """Start an SMTP server (`cmd` + its port as the last argument's `{port}`) and wait until
    it answers: (process, port)."""
    import smtplib

    port = free_port()
    proc = subprocess.Popen([part.format(port=port) for part in cmd],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            smtplib.SMTP("127.0.0.1", port, timeout=1).quit()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the SMTP sink did not start")


def wait_until_up(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=0.5)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"server at {url} did not start")


@contextmanager
def server(cmd: Sequence[str], port: int, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run a server command until the block ends; yields its base URL."""
    with server_process(cmd, port, env) as (base, _):
        yield base


@contextmanager
def server_process(cmd: Sequence[str], port: int, env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """As `server`, yielding (base URL, process id): the id for `cpu_seconds`."""
    proc = subprocess.Popen(list(cmd), env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base + "/")
        yield base, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) a live process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> float:
    """The machine's one-minute load average, to print beside a figure measured under it."""
    return os.getloadavg()[0]


@dataclass
class Load:
    """What one load run measured: requests per second and latency percentiles (ms)."""

    rps: float
    p50_ms: float
    p99_ms: float
    generator: str  # "wrk" or "asyncio"
    requests: int = 0  # answered in all
    cpu_us: float = 0.0  # the server's CPU per request (microseconds), when `http_load` was given its pid
    load: float = 0.0  # the load average at the end of the run


def wrk_path() -> str | None:
    return shutil.which("wrk")


def http_load(url: str, seconds: float, *, headers: dict[str, str] | None = None,
              request: Callable[[int], bytes] | None = None, lua: str | None = None,
              connections: int = 32, pid: int | None = None) -> Load:
    """One load generator, `connections` keep-alive connections for `seconds`: wrk when it is
    installed (with `lua` for varying requests), else the asyncio client below (with `request`,
    the i-th request's bytes). Answers other than 2xx make the run fail (RuntimeError).

    With `pid`, the server process's CPU time per request is measured as well (`Load.cpu_us`):
    a figure the machine's load changes far less than the rate, since a busy machine delays
    the server's work without making it larger.
    """
    before = cpu_seconds(pid) if pid is not None else 0.0
    if wrk_path() is not None:
        result = wrk_load(url, seconds, headers=headers, lua=lua, connections=connections)
    else:
        result = asyncio_load(url, seconds, headers=headers, request=request, connections=connections)
    if pid is not None and result.requests:
        result.cpu_us = (cpu_seconds(pid) - before) * 1e6 / result.requests
    result.load = load_average()
    return result


def _ms(text: str) -> float:
    """wrk's '812.00us', '1.23ms', '2.01s' in milliseconds."""
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if match is None:
        raise RuntimeError(f"unexpected latency in wrk output: {text!r}")
    return float(match[1]) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[match[2]]


def wrk_load(url: str, seconds: float, *, headers: dict[str, str] | None = None, lua: str | None = None,
             connections: int = 32, threads: int = 2) -> Load:
    """wrk's requests per second and latency distribution (non-2xx answers make the run fail)."""
    cmd = [wrk_path() or "wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    for key, value in (headers or {}).items():
        cmd += ["-H", f"{key}: {value}"]
    script = None
    if lua:
        script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
        script.write(lua)
        script.close()
        cmd += ["-s", script.name]
    cmd.append(url)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        if script:
            os.unlink(script.name)
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw error answers:\n{out}")
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.MULTILINE)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE)
    if not (rps and p50 and p99):
        raise RuntimeError(f"no Requests/sec or latency distribution in wrk output:\n{out}")
    total = re.search(r"^\s*(\d+) requests in", out, re.MULTILINE)
    return Load(float(rps.group(1)), _ms(p50.group(1)), _ms(p99.group(1)), "wrk", int(total.group(1)) if total else 0)


def wrk_rps(url: str, seconds: int, headers: dict[str, str] | None = None, lua: str | None = None,
            connections: int = 32, threads: int = 2) -> float:
    """Requests per second that wrk measured (non-2xx answers make the run fail)."""
    return wrk_load(url, seconds, headers=headers, lua=lua, connections=connections, threads=threads).rps


def asyncio_load(url: str, seconds: float, *, headers: dict[str, str] | None = None,
                 request: Callable[[int], bytes] | None = None, connections: int = 32) -> Load:
    """The load generator without wrk: `connections` keep-alive connections on one asyncio loop,
    each sending its next request as soon as the answer before has arrived (as wrk does). It is
    Python, so it needs more CPU per request than wrk: compare its figures with each other only."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    if request is None:
        head = f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        fixed = (head + "\r\n").encode()

        def request(i: int) -> bytes:
            return fixed

    return asyncio.run(_asyncio_load(host, port, request, seconds, connections))


async def _asyncio_load(host: str, port: int, request: Callable[[int], bytes], seconds: float,
                        connections: int) -> Load:
    latencies: list[float] = []
    failures: list[str] = []
    counter = iter(range(10**12))
    clock = time.perf_counter
    deadline = clock() + seconds

    async def connection() -> None:
        reader = writer = None
        while clock() < deadline and not failures:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            started = clock()
            writer.write(request(next(counter)))
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:  # the server closed a kept-alive connection: reconnect
                writer.close()
                reader = writer = None
                continue
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            fields = {name.strip().lower(): value.strip() for name, _, value in (h.partition(":") for h in lines[1:] if h)}
            if "content-length" not in fields:
                failures.append(f"no content-length in {lines[0]}")
                break
            await reader.readexactly(int(fields["content-length"]))
            latencies.append(clock() - started)
            if not 200 <= status < 300:
                failures.append(lines[0])
            if fields.get("connection", "").lower() == "close":
                writer.close()
                reader = writer = None
        if writer is not None:
            writer.close()

    started = clock()
    await asyncio.gather(*(connection() for _ in range(connections)))
    elapsed = clock() - started
    if failures:
        raise RuntimeError(f"the load generator saw error answers: {failures[:3]}")
    cuts = statistics.quantiles(latencies, n=100)
    return Load(len(latencies) / elapsed, cuts[49] * 1000, cuts[98] * 1000, "asyncio", len(latencies))


def median_seconds(fn: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def python_cmd(*args: str) -> list[str]:
    return [sys.executable, *args]


def _high_water_kib(pid: int) -> int:
    """VmHWM of a live process: the peak RSS of its own address space (reset at exec, unlike
    getrusage's ru_maxrss, which keeps the forking parent's peak)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def run_measured(cmd: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path = REPO,
                 interval: float = 0.02) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of a command, its memory read from /proc while it runs.

    RuntimeError when it exits with a non-zero status.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(list(cmd), env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _high_water_kib(proc.pid))
        time.sleep(interval)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} ... failed with status {proc.returncode}")
    return seconds, peak

"""Helpers shared by the benchmark modules: free ports, server processes, wrk, timing."""

from __future__ import annotations

import os
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
from pathlib import Path

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
    proc = subprocess.Popen(list(cmd), env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base + "/")
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def require_wrk() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise RuntimeError("the HTTP benchmarks need wrk: apt-get install wrk")
    return path


def wrk_rps(url: str, seconds: int, headers: dict[str, str] | None = None, lua: str | None = None,
            connections: int = 32, threads: int = 2) -> float:
    """Requests per second that wrk measured (non-2xx answers make the run fail)."""
    cmd = [require_wrk(), f"-t{threads}", f"-c{connections}", f"-d{seconds}s"]
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
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError(f"no Requests/sec in wrk output:\n{out}")


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

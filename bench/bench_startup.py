"""CLI start-up: `mkt --help` and `mkt workspace show --json` against a minimal two-command
typer app (`bench/minimal_typer.py --help`), median wall time of fresh processes."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from common import median_seconds, python_cmd, row

TARGET = 1.2


def _timer(cmd: list[str]):  # noqa: ANN202
    return lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def run(quick: bool) -> list[dict]:
    repeat = 7 if quick else 21
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        subprocess.run(python_cmd("-m", "marketing_cli", "--db", db, "init", "--name", "Bench"), check=True,
                       capture_output=True)
        cases = {
            "baseline": python_cmd("bench/minimal_typer.py", "--help"),
            "mkt --help": python_cmd("-m", "marketing_cli", "--help"),
            "mkt workspace show --json": python_cmd("-m", "marketing_cli", "--db", db, "workspace", "show", "--json"),
        }
        # Interleave the measurements so that noise on the shared machine hits all alike.
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(3):
            for name, cmd in cases.items():
                samples[name].append(median_seconds(_timer(cmd), repeat=max(1, repeat // 3)))
    base = min(samples["baseline"]) * 1000
    rows = []
    for name in ("mkt --help", "mkt workspace show --json"):
        value = min(samples[name]) * 1000
        rows.append(row(f"start-up: {name}", value, "ms", "minimal typer app --help", base, value / base,
                        f"ratio <= {TARGET}", value / base <= TARGET))
    return rows

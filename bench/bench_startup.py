"""CLI start-up against a minimal two-command typer app (bench/minimal_typer.py), median wall
time of fresh processes, the cases interleaved so that noise hits them alike.

Like is compared with like: `mkt --help` with the minimal app's `--help`, and
`mkt workspace show --json` (a command that parses options, opens the database, reads and
prints) with the minimal app running one of its commands (`hello --name x`). Typer 0.29
coerces every parameter value through pydantic, so any command that receives an option pays
the ~90 ms pydantic import that `--help` does not: comparing a command with `--help` would
measure typer, not mkt. Both comparisons are printed.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from common import median_seconds, python_cmd, row

TARGET = 1.2


def _timer(cmd: list[str]):  # noqa: ANN202
    return lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def run(quick: bool) -> list[dict]:
    rounds = 3 if quick else 7
    per_round = 3 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        subprocess.run(python_cmd("-m", "marketing_cli", "--db", db, "init", "--name", "Bench"), check=True,
                       capture_output=True)
        cases = {
            "minimal --help": python_cmd("bench/minimal_typer.py", "--help"),
            "minimal hello": python_cmd("bench/minimal_typer.py", "hello", "--name", "x"),
            "mkt --help": python_cmd("-m", "marketing_cli", "--help"),
            "mkt workspace show --json": python_cmd("-m", "marketing_cli", "--db", db, "workspace", "show", "--json"),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, cmd in cases.items():
                samples[name].append(median_seconds(_timer(cmd), repeat=per_round))
    ms = {name: min(values) * 1000 for name, values in samples.items()}
    rows = []
    for name, base_name, target in [("mkt --help", "minimal --help", True),
                                    ("mkt workspace show --json", "minimal hello", True),
                                    ("mkt workspace show --json", "minimal --help", False)]:
        ratio = ms[name] / ms[base_name]
        rows.append(row(f"start-up: {name}", ms[name], "ms", f"typer app: {base_name}", ms[base_name], ratio,
                        f"ratio <= {TARGET}" if target else "reported", ratio <= TARGET or not target))
    return rows

"""Run mkt's benchmarks and print one table: each figure beside a baseline measured in the
same run on the same machine (the machine is shared and noisy, so only ratios are compared).

    python bench/run.py            full scale (1,000,000 contacts; takes a while)
    python bench/run.py --quick    small scale, well under a minute per module
    python bench/run.py --only http,startup --markdown

Every `bench/bench_*.py` module defines `run(quick: bool) -> list[dict]`, one dict per row:
name, value, unit, baseline, baseline_value, ratio, target, ok.

Each module runs in a fresh interpreter of its own (`run.py --child NAME`), never in this
process: a module's data, caches and memory cannot leak into the next one's figures (a
child forked from a large parent used to inherit the parent's peak RSS: the email bench
read 1,123 MiB after the contacts bench), and one module's crash cannot take the table down.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def discover(only: set[str] | None) -> list[tuple[str, Path]]:
    modules = []
    for path in sorted(HERE.glob("bench_*.py")):
        short = path.stem.removeprefix("bench_")
        if only is None or short in only:
            modules.append((short, path))
    return modules


def load(path: Path):  # noqa: ANN201
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def run_child(short: str, path: Path, quick: bool) -> list[dict]:
    """Run one module in a new interpreter and read its rows back (RuntimeError when it fails)."""
    with tempfile.TemporaryDirectory(prefix="mkt-bench-") as tmp:
        out = Path(tmp) / "rows.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(path), "--rows-to", str(out)]
        done = subprocess.run(cmd + (["--quick"] if quick else []), cwd=HERE.parent)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"bench {short} failed (exit status {done.returncode})")
        return json.loads(out.read_text())


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:,.2f}"
    return f"{value:.4f}"


def markdown(rows: list[dict]) -> str:
    lines = ["| benchmark | mkt | baseline | ratio | target | met |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['name']} | {fmt(r['value'])} {r['unit']} | {r['baseline']}: {fmt(r['baseline_value'])} {r['unit']} "
            f"| {r['ratio']:.2f} | {r['target']} | {'yes' if r['ok'] else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small scale: seconds, not minutes")
    parser.add_argument("--only", help="comma-separated modules (the bench_*.py names without the prefix: http, startup, "
                        "contacts, segments, dkim, sms, sms_twilio, email_send ...)")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--save", type=Path, help="write the rows as JSON to this file")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # run one module here (see run_child)
    parser.add_argument("--rows-to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.rows_to.write_text(json.dumps(load(args.child).run(args.quick)))
        return 0
    only = set(args.only.split(",")) if args.only else None

    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    rows: list[dict] = []
    broken = []
    for short, path in discover(only):
        started = time.perf_counter()
        console.print(f"[bold]bench {short}[/] ({'quick' if args.quick else 'full'}) ...")
        try:
            module_rows = run_child(short, path, args.quick)
        except RuntimeError as exc:  # one broken module must not hide the others' rows
            console.print(str(exc))
            broken.append(short)
            continue
        for row in module_rows:
            row.setdefault("module", short)
        rows.extend(module_rows)
        console.print(f"  done in {time.perf_counter() - started:.1f} s")

    table = Table(title=f"mkt benchmarks ({'quick' if args.quick else 'full'})", header_style="bold")
    for column in ("benchmark", "mkt", "baseline (same run)", "ratio", "target", "met"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["name"], f"{fmt(r['value'])} {r['unit']}", f"{r['baseline']}: {fmt(r['baseline_value'])} {r['unit']}",
                      f"{r['ratio']:.2f}", r["target"], "yes" if r["ok"] else "[red]NO[/]")
    Console().print(table)
    if args.markdown:
        print(markdown(rows))
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(rows, indent=2))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

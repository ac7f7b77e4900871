"""The benchmark modules load and follow bench/run.py's interface (they run in bench/, not here)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine_neutral  # touches no database: run once, in the SQLite half

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_every_bench_module_defines_run() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from run import discover, load

        modules = discover(None)
        assert {name for name, _ in modules} >= {"http", "startup", "contacts", "segments", "sms_twilio", "automations"}
        for _, path in modules:
            run = load(path).run
            assert list(inspect.signature(run).parameters) == ["quick"]
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.slow
def test_postgresql_bench_quick_mode_measures_both_engines(tmp_path: Path) -> None:
    """bench/run.py --only postgresql --quick, at a few hundred contacts: the PostgreSQL rows come
    out, each a ratio against a baseline of the same run (no PostgreSQL: the module says so)."""
    from tests.engines import _binaries

    if _binaries() is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not on PATH")
    saved = tmp_path / "rows.json"
    env = {**os.environ, "MKT_BENCH_CONTACTS": "300", "PYTHONPATH": str(BENCH.parent)}
    done = subprocess.run([sys.executable, str(BENCH / "run.py"), "--only", "postgresql", "--quick", "--save",
                           str(saved)], cwd=BENCH.parent, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(saved.read_text())
    names = [r["name"] for r in rows]
    assert any(n.startswith("PostgreSQL: contacts import, 300 rows") for n in names)
    assert sum(n.startswith("PostgreSQL: search at 300") for n in names) == 3
    expansion = [n for n in names if n.startswith("PostgreSQL: SMS expansion, 300 recipients")]
    assert len(expansion) == 4 and sum("CPU time, server and client" in n for n in expansion) == 2  # plain, merge tag
    assert any("RSS" in n for n in names)
    for r in rows:
        assert r["value"] > 0 and r["baseline_value"] > 0 and r["ratio"] > 0, r
        if "search" in r["name"] or "import" in r["name"]:  # SMS rows are time ratios (the inverse of rates)
            assert r["ratio"] == pytest.approx(r["value"] / r["baseline_value"]), r

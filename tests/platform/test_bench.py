"""The benchmark modules load and follow bench/run.py's interface (they run in bench/, not here)."""

from __future__ import annotations

import inspect
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

"""CI runs the property and fuzz tests with an empty Hypothesis example database (issue 41):
`.ci/run` points MKT_HYPOTHESIS_DATABASE at a new temporary folder, and tests/conftest.py makes
it the database of every test that names none, so no run replays what an earlier one kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_gives_the_run_an_empty_example_database() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert 'MKT_HYPOTHESIS_DATABASE="$(mktemp -d)"' in script
    assert script.index("export MKT_HYPOTHESIS_DATABASE") < script.index("python3 -m pytest")


def test_conftest_reads_the_folder(tmp_path: Path) -> None:
    code = ("import tests.conftest; from hypothesis import settings; "
            "print(type(settings.default.database).__name__, settings.default.database.path)")
    env = {**os.environ, "MKT_HYPOTHESIS_DATABASE": str(tmp_path / "examples"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["DirectoryBasedExampleDatabase", str(tmp_path / "examples")]

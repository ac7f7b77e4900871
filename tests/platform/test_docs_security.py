"""docs/security.md names, for every claim, the module that enforces it and the test that
proves it: each named test and module must exist, so the page cannot cite what was renamed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine_neutral  # touches no database: run once, in the SQLite half

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")


def _tests_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_cited_test_exists() -> None:
    cited, current, missing = 0, None, []
    # `tests/x/test_y.py::test_z`, then `::test_w` for another test of the same file (or of
    # the file named alone just before: "Tests (`tests/x/test_y.py`): `::test_z`")
    for match in re.finditer(r"`(tests/[\w/]+\.py)?(?:::(test_\w+))?`", PAGE):
        current = match.group(1) or current
        if match.group(2) is None:
            continue
        assert current is not None, match.group(0)
        cited += 1
        if match.group(2) not in _tests_of(ROOT / current):
            missing.append(f"{current}::{match.group(2)}")
    assert missing == [] and cited > 60


def test_every_cited_module_exists() -> None:
    modules = set(re.findall(r"`((?:kernel|services|api)/[\w/]+\.py)", PAGE))
    assert len(modules) > 15
    assert [m for m in sorted(modules) if not (ROOT / "marketing_cli" / m).is_file()] == []

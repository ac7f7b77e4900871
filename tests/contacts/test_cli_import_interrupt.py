"""Ctrl-C during `mkt contacts import`: a clear message of what was kept (the committed
batches) and that re-running is safe; exit 130, no traceback; the interrupted batch rolled back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.contacts import batches


def _csv(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "people.csv"
    path.write_text("email_address,first_name\n" + "".join(f"p{i}@example.com,P{i}\n" for i in range(n)))
    return path


def _interrupt_on_call(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    real = batches.BatchWriter.apply
    calls = {"n": 0}

    def apply(self: Any, batch: Any, lock: Any = None) -> None:
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt
        real(self, batch, lock)

    monkeypatch.setattr(batches.BatchWriter, "apply", apply)


def _count(conn: Any) -> int:
    return conn.execute("SELECT COUNT(*) FROM contacts").fetchone()[0]


def test_ctrl_c_keeps_the_committed_batches_and_says_so(cli: Any, conn: Any, workspace: dict[str, Any],
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupt_on_call(monkeypatch, 3)
    result = cli("contacts", "import", str(_csv(tmp_path, 25)), "--batch-size", "10")
    assert result.exit_code == 130
    assert "Traceback" not in result.output and "Aborted" not in result.output
    assert "the first 20 rows of the file were imported and are kept (20 contacts created, 0 updated)" in result.stderr
    assert "Running the same command again is safe" in result.stderr
    assert _count(conn) == 20  # the third batch was never written
    monkeypatch.undo()
    again = cli("contacts", "import", str(_csv(tmp_path, 25)), "--batch-size", "10", "--json")
    assert again.exit_code == 0 and _count(conn) == 25  # re-running: no duplicates


def test_ctrl_c_before_the_first_commit(cli: Any, conn: Any, workspace: dict[str, Any], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupt_on_call(monkeypatch, 1)
    result = cli("contacts", "import", str(_csv(tmp_path, 5)))
    assert result.exit_code == 130 and "nothing was imported" in result.stderr and _count(conn) == 0


def test_ctrl_c_during_a_dry_run(cli: Any, conn: Any, workspace: dict[str, Any], tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupt_on_call(monkeypatch, 1)
    result = cli("contacts", "import", str(_csv(tmp_path, 5)), "--dry-run")
    assert result.exit_code == 130 and "Dry run interrupted: nothing was written." in result.stderr

"""Fixtures of the delivery tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def default_outbox(db_path: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> Path:
    """Where the outbox is when nothing names one: beside the database file; on PostgreSQL,
    which has no file here, in the working directory (the test's own)."""
    if engine == "postgresql":
        folder = tmp_path / "cwd"
        folder.mkdir()
        monkeypatch.chdir(folder)
        return folder / "outbox"
    return Path(db_path).parent / "outbox"


@pytest.fixture
def verified_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every DNS record a sending domain asks for is found as published (domains verify at once)."""
    from marketing_cli.services.email import dns_check

    monkeypatch.setattr(dns_check, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])

"""storage/versioned.py: a connection's dict lasts exactly while the database is unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from marketing_cli.storage import versioned
from marketing_cli.storage.db import connect


def test_the_dict_lasts_while_nothing_changes_and_not_after_any_commit(conn: Any, db_path: Path,
                                                                      workspace: dict) -> None:
    if not isinstance(db_path, Path):
        assert versioned.entries(conn) is None  # PostgreSQL: no counter, so nothing is kept
        return
    reader, other = connect(db_path), connect(db_path)
    try:
        kept = versioned.entries(reader)
        assert kept is not None
        kept["x"] = 1
        assert versioned.entries(reader) is kept  # nothing changed: the same dict
        other.execute("UPDATE workspaces SET name = name || 'x'")  # another connection's commit
        fresh = versioned.entries(reader)
        assert fresh is not kept and fresh == {}
        fresh["y"] = 2
        reader.execute("UPDATE workspaces SET name = name || 'y'")  # the connection's own write
        assert versioned.entries(reader) == {}
        reader.execute("BEGIN")
        assert versioned.entries(reader) is None  # inside a transaction: read as usual
        reader.execute("ROLLBACK")
    finally:
        reader.close()
        other.close()


def test_a_dict_is_emptied_past_its_size(conn: Any, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not isinstance(db_path, Path):
        pytest.skip("SQLite only: PostgreSQL keeps nothing")
    monkeypatch.setattr(versioned, "MAX_ENTRIES", 3)
    kept = versioned.entries(conn)
    kept.update({1: 1, 2: 2, 3: 3, 4: 4})
    assert versioned.entries(conn) == {}

"""Docs match the code: every command has help text and is documented in docs/cli.md."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from marketing_cli.cli.main import app

pytestmark = pytest.mark.engine_neutral  # touches no database: run once, in the SQLite half

DOCS = Path(__file__).resolve().parents[2] / "docs"


def walk(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    found = []
    if hasattr(command, "list_commands"):  # a group: the root loads its resource groups lazily
        for name in command.list_commands(None):
            found.extend(walk(command.get_command(None, name), (*path, name)))
    else:
        found.append((path, command))
    return found


def all_commands() -> list[tuple[tuple[str, ...], object]]:
    return walk(typer.main.get_command(app))


def test_every_command_has_help() -> None:
    missing = [" ".join(p) for p, cmd in all_commands() if not (getattr(cmd, "help", None) or "").strip()]
    assert missing == []


def test_every_command_is_in_docs_cli() -> None:
    text = (DOCS / "cli.md").read_text()
    missing = []
    for path, _ in all_commands():
        # Documented as `mkt a b c`, or in a heading about `mkt a` that lists `b c`
        # (for example "### mkt billing show / plan list / plan set PLAN").
        full = "mkt " + " ".join(path)
        rest = " ".join(path[1:])
        listed = any(line.startswith("#") and f"mkt {path[0]}" in line and rest in line
                     for line in text.splitlines())
        if full not in text and not listed:
            missing.append(full)
    assert missing == []


def test_readme_quick_start_commands() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    assert "python3 -m pip install -e . && python3 -m marketing_cli serve" in readme
    ci = (DOCS.parent / ".ci" / "run").read_text()
    test_cmd = "python3 -m pip install -e '.[test]' && python3 -m pytest -n 2 && python3 -m pytest -n 2 --engine postgresql"
    assert test_cmd in readme and test_cmd in ci


def test_docs_stand_alone() -> None:
    """A user has README.md and docs/ only: no page sends them to the project's internal files."""
    pages = [DOCS.parent / "README.md", *sorted(DOCS.glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for name in ("CONTRACT", "api-spec.md", "STYLE.md", "shared/spec"):
            assert name not in text, f"{page.name} mentions {name}"

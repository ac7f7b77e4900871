"""Output and errors for every command.

`emit(value, as_json, human)` prints exactly the API's `data` value as JSON with
`--json`, else whatever `human(value)` renders for a person. `MktGroup` turns an
MktError from any command into its message on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from marketing_cli.encoding import dumps
from marketing_cli.errors import MktError

JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON `data` value instead of a table.")]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class MktGroup(TyperGroup):
    """The root group: every MktError becomes 'message' on stderr and exit code 1."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MktError as exc:
            err_console.print(exc.message, markup=False, soft_wrap=True)
            raise typer.Exit(1) from None


def emit(value: Any, as_json: bool, human: Callable[[Any], Any] | None = None) -> None:
    if as_json:
        sys.stdout.write(dumps(value, pretty=True) + "\n")
        return
    rendered = human(value) if human else None
    if rendered is None:
        rendered = dumps(value, pretty=True)
        console.print_json(rendered)
        return
    console.print(rendered)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> Table:
    t = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        t.add_column(column)
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


def pairs(mapping: dict[str, Any], title: str | None = None) -> Table:
    """A two-column key/value table."""
    t = Table(title=title, show_header=False, box=None, padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    for key, value in mapping.items():
        t.add_row(key, "" if value is None else str(value))
    return t

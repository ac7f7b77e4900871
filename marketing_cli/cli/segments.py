"""`mkt segments`: (being built)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Segments.", no_args_is_help=True)

"""`mkt tags`: (being built)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Tags.", no_args_is_help=True)

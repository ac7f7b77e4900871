"""`mkt fields`: (being built)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Fields.", no_args_is_help=True)

"""`mkt events`: (being built)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Events.", no_args_is_help=True)

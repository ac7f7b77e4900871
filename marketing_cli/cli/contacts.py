"""`mkt contacts`: (being built)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Contacts.", no_args_is_help=True)

# `contacts import` and `contacts export` live in contacts_io.py and register on `app`.
from marketing_cli.cli import contacts_io  # noqa: E402,F401

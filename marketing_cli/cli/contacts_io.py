"""`mkt contacts import` / `mkt contacts export`: (being built)."""

from __future__ import annotations

from marketing_cli.cli.contacts import app  # noqa: F401

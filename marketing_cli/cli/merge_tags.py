"""`mkt merge-tags`: the tags usable in templates (the twin of GET /v1/merge-tags)."""

from __future__ import annotations

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.services.contacts import merge_tags

app = typer.Typer(help=HELP["merge_tags"], no_args_is_help=True)


@app.command("list")
def merge_tags_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
                    quiet: QuietOption = False) -> None:
    """List merge tags: contact fields, workspace values, action URLs and system values."""
    s = state(ctx)
    emit(merge_tags.list_merge_tags(s.conn(), s.workspace_id()), as_json, lambda rows: table(
        ["tag", "label", "category"], [(t["tag"], t["label"], t["category"]) for t in rows]), wide=wide, quiet=quiet)

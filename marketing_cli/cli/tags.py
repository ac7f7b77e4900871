"""`mkt tags`: create, list and delete tags (the twin of /v1/tags)."""

from __future__ import annotations

from typing import Annotated

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, table
from marketing_cli.cli.references import tag_ids
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["tags"], no_args_is_help=True)


@app.command("create")
def tags_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The tag's name (unique in the workspace, any letter case).")],
    as_json: JsonOption = False,
) -> None:
    """Create a tag (POST /v1/tags)."""
    from marketing_cli.services.contacts import tags

    s = state(ctx)
    emit(tags.create_tag(s.conn(), s.workspace_id(), {"name": name}), as_json,
         lambda t: f"Tag {t['id']} created: {t['name']}")


@app.command("list")
def tags_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
              quiet: QuietOption = False) -> None:
    """List the workspace's tags (GET /v1/tags)."""
    from marketing_cli.services.contacts import tags

    s = state(ctx)
    emit(tags.list_tags(s.conn(), s.workspace_id()), as_json,
         lambda rows: table(["id", "name"], [(t["id"], t["name"]) for t in rows]), wide=wide, quiet=quiet)


TagRef = Annotated[str, typer.Argument(metavar='TAG', help="The tag: its id or its name (see `mkt tags list`).")]
delete_command(app, TagRef, "marketing_cli.services.deletion.audience:remove_tag",
               'Delete tag {id} and remove it from all its contacts?',
               'Delete a tag: it leaves its contacts in one go, no TAG_REMOVED events (DELETE /v1/tags/:id).',
               resolve=lambda s, text: tag_ids(s, [text])[0])

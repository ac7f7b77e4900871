"""`mkt keys`: API keys of the workspace (operator only: no endpoint manages keys)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, pairs, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.services.account import keys

app = typer.Typer(help=HELP["keys"], no_args_is_help=True)


@app.command("create")
def keys_create(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Option("--name", help="A label to tell the key apart.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API key; the secret is shown once and stored only as a hash."""
    s = state(ctx)
    emit(keys.create_key(s.conn(), s.workspace_id(), name), as_json,
         lambda k: pairs({"id": k["id"], "name": k["name"], "key (shown once)": k["key"], "created": k["created_at"]}))


@app.command("list")
def keys_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
              quiet: QuietOption = False) -> None:
    """List the workspace's keys (prefixes only, never the secrets)."""
    s = state(ctx)
    emit(keys.list_keys(s.conn(), s.workspace_id()), as_json, lambda rows: table(
        ["id", "name", "prefix", "created", "revoked"],
        [(k["id"], k["name"], k["prefix"] + "…", k["created_at"], k["revoked_at"] or "") for k in rows],
    ), wide=wide, quiet=quiet)


@app.command("revoke")
def keys_revoke(
    ctx: typer.Context,
    key_id: Annotated[int, typer.Argument(metavar="ID", help="The key's id (see `mkt keys list`).")],
    as_json: JsonOption = False,
) -> None:
    """Revoke a key: requests with it get 401 at once."""
    s = state(ctx)
    emit(keys.revoke_key(s.conn(), s.workspace_id(), key_id), as_json,
         lambda k: f"Key {k['id']} ({k['prefix']}…) revoked at {k['revoked_at']}.")

"""`mkt senders`: sender identities, the From addresses on your domains (the twin of /v1/sender-identities)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["senders"], no_args_is_help=True)


def _rows(senders: list[dict[str, Any]]) -> Any:
    return table(["id", "display name", "address", "domain id", "domain verified"],
                 [(x["id"], x["display_name"], f"{x['local_part']}@{x['domain_name']}", x["domain_id"],
                   "yes" if x["domain_verified"] else "no") for x in senders])


@app.command("add")
def senders_add(
    ctx: typer.Context,
    domain_id: Annotated[str, typer.Option("--domain-id", metavar="ID", help="One of your domains (`mkt domains list`).")],
    local_part: Annotated[str, typer.Option("--local-part", metavar="L", help="The part before the @, e.g. news.")],
    display_name: Annotated[str, typer.Option("--display-name", metavar="D", help="The name shown to recipients (1-100 characters).")],
    as_json: JsonOption = False,
) -> None:
    """Add a sender identity on one of your domains (POST /v1/sender-identities)."""
    from marketing_cli.services.email import senders

    s = state(ctx)
    body = {"domain_id": domain_id, "local_part": local_part, "display_name": display_name}
    emit(senders.add_sender_identity(s.conn(), s.workspace_id(), body), as_json,
         lambda x: f"Sender identity {x['id']} added: {x['display_name']} <{x['local_part']}@{x['domain_name']}>"
                   + ("" if x["domain_verified"] else " (the domain is not verified yet)"))


@app.command("list")
def senders_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
                 quiet: QuietOption = False) -> None:
    """List the workspace's sender identities (GET /v1/sender-identities)."""
    from marketing_cli.services.email import senders

    s = state(ctx)
    emit(senders.list_sender_identities(s.conn(), s.workspace_id()), as_json, _rows, wide=wide, quiet=quiet)


@app.command("show")
def senders_show(
    ctx: typer.Context,
    sender_id: Annotated[str, typer.Argument(metavar="ID", help="The sender identity's id (`mkt senders list`).")],
    as_json: JsonOption = False,
) -> None:
    """Show one sender identity (GET /v1/sender-identities/:id)."""
    from marketing_cli.services.email import senders

    s = state(ctx)
    emit(senders.show_sender_identity(s.conn(), s.workspace_id(), sender_id), as_json, lambda x: _rows([x]))


SenderIdArgument = Annotated[str, typer.Argument(metavar='ID', help="The sender identity's id (see `mkt senders list`).")]
delete_command(app, SenderIdArgument, "marketing_cli.services.deletion.sending:remove_sender",
               'Delete sender identity {id}?',
               'Delete a sender identity (DELETE /v1/sender-identities/:id).')

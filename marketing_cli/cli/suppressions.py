"""`mkt suppressions`: the suppression list (the twin of /v1/suppressions; docs/privacy.md).

The list holds keyed hashes, never addresses: `list` shows each entry's id, kind, reason and
date, and finds the entry of an address given with --email or --phone.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["suppressions"], no_args_is_help=True)

Address = Annotated[str, typer.Argument(metavar="EMAIL|PHONE", help="An email address or a phone number.")]


@app.command("list")
def suppressions_list(
    ctx: typer.Context,
    email: Annotated[Optional[str], typer.Option("--email", help="Only the entry of this email address.")] = None,
    phone: Annotated[Optional[str], typer.Option("--phone", help="Only the entry of this phone number.")] = None,
    page: Annotated[int, typer.Option("--page", min=1, help="Page number, from 1.")] = 1,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Entries per page, 1 to 1,000.")] = 100,
    as_json: JsonOption = False,
    wide: WideOption = False,
    quiet: QuietOption = False,
) -> None:
    """List the suppression list, oldest first: id, kind, reason, date, never an address (GET /v1/suppressions)."""
    from marketing_cli.services.contacts import suppressions

    s = state(ctx)
    emit(suppressions.list_suppressions(s.conn(), s.workspace_id(), email_address=email, phone_number=phone,
                                        page=page, limit=limit), as_json,
         lambda rows: table(["id", "kind", "reason", "created"],
                            [(r["id"], r["kind"], r["reason"], r["created_at"]) for r in rows]),
         wide=wide, quiet=quiet)


@app.command("add")
def suppressions_add(ctx: typer.Context, address: Address, as_json: JsonOption = False) -> None:
    """Put a person who is not a contact on the list: creating or importing them is refused (POST /v1/suppressions)."""
    from marketing_cli.services.contacts import suppressions

    s = state(ctx)
    email, phone = suppressions.split_address(address)
    emit(suppressions.add_suppression(s.conn(), s.workspace_id(), {"email_address": email, "phone_number": phone}),
         as_json, lambda r: f"Suppression {r['id']} added ({r['kind']}; only a keyed hash of it is kept).")


@app.command("remove")
def suppressions_remove(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(metavar="ID|EMAIL|PHONE", help="The entry's id, or the address it holds.")],
    as_json: JsonOption = False,
) -> None:
    """Take an entry off the list: the person may be created or imported again (DELETE /v1/suppressions/:id)."""
    from marketing_cli.services.contacts import suppressions

    s = state(ctx)
    emit(suppressions.remove_suppression(s.conn(), s.workspace_id(), key, by_address=True), as_json,
         lambda r: f"Suppression {r['id']} removed.")

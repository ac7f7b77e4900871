"""`mkt <resource> delete ID`: the question asked first, and what went with the resource after.

On a terminal (standard input is a TTY) every delete asks first, on stderr so that `--json`'s
stdout stays the API's `data`; Enter or "n" keeps the resource (exit 1, "Nothing deleted.").
`--yes` skips the question. Without a terminal (a script, cron, a pipe) nobody can answer: a
delete without `--yes` is refused (exit 1, nothing deleted) rather than run unasked, so a
script says what it means. After a delete the command prints what went with the resource
("Tag vip removed from 1,204 contacts."), from the service's `Removal.effects`; `--json`
prints exactly DELETE's `data`, `{"id", "deleted": true}`.

`delete_command` registers the command on a resource's sub-app from its parts (the id
argument, the service's `remove_*`, the question, the help), so the nine resources' commands
are one piece of code; the service is named "module:function" and imported when the command
runs, so `mkt --help` imports no service.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from marketing_cli.cli.output import JsonOption, emit
from marketing_cli.cli.state import state
from marketing_cli.errors import MktError

DeleteYesOption = Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking (needed without a terminal).")]
NO_TERMINAL = "Deleting asks for a confirmation and there is no terminal to answer it: give --yes to delete."
KEPT = "Nothing deleted."


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def confirm(question: str, yes: bool) -> None:
    """Go on only when `--yes` was given or a person answered yes on the terminal."""
    if yes:
        return
    if not stdin_is_terminal():
        raise MktError(400, NO_TERMINAL)
    if not typer.confirm(question, default=False, err=True):
        from marketing_cli.cli.output import err_console

        err_console.print(KEPT)
        raise typer.Exit(1)


def run(question: str, yes: bool, remove: Callable[[], Any], as_json: bool) -> None:
    """Ask, call the service's `remove_*` (one call), print its data or its effects."""
    confirm(question, yes)
    removal = remove()

    def human(_: Any) -> Any:
        from rich.text import Text

        return Text("\n".join(removal.effects))

    emit(removal.data, as_json, human)


def delete_command(app: typer.Typer, argument: Any, service: str, question: str, doc: str, *,
                   resolve: Callable[[Any, str], Any] | None = None) -> None:
    """Register `delete ID` on `app`: `argument` the id's Annotated type, `service` the
    "module:function" of its `remove_*(conn, workspace_id, id)`, `question` with `{id}`, `doc`
    the command's help; `resolve(state, text)` reads the id first (a tag by name)."""
    def delete(ctx: typer.Context, resource_id: Any, yes: bool = False, as_json: bool = False) -> None:
        s = state(ctx)
        target = resolve(s, resource_id) if resolve else resource_id
        module, _, name = service.partition(":")
        remove = getattr(importlib.import_module(module), name)
        run(question.format(id=resource_id), yes, lambda: remove(s.conn(), s.workspace_id(), target), as_json)

    delete.__doc__ = doc
    delete.__annotations__ = {"ctx": typer.Context, "resource_id": argument, "yes": DeleteYesOption,
                              "as_json": JsonOption, "return": None}
    app.command("delete")(delete)

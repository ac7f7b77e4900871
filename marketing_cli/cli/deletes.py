"""`mkt <resource> delete ID`: the question asked first, and what went with the resource after.

On a terminal (standard input is a TTY) every delete asks first, on stderr so that `--json`'s
stdout stays the API's `data`; Enter or "n" keeps the resource (exit 1, "Nothing deleted.").
`--yes` skips the question. Without a terminal (a script, cron, a pipe) nobody can answer: a
delete without `--yes` is refused (exit 1, nothing deleted) rather than run unasked, so a
script says what it means. After a delete the command prints what went with the resource
("Tag vip removed from 1,204 contacts."), from the service's `Removal.effects`; `--json`
prints exactly DELETE's `data`, `{"id", "deleted": true}`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from marketing_cli.cli.output import emit
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

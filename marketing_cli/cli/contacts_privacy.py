"""`mkt contacts delete | erase | export-person`: a person's data (services/privacy/).

Deleting a contact erases it; `erase` also keeps the person on the suppression list. Both ask
first on a terminal (`--yes` skips the question; a script's stdin is no terminal and is not
asked). `register(app)` adds them to the `contacts` typer app (cli/contacts.py calls it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, emit, pairs
from marketing_cli.cli.state import state

Who = Annotated[str, typer.Argument(metavar="ID|EMAIL|PHONE",
                                    help="The contact's id, email address or phone number.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking.")]


def at_terminal() -> bool:
    return sys.stdin.isatty()


def confirm_on_terminal(question: str, yes: bool) -> None:
    """Ask `question` when a person is at the terminal (stdin is one) and --yes was not given."""
    if not yes and at_terminal():
        typer.confirm(question, abort=True, err=True)


def _erased(suppressed: bool) -> Any:
    def human(data: dict[str, Any]) -> str:
        kept = (" Its email address and phone number are on the suppression list (as keyed hashes): creating or "
                "importing the person again is refused until a new double opt-in confirmation.") if suppressed else ""
        return f"Contact {data['id']} deleted: everything held about the person is erased.{kept}"
    return human


def contacts_delete(
    ctx: typer.Context,
    contact_id: Annotated[str, typer.Argument(metavar="ID", help="The contact's id (24 hex characters).")],
    suppress: Annotated[bool, typer.Option(
        "--suppress", help="Also keep the person on the suppression list (as `contacts erase` does).")] = False,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Delete a contact, erasing everything held about it (DELETE /v1/contacts/:id)."""
    from marketing_cli.services.privacy import erase

    s = state(ctx)
    confirm_on_terminal(f"Delete contact {contact_id} and erase everything held about it? This cannot be undone.",
                        yes)
    emit(erase.delete_contact(s.conn(), s.workspace_id(), contact_id, suppress), as_json, _erased(suppress))


def contacts_erase(ctx: typer.Context, who: Who, yes: YesOption = False, as_json: JsonOption = False) -> None:
    """Erase a person (GDPR Art. 17) and keep them on the suppression list (DELETE /v1/contacts/:id?suppress=true)."""
    from marketing_cli.services.privacy import erase

    s = state(ctx)
    confirm_on_terminal(f"Erase {who}: delete the contact and everything held about the person, and refuse to "
                        "bring them back? This cannot be undone.", yes)
    emit(erase.erase_person(s.conn(), s.workspace_id(), who), as_json, _erased(True))


def contacts_export_person(
    ctx: typer.Context,
    who: Who,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE.json", help="Also write the document to this file.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Everything held about a person as one JSON document (GET /v1/contacts/:id/personal-data); --json prints it."""
    from marketing_cli.services.privacy import personal_data
    from marketing_cli.storage.encoding import dumps

    s = state(ctx)
    document = personal_data.export_person(s.conn(), s.workspace_id(), who)
    if output:
        Path(output).write_text(dumps(document, pretty=True) + "\n", encoding="utf-8")

    def human(doc: dict[str, Any]) -> Any:
        counts = {name: f"{len(rows):,}" for name, rows in doc.items() if isinstance(rows, list)}
        where = f"written to {output}" if output else "--json prints it whole"
        return pairs({"contact": doc["contact"]["id"], **counts, "document": where}, title="Personal data")

    emit(document, as_json, human)


def register(app: typer.Typer) -> None:
    """Add delete, erase and export-person to the contacts app."""
    app.command("delete")(contacts_delete)
    app.command("erase")(contacts_erase)
    app.command("export-person")(contacts_export_person)

"""`mkt sms replies` (the twin of GET /v1/sms-replies) and `mkt sms revocation-phrases
show|check|test`: the replies kept and what they did, and the revocation rules in effect
(services/sms/replies.py, revocation.py; docs/sms.md "Replies and revocation").
`register(app)` adds both to the `sms` typer app (cli/sms.py calls it). The rules are the
operator's, as the quiet-hours table is: no endpoint changes them.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli.output import JsonOption, emit, table
from marketing_cli.cli.state import state

phrases_app = typer.Typer(help="The SMS revocation rules: which replies revoke consent to texts (operator only).",
                          no_args_is_help=True)


def _render_replies(r: dict[str, Any]) -> Any:
    p = r["pagination"]
    return table(["id", "received", "phone", "reply", "action", "rule", "changed", "confirmation"],
                 [(x["id"], x["received_at"], x["phone"], x["body"], x["action"], x["rule"] or "",
                   x["contacts_changed"], (x["confirmation"] or {}).get("status") or "") for x in r["replies"]],
                 title=f"Page {p['current_page']} of {p['total_pages']} ({p['total_count']:,} replies)")


def sms_replies(
    ctx: typer.Context,
    action: Annotated[str | None, typer.Option(help="revoked, resubscribed or none (the replies the rules did "
                                                    "not act on).")] = None,
    page: Annotated[int, typer.Option(help="Page number, from 1.")] = 1,
    limit: Annotated[int, typer.Option(help="Replies per page (1-100).")] = 50,
    as_json: JsonOption = False,
) -> None:
    """The SMS replies received, newest first, with what each did (GET /v1/sms-replies)."""
    from marketing_cli.services.sms import replies

    s = state(ctx)
    emit(replies.list_replies(s.conn(), s.workspace_id(), action=action, page=page, limit=limit), as_json,
         _render_replies)


@phrases_app.command("show")
def phrases_show(
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the table in effect as CSV (a copy to edit).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Show the revocation rules in effect (keywords, phrases, confirmations) with the source of each."""
    from marketing_cli.services.sms import revocation

    if as_csv:
        typer.echo(revocation.table_text(), nl=False)
        return
    emit(revocation.show_table(), as_json, lambda r: table(
        ["kind", "language", "text", "source"], [(x["kind"], x["language"], x["text"], x["source"]) for x in r["rows"]],
        title=f"Table: {r['table']}"))


@phrases_app.command("check")
def phrases_check(
    path: Annotated[str, typer.Argument(help="A revocation CSV to check before pointing MKT_SMS_REVOCATION_PHRASES "
                                             "at it.")],
    as_json: JsonOption = False,
) -> None:
    """Check a revocation table file (exit 1 with the first bad line)."""
    from marketing_cli.services.sms import revocation

    emit(revocation.check_file(path), as_json,
         lambda r: f"{path}: {r['rows']} rows ({', '.join(f'{n} {k}' for k, n in r['kinds'].items() if n)}) in "
                   f"{', '.join(r['languages'])}")


@phrases_app.command("test")
def phrases_test(
    text: Annotated[str, typer.Argument(help="A reply, as a person would text it.")],
    as_json: JsonOption = False,
) -> None:
    """Show what the rules in effect would do with a reply (nothing is changed)."""
    from marketing_cli.services.sms import revocation

    reading = revocation.read_reply(text, revocation.current_table())
    emit({"action": reading.action, "rule": reading.rule, "language": reading.language}, as_json,
         lambda r: f"{r['action']}" + (f" ({r['rule']})" if r["rule"] else ""))


def register(app: typer.Typer) -> None:
    """Add `replies` and the `revocation-phrases` group to the sms app."""
    app.command("replies")(sms_replies)
    app.add_typer(phrases_app, name="revocation-phrases")

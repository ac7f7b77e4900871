"""`mkt consents export`: the workspace's consent ledger over a time range, as CSV for an
auditor (the twin of GET /v1/consents, which answers the same rows as JSON pages).

The rows and the CSV are services/contacts/consent_export.py's; this command picks where
they go (stdout, or a file written whole: `FILE.part` renamed when complete).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from marketing_cli.cli.output import JsonOption, emit
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.errors import MktError

app = typer.Typer(help=HELP["consents"], no_args_is_help=True)


@app.command("export")
def consents_export(
    ctx: typer.Context,
    since: Annotated[str, typer.Option(
        "--since", metavar="DATE", help="From this date (YYYY-MM-DD, UTC) or RFC 3339 time, inclusive.")],
    until: Annotated[Optional[str], typer.Option(
        "--until", metavar="DATE", help="Up to this date or time, exclusive (default: now).")] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write the CSV here instead of stdout.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Export the consent ledger between two dates as CSV (GET /v1/consents); --json prints the rows."""
    from marketing_cli.services.contacts import consent_export

    s = state(ctx)
    conn, workspace_id = s.conn(), s.workspace_id()
    if as_json and output is None:
        emit(consent_export.list_all_consents(conn, workspace_id, since=since, until=until), True)
        return
    chunks = consent_export.export_consents_csv(conn, workspace_id, since=since, until=until)  # checked here
    if output is None:
        for chunk in chunks:
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return
    partial = output + ".part"
    try:
        out = open(partial, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise MktError(400, f"Cannot write {output}: {exc.strerror or exc}.") from None
    try:
        with out:
            for chunk in chunks:
                out.write(chunk)
    except BaseException:
        os.remove(partial)
        raise
    os.replace(partial, output)
    emit({"exported": chunks.rows, "output": output}, as_json,
         lambda r: f"Exported {r['exported']:,} consent rows to {r['output']}.")

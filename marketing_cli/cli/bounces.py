"""`mkt bounces`: record a bounce or complaint, or import DSN / ARF report files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from marketing_cli.cli import output
from marketing_cli.cli.output import JsonOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["bounces"], no_args_is_help=True)


@app.command("add")
def bounces_add(
    ctx: typer.Context,
    email: Annotated[str, typer.Argument(metavar="EMAIL", help="The address that bounced or complained.")],
    kind: Annotated[str, typer.Option("--type", metavar="hard|soft|complaint", help="What happened.")] = "hard",
    campaign_id: Annotated[Optional[str], typer.Option(
        "--campaign", metavar="ID", help="The campaign it belongs to (default: the last one sent to the address).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Record one bounce or complaint (POST /v1/bounces)."""
    from marketing_cli.services.delivery import bounces

    body = {"email_address": email, "type": kind, **({"campaign_id": campaign_id} if campaign_id else {})}
    s = state(ctx)
    emit(bounces.record_bounce(s.conn(), s.workspace_id(), body), as_json,
         lambda r: f"{email}: {r['type']} recorded; contact status {r['contact_status']}"
                   + (f" (campaign {r['campaign_id']})." if r["campaign_id"] else "."))


@app.command("import")
def bounces_import(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(metavar="FILE.eml...", help="RFC 3464 DSNs and RFC 5965 abuse reports.")],
    as_json: JsonOption = False,
) -> None:
    """Read bounce (DSN) and complaint (ARF) reports and apply them; a bad file fails alone (exit 1)."""
    from marketing_cli.services.delivery import bounces

    s = state(ctx)
    result = bounces.import_report_files(s.conn(), s.workspace_id(), files)

    def human(r: dict) -> object:
        rows = [(f["file"], e.get("email_address") or "-", e.get("type", "-"), e.get("bounce_class") or "-",
                 e.get("contact_status", e.get("reason", "")) if e.get("applied") else e.get("reason", ""))
                for f in r["files"] for e in (f["entries"] or [{"reason": _file_result(f)}])]
        title = f"{r['applied']} applied: {r['hard']} hard, {r['soft']} soft, {r['complaints']} complaints"
        return table(["file", "address", "type", "class", "result"], rows,
                     title=title + (f"; {r['failed']} of {len(r['files'])} files failed" if r.get("failed") else ""))

    emit(result, as_json, human)
    failed = [f for f in result["files"] if f.get("failed")]
    for f in failed:
        output.err_console.print(f"{f['file']}: {f['error']}", markup=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)


def _file_result(file: dict) -> str:
    return f"failed: {file['error']}" if file.get("failed") else file["error"]

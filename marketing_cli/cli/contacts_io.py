"""`mkt contacts import` / `mkt contacts export`: bulk CSV in, CSV or JSON Lines out.

The work is in services/contacts/bulk.py; these commands open files, draw the progress bar
(on stderr, only when it is a terminal and never with --json) and print the summary.
`register(app)` adds them to the `contacts` typer app (cli/contacts.py calls it).
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, emit, err_console, pairs, table
from marketing_cli.cli.references import tag_ids
from marketing_cli.cli.state import state
from marketing_cli.errors import MktError

SHOWN_ERRORS = 20
# (create, upsert and import: cli/contacts.py takes it from here)
ConsentTextOption = Annotated[Optional[str], typer.Option(
    "--consent-text", metavar="TEXT",
    help="The wording the person agreed to (at most 1,000 characters), kept in the consent ledger.")]


def _parse_map(items: list[str]) -> dict[str, str]:
    from marketing_cli.services.contacts.bulk import parse_column_map

    try:
        return parse_column_map(items)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--map") from None


def _progress(label: str, total: int | None) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns: list[Any] = [TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    return Progress(*columns, console=err_console, transient=True)


def contacts_import(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE.csv", help="CSV file with a header row; '-' reads stdin.")],
    map_: Annotated[Optional[list[str]], typer.Option(
        "--map", metavar="'Column=merge_tag'",
        help="Map a column to a merge tag (repeatable); 'Column=' skips the column.")] = None,
    ignore_unknown: Annotated[bool, typer.Option(
        "--ignore-unknown", help="Skip columns that match no field instead of stopping.")] = False,
    tag: Annotated[Optional[list[str]], typer.Option(
        "--tag", metavar="TAG", help="Tag every imported contact with this tag, by name or id (repeatable).")] = None,
    status: Annotated[str, typer.Option(
        "--status", help="Status of new contacts whose row has none.")] = "SUBSCRIBED",
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Validate and look up every row, report what would happen, write nothing.")] = False,
    errors: Annotated[Optional[str], typer.Option(
        "--errors", metavar="FILE.csv", help="Write the rejected rows here, with their line and reason.")] = None,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", help="Rows per write transaction, 1 to 20,000.")] = 20_000,
    delimiter: Annotated[Optional[str], typer.Option(
        "--delimiter", metavar="comma|semicolon|tab|pipe",
        help="The column delimiter (default: read from the header line).")] = None,
    encoding: Annotated[Optional[str], typer.Option(
        "--encoding", metavar="NAME",
        help="The file's text encoding, e.g. cp1252 or latin-1 (default: UTF-8, or detected when it is not).")] = None,
    date_format: Annotated[Optional[str], typer.Option(
        "--date-format", metavar="FORMAT", help="How DATE cells are written, e.g. %d.%m.%Y (strptime).")] = None,
    day_first: Annotated[Optional[bool], typer.Option(
        "--day-first/--month-first", show_default=False,
        help="Read ambiguous dates such as 05/06/1987 day first or month first.")] = None,
    bad_cells: Annotated[str, typer.Option(
        "--bad-cells", metavar="leave-out|reject-row",
        help="A cell that does not fit its column (a number, a date, a phone number beside an email address): "
             "leave-out imports the contact without it and reports it; reject-row rejects the row.")] = "leave-out",
    consent_text: ConsentTextOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import contacts from a CSV file: upsert by email in batches, reporting bad rows by line."""
    from marketing_cli.services.contacts import bulk as contacts_io

    mapping = _parse_map(map_ or [])
    batch_size = contacts_io.check_batch_size(batch_size)  # before the file is read, as over HTTP
    delimiter = contacts_io.check_delimiter(delimiter)
    contacts_io.check_date_options(date_format, day_first)
    bad_cells = contacts_io.check_bad_cells(bad_cells)
    s = state(ctx)
    conn, workspace_id = s.conn(), s.workspace_id()
    tags = tag_ids(s, tag) or []
    with ExitStack() as stack:
        # One check for both faces (kernel/text_files.py): the whole file is UTF-8 (or in the
        # encoding given or detected), or nothing is imported and the error names the line and
        # byte offset.
        decoding = None
        if file == "-":
            buffer = getattr(sys.stdin, "buffer", None)
            if buffer is None:
                source: Any = sys.stdin
            else:
                source, decoding = contacts_io.spool_text(buffer, encoding)
                stack.enter_context(source)
        else:
            source, decoding = contacts_io.open_text(file, encoding)
            stack.enter_context(source)
        total = None
        errors_out = None
        if errors:
            try:
                errors_out = stack.enter_context(open(errors, "w", encoding="utf-8", newline=""))
            except OSError as exc:
                raise MktError(400, f"Cannot write {errors}: {exc.strerror or exc}.") from None
        progress = None
        if not as_json and err_console.is_terminal:
            if file != "-":
                total = max(0, contacts_io.count_lines(file) - 1)
            bar = stack.enter_context(_progress("Dry run" if dry_run else "Importing", total))
            task = bar.add_task("rows", total=total)

            def progress(rows: int) -> None:
                bar.update(task, completed=rows)

        try:
            result = contacts_io.import_contacts(
                conn, workspace_id, source, mapping=mapping, ignore_unknown=ignore_unknown, tag_ids=tags,
                default_status=status, dry_run=dry_run, batch_size=batch_size, errors_out=errors_out,
                progress=progress, delimiter=delimiter, decoding=decoding, date_format=date_format,
                day_first=day_first, bad_cells=bad_cells, consent_text=consent_text,
                file_name=None if file == "-" else Path(file).name, parse_in_worker=True,
            )
        except KeyboardInterrupt as stop:
            stack.close()  # the progress bar ends before the message
            err_console.print(interrupted_message(stop), markup=False, soft_wrap=True)
            raise typer.Exit(130) from None
    emit(result, as_json, lambda r: _import_report(r, errors))


def interrupted_message(stop: BaseException) -> str:
    """What Ctrl-C during an import kept, and that running it again is safe."""
    from marketing_cli.services.contacts.importer import ImportInterrupted

    if not isinstance(stop, ImportInterrupted):
        return "Import interrupted before any row was written: nothing was imported."
    if stop.dry_run:
        return "Dry run interrupted: nothing was written."
    if stop.rows == 0:
        return ("Import interrupted: nothing was imported (the batch being written was rolled back). "
                "Run the same command again to import the file.")
    return (f"Import interrupted: the first {stop.rows:,} rows of the file were imported and are kept "
            f"({stop.created:,} contacts created, {stop.updated:,} updated); the batch being written was "
            "rolled back. Running the same command again is safe: rows already imported are updated in "
            "place, not duplicated.")


def _import_report(result: dict[str, Any], errors_path: str | None) -> Any:
    from rich.console import Group
    from rich.text import Text

    title = "Dry run: nothing was written." if result["dry_run"] else "Import finished."
    verb = "would be " if result["dry_run"] else ""
    parts: list[Any] = [Text(title, style="bold"), pairs({
        "rows read": result["rows"],
        f"{verb}created": result["created"],
        f"{verb}updated": result["updated"],
        "rejected": result["skipped"],
        "cells left out": result["cells_left_out"],
        "delimiter": result["delimiter"],
        "encoding": result["encoding"] + (" (detected)" if result["encoding_detected"] else ""),
        **({f"tags {verb}created": ", ".join(result["tags_created"])} if result["tags_created"] else {}),
    })]
    if result["rejections"]:
        parts.append(Text("Rejected rows by reason:", style="bold"))
        parts.extend(Text(f"  {r['count']:,} {r['reason']}") for r in result["rejections"])
    shown = result["errors"][:SHOWN_ERRORS]
    if shown:
        parts.append(table(["line", "reason"], [(e["line"], e["reason"]) for e in shown], title="Rejected rows"))
        more = result["skipped"] - len(shown)
        if more > 0:
            hint = f" (all of them are in {errors_path})" if errors_path else " (--errors FILE.csv writes them all)"
            parts.append(Text(f"... and {more:,} more rejected rows{hint}."))
    left_out = result["left_out"][:SHOWN_ERRORS]
    if left_out:
        by_column = ", ".join(f"{c['column']} {c['count']:,}" for c in result["left_out_by_column"])
        parts.append(table(["line", "column", "reason"], [(c["line"], c["column"], c["reason"]) for c in left_out],
                           title=f"Cells left out, the rest of their rows imported ({by_column}; "
                                 "--bad-cells reject-row rejects such rows)"))
        more = result["cells_left_out"] - len(left_out)
        if more > 0:
            parts.append(Text(f"... and {more:,} more cells left out (--json lists the first {len(result['left_out']):,})."))
    warnings = result.get("warnings", [])[:SHOWN_ERRORS]
    if warnings:
        parts.append(table(["line", "warning"], [(w["line"], w["reason"]) for w in warnings],
                           title="Rows with a warning"))
        if result["warned"] > len(warnings):
            parts.append(Text(f"... and {result['warned'] - len(warnings)} more rows with a warning."))
    return Group(*parts)


def contacts_export(
    ctx: typer.Context,
    fmt: Annotated[str, typer.Option("--format", help="csv or jsonl.")] = "csv",
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write here instead of stdout.")] = None,
    fields: Annotated[Optional[str], typer.Option(
        "--fields", metavar="TAG,TAG", help="Only these merge tags (comma-separated), in this order.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Export every contact of the workspace as CSV or JSON Lines (streamed, any size)."""
    from marketing_cli.services.contacts import bulk as contacts_io

    chosen = [t.strip() for t in fields.split(",") if t.strip()] if fields else None
    s = state(ctx)
    conn, workspace_id = s.conn(), s.workspace_id()
    if output is None:
        # The export is the output: stdout carries nothing else (with or without --json).
        out = sys.stdout
        contacts_io.export_contacts(conn, workspace_id, out, fmt=fmt, fields=chosen)
        out.flush()
        return
    partial = output + ".part"  # renamed over FILE only when the export is complete
    with ExitStack() as stack:
        try:
            out = stack.enter_context(open(partial, "w", encoding="utf-8", newline=""))
        except OSError as exc:
            raise MktError(400, f"Cannot write {output}: {exc.strerror or exc}.") from None
        progress = None
        if not as_json and err_console.is_terminal:
            from marketing_cli.services.account import billing

            total = billing.usage(conn, workspace_id, "contacts")
            bar = stack.enter_context(_progress("Exporting", total))
            task = bar.add_task("contacts", total=total)

            def progress(n: int) -> None:
                bar.update(task, completed=n)

        try:
            result = contacts_io.export_contacts(conn, workspace_id, out, fmt=fmt, fields=chosen, progress=progress)
        except BaseException:
            stack.close()
            os.remove(partial)
            raise
    os.replace(partial, output)
    result["output"] = output
    emit(result, as_json, lambda r: f"Exported {r['exported']} contacts to {output} ({r['format']}).")


def register(app: typer.Typer) -> None:
    """Add import and export to the contacts app."""
    app.command("import")(contacts_import)
    app.command("export")(contacts_export)

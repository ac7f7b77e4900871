"""`mkt segments`: dynamic groups of contacts (the twin of /v1/segments)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, json_option, pairs, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.errors import MktError

app = typer.Typer(help=HELP["segments"], no_args_is_help=True)

SegmentId = Annotated[str, typer.Argument(metavar="ID", help="The segment's id (see `mkt segments list`).")]


def describe_filter(f: dict[str, Any]) -> str:
    if f.get("type") == "field":
        return f"field {f.get('field_id')} {f.get('operator')} {json.dumps(f.get('value'))}"
    return f"{f.get('type')} {f.get('operator')} {json.dumps(f.get('value'))}"


def counted_cell(s: dict[str, Any]) -> str:
    """When the count was taken, in UTC and the terminal's zone; `counting…` while a first
    count is on its way, `(recounting)` under an older one."""
    from marketing_cli.cli.times import when_cell

    if s.get("counted_at") is None:
        return "counting…" if s.get("counting") else "not counted yet"
    return when_cell(s["counted_at"]) + ("\n(recounting)" if s.get("counting") else "")


def render_segment(s: dict[str, Any]) -> Any:
    from marketing_cli.cli.times import when_line

    joiner = f" {s['filters']['condition']} "
    counted = ("counting…" if s.get("counting") else "not counted yet") if s.get("counted_at") is None else \
        when_line(s["counted_at"]) + (" (recounting)" if s.get("counting") else "")
    return pairs({
        "id": s["id"],
        "name": s["name"],
        "filters": joiner.join(f"({describe_filter(f)})" for f in s["filters"]["filters"]),
        "contacts": s["contact_count"],
        "counted at": counted,
        "created": s["created_at"],
        "updated": s["updated_at"],
    }, title="Segment")


def _filters(filters: str | None, filters_file: Path | None) -> Any:
    if (filters is None) == (filters_file is None):
        raise MktError(400, "Give the filters with exactly one of --filters JSON or --filters-file PATH.")
    return json_option(filters if filters is not None else f"@{filters_file}", "--filters", member="filters")


@app.command("create")
def segments_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Segment name (1-64 characters).")],
    filters: Annotated[Optional[str], typer.Option(
        "--filters", metavar="JSON",
        help='The filters object as JSON: {"condition": "AND", "filters": [...]} (docs/api.md lists the shapes).'
    )] = None,
    filters_file: Annotated[Optional[Path], typer.Option("--filters-file", metavar="PATH",
                                                         help="Read the filters object from this JSON file.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a segment (POST /v1/segments); its member count is queued."""
    from marketing_cli.services.contacts import segments

    s = state(ctx)
    body = {"name": name, "filters": _filters(filters, filters_file)}
    emit(segments.create_segment(s.conn(), s.workspace_id(), body), as_json, render_segment)


@app.command("update")
def segments_update(
    ctx: typer.Context,
    segment_id: SegmentId,
    name: Annotated[Optional[str], typer.Option("--name", help="A new name (1-64 characters).")] = None,
    filters: Annotated[Optional[str], typer.Option(
        "--filters", metavar="JSON", help="New filters as JSON, checked as on create (the old ones are replaced)."
    )] = None,
    filters_file: Annotated[Optional[Path], typer.Option("--filters-file", metavar="PATH",
                                                         help="Read the new filters object from this JSON file.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Rename a segment or change its filters (PATCH /v1/segments/:id); new filters queue a recount."""
    from marketing_cli.services.contacts import segments

    body: dict[str, Any] = {}
    if name is not None:
        body["name"] = name
    if filters is not None or filters_file is not None:
        body["filters"] = _filters(filters, filters_file)
    if not body:
        raise MktError(400, "Give what to change: --name, --filters or --filters-file.")
    s = state(ctx)
    emit(segments.update_segment(s.conn(), s.workspace_id(), segment_id, body), as_json, render_segment)


@app.command("list")
def segments_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
                  quiet: QuietOption = False) -> None:
    """List the workspace's segments (GET /v1/segments)."""
    from marketing_cli.services.contacts import segments

    s = state(ctx)
    emit(segments.list_segments(s.conn(), s.workspace_id()), as_json, lambda rows: table(
        ["id", "name", "filters", "contacts", "counted at", "created"],
        [(r["id"], r["name"], f"{len(r['filters']['filters'])} ({r['filters']['condition']})",
          r["contact_count"], counted_cell(r), r["created_at"]) for r in rows]), wide=wide, quiet=quiet)


@app.command("show")
def segments_show(ctx: typer.Context, segment_id: SegmentId, as_json: JsonOption = False) -> None:
    """Show one segment (GET /v1/segments/:id)."""
    from marketing_cli.services.contacts import segments

    s = state(ctx)
    emit(segments.get_segment(s.conn(), s.workspace_id(), segment_id), as_json, render_segment)


@app.command("members")
def segments_members(
    ctx: typer.Context,
    segment_id: SegmentId,
    page: Annotated[int, typer.Option(help="Page number, from 1.")] = 1,
    limit: Annotated[int, typer.Option(help="Contacts per page (1-250).")] = 50,
    as_json: JsonOption = False,
) -> None:
    """List the contacts that match the segment now (GET /v1/segments/:id/members)."""
    from marketing_cli.services.contacts import segments

    s = state(ctx)
    result = segments.segment_members(s.conn(), s.workspace_id(), segment_id, page=page, limit=limit)
    p = result["pagination"]
    emit(result, as_json, lambda r: table(
        ["id", "email", "phone", "status", "tags", "created"],
        [(c["id"], c["data"].get("email_address"), c["data"].get("phone_number"), c["status"],
          ", ".join(t["name"] for t in c["tags"]), c["created_at"]) for c in r["contacts"]],
        title=f"Page {p['page']} ({p['limit']} per page) of {p['total']} member(s)"))


@app.command("refresh")
def segments_refresh(ctx: typer.Context, segment_id: SegmentId, as_json: JsonOption = False) -> None:
    """Queue a recount of the segment's members (POST /v1/segments/:id/refresh)."""
    from marketing_cli.services.contacts import segments

    s = state(ctx)
    emit(segments.refresh_segment(s.conn(), s.workspace_id(), segment_id), as_json,
         lambda r: f"Recount of segment {r['segment_id']} queued as job {r['job_id']}; "
                   "`mkt jobs run` (or `mkt serve`) runs it.")


delete_command(app, SegmentId, "marketing_cli.services.deletion.audience:remove_segment",
               'Delete segment {id}?',
               'Delete a segment; no contact changes (DELETE /v1/segments/:id).')

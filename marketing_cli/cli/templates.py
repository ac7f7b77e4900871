"""`mkt templates`: import, list and show email templates (the twin of /v1/templates)."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, json_option, pairs, table, usage_error
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["templates"], no_args_is_help=True)

TemplateId = Annotated[str, typer.Argument(metavar="ID", help="The template's id (see `mkt templates list`).")]


def _read_file(path: str, option: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise usage_error(f"{option}: cannot read {path}: {exc.strerror}.") from None


def _body(name: str, editor: bool, body_json: str | None, html: str | None, zip_file: str | None,
          url: str | None) -> dict[str, Any]:
    chosen = [o for o, v in (("--editor", editor), ("--html", html), ("--zip", zip_file), ("--url", url)) if v]
    if len(chosen) != 1:
        raise usage_error("Give exactly one of --editor, --html FILE, --zip FILE or --url URL.")
    if body_json is not None and not editor:
        raise usage_error("--body-json goes with --editor.")
    if editor:
        body: dict[str, Any] = {"name": name, "type": "editor"}
        document = json_option(body_json, "--body-json", expect=dict)
        if document is not None:
            body["body_json"] = document
        return body
    if url:
        return {"name": name, "type": "code", "import_format": "url", "url": url}
    import base64

    fmt, path, option = ("html", html, "--html") if html else ("zip", zip_file, "--zip")
    assert path is not None
    content = base64.b64encode(_read_file(path, option)).decode("ascii")
    return {"name": name, "type": "code", "import_format": fmt, "content_base64": content}


def render_template(t: dict[str, Any]) -> Any:
    rows = {
        "id": t["id"],
        "name": t["name"],
        "type": t["type"],
        "import format": t["import_format"],
        "entry file": t["entry_file"],
        "source url": t["source_url"],
        "size": f"{t['size']:,} bytes",
        "files": ", ".join(f"{a['path']} ({a['size']:,} B)" for a in t["assets"]) or None,
        "created": t["created_at"],
        "updated": t["updated_at"],
    }
    return pairs({k: v for k, v in rows.items() if v is not None}, title="Template")


@app.command("create")
def templates_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="The template's name (1-255 characters).")],
    editor: Annotated[bool, typer.Option("--editor", help="An editor template (an empty document by default).")] = False,
    body_json: Annotated[Optional[str], typer.Option(
        "--body-json", help="With --editor: the editor document as JSON (inline, - or @FILE).")] = None,
    html: Annotated[Optional[str], typer.Option("--html", metavar="FILE", help="A coded template from an HTML file (- for stdin).")] = None,
    zip_file: Annotated[Optional[str], typer.Option("--zip", metavar="FILE", help="A coded template from a ZIP archive (- for stdin).")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="A coded template fetched from an http(s) URL.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a template: an editor document, or HTML from a file, a ZIP archive or a URL (POST /v1/templates)."""
    from marketing_cli.services.email import templates

    body = _body(name, editor, body_json, html, zip_file, url)
    s = state(ctx)
    emit(templates.create_template(s.conn(), s.workspace_id(), body), as_json, render_template)


@app.command("list")
def templates_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
                   quiet: QuietOption = False) -> None:
    """List the workspace's templates, without their content (GET /v1/templates)."""
    from marketing_cli.services.email import templates

    s = state(ctx)
    emit(templates.list_templates(s.conn(), s.workspace_id()), as_json,
         lambda rows: table(["id", "name", "type", "format", "size", "files", "created"],
                            [(t["id"], t["name"], t["type"], t["import_format"] or "", f"{t['size']:,}",
                              t["asset_count"], t["created_at"]) for t in rows]), wide=wide, quiet=quiet)


@app.command("show")
def templates_show(
    ctx: typer.Context,
    template_id: TemplateId,
    html: Annotated[bool, typer.Option("--html", help="Print only the template's HTML, as uploaded.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Show one template (GET /v1/templates/:id); --html prints its HTML."""
    from marketing_cli.services.email import templates

    if html and as_json:
        raise usage_error("--html and --json cannot be used together.")
    s = state(ctx)
    if html:
        sys.stdout.write(templates.template_html(s.conn(), s.workspace_id(), template_id))
        return
    emit(templates.get_template(s.conn(), s.workspace_id(), template_id), as_json, render_template)


@app.command("asset")
def templates_asset(
    ctx: typer.Context,
    template_id: TemplateId,
    path: Annotated[str, typer.Argument(help="The file's path, as `mkt templates show ID` lists it.")],
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write the file here instead of to stdout.")] = None,
) -> None:
    """Write one file kept from a template's ZIP archive (GET /v1/templates/:id/assets/:path)."""
    from marketing_cli.services.email import templates

    s = state(ctx)
    _, data = templates.template_asset(s.conn(), s.workspace_id(), template_id, path)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        with open(output, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise usage_error(f"--output: cannot write {output}: {exc.strerror}.") from None


delete_command(app, TemplateId, "marketing_cli.services.deletion.sending:remove_template",
               'Delete template {id}?',
               'Delete a template; campaigns and flows made from it keep their copy (DELETE /v1/templates/:id).')

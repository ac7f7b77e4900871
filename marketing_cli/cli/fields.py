"""`mkt fields`: custom contact fields (the twin of /v1/fields)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, pairs, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["fields"], no_args_is_help=True)


TypeOption = Annotated[Optional[str], typer.Option(
    "--type", help="TEXT, NUMBER, BOOLEAN, DATE, DROPDOWN_SINGLE, DROPDOWN_MULTIPLE or COUNTRY.")]
DefinitionOption = Annotated[Optional[str], typer.Option(
    "--definition", help="Dropdown options, comma-separated (at least 2 unique).")]
DefaultOption = Annotated[Optional[str], typer.Option(
    "--default-value", help="Value used when a contact has none ('' clears it).")]
RegionOption = Annotated[Optional[str], typer.Option(
    "--default-region", metavar="CC",
    help="ISO country code for phone numbers without + (phone_number field); 'none' clears it.")]


def _region(value: Optional[str]) -> Optional[str]:
    return None if value is None or value.strip().lower() in ("", "none", "null") else value


def render_field(f: dict[str, Any]) -> Any:
    return pairs({
        "id": f["id"], "label": f["label"], "merge tag": f["merge_tag"], "type": f["type"],
        "definition": f["definition"], "default value": f["default_value"], "order": f["order"],
        "required": f["required"], "immutable": f["immutable"], "default region": f["default_region"],
    }, title="Field")


@app.command("list")
def fields_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
                quiet: QuietOption = False) -> None:
    """List the workspace's fields in display order (GET /v1/fields)."""
    from marketing_cli.services.contacts import fields

    s = state(ctx)
    emit(fields.list_fields(s.conn(), s.workspace_id()), as_json, lambda rows: table(
        ["id", "label", "merge tag", "type", "definition", "default", "required", "immutable", "region"],
        [(f["id"], f["label"], f["merge_tag"], f["type"], f["definition"], f["default_value"],
          "yes" if f["required"] else "", "yes" if f["immutable"] else "", f["default_region"]) for f in rows]),
         wide=wide, quiet=quiet)


@app.command("create")
def fields_create(
    ctx: typer.Context,
    label: Annotated[str, typer.Option("--label", help="1-32 characters, unique.")],
    merge_tag: Annotated[str, typer.Option("--merge-tag", help="2-16 lowercase letters and underscores, unique.")],
    type_: TypeOption = None,
    definition: DefinitionOption = None,
    default_value: DefaultOption = None,
    required: Annotated[bool, typer.Option("--required", help="Every contact must have a value.")] = False,
    default_region: RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a custom field (POST /v1/fields)."""
    from marketing_cli.services.contacts import fields

    s = state(ctx)
    body: dict[str, Any] = {"label": label, "merge_tag": merge_tag, "type": type_, "required": required}
    if definition is not None:
        body["definition"] = definition
    if default_value is not None:
        body["default_value"] = default_value
    if default_region is not None:
        body["default_region"] = _region(default_region)
    emit(fields.create_field(s.conn(), s.workspace_id(), body), as_json, render_field)


@app.command("update")
def fields_update(
    ctx: typer.Context,
    field_id: Annotated[int, typer.Argument(metavar="ID", help="The field's id (see `mkt fields list`).")],
    label: Annotated[Optional[str], typer.Option("--label", help="New label (1-32 characters).")] = None,
    merge_tag: Annotated[Optional[str], typer.Option("--merge-tag", help="New merge tag.")] = None,
    type_: TypeOption = None,
    definition: DefinitionOption = None,
    default_value: DefaultOption = None,
    required: Annotated[Optional[bool], typer.Option("--required/--not-required",
                                                     help="Whether every contact must have a value.")] = None,
    default_region: RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Update a field (PATCH /v1/fields/:id); options left out keep their values."""
    from marketing_cli.services.contacts import fields

    s = state(ctx)
    conn, workspace_id = s.conn(), s.workspace_id()
    current = fields.get_field(conn, workspace_id, field_id)
    body: dict[str, Any] = {"label": current["label"], "merge_tag": current["merge_tag"], "type": current["type"],
                            "definition": current["definition"]}
    for key, value in (("label", label), ("merge_tag", merge_tag), ("type", type_), ("definition", definition),
                       ("default_value", default_value), ("required", required)):
        if value is not None:
            body[key] = value
    if default_region is not None:
        body["default_region"] = _region(default_region)
    emit(fields.update_field(conn, workspace_id, field_id, body), as_json, render_field)


FieldId = Annotated[str, typer.Argument(metavar='ID', help="The field's id (see `mkt fields list`).")]
delete_command(app, FieldId, "marketing_cli.services.deletion.audience:remove_field",
               'Delete field {id} and its value on every contact?',
               'Delete a custom field, its values on every contact and its index (DELETE /v1/fields/:id).')

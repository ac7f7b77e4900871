"""`mkt contacts search`: the CLI twin of POST /v1/contacts/search (`register(app)` adds it to `contacts`)."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, emit, json_option, table
from marketing_cli.cli.references import tag_ids
from marketing_cli.cli.state import state

WHERE_HELP = ("A field filter 'merge_tag OPERATOR value' (repeatable), e.g. 'age GREATER_THAN 30',"
              " 'city EQUALS New York', 'email_address CONTAINS @example.com', 'vip EXISTS false'."
              " A value starting with [ is read as a JSON array.")


def parse_where(text: str) -> dict[str, Any]:
    """'merge_tag OPERATOR [value]' to a filter object; the value stays text unless it is a JSON array
    (or true/false after EXISTS): the service reads text with the field's type."""
    parts = text.strip().split(None, 2)
    if len(parts) < 2:
        raise typer.BadParameter(f"expected 'merge_tag OPERATOR [value]', got {text!r}.", param_hint="--where")
    item: dict[str, Any] = {"merge_tag": parts[0], "operator": parts[1].upper()}
    if len(parts) == 3:
        value: Any = parts[2]
        if value.startswith("["):
            value = json_option(value, "--where", member="fields", expect=list)
        elif item["operator"] == "EXISTS" and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        item["value"] = value
    return item


def _human(result: dict[str, Any]) -> Any:
    page = result["pagination"]
    first = (page["page"] - 1) * page["limit"] + 1
    shown = len(result["contacts"])
    title = (f"Contacts {first}-{first + shown - 1} of {page['total']} (page {page['page']})" if shown
             else f"No contacts on page {page['page']} ({page['total']} match)")
    return table(
        ["id", "email", "status", "tags", "created", "updated"],
        [(c["id"], (c.get("data") or {}).get("email_address"), c["status"],
          ", ".join(t["name"] for t in c.get("tags") or []), c["created_at"], c["updated_at"])
         for c in result["contacts"]],
        title=title,
    )


def contacts_search(
    ctx: typer.Context,
    where: Annotated[Optional[list[str]], typer.Option("--where", "-w", metavar="'TAG OP VALUE'",
                                                       help=WHERE_HELP)] = None,
    field_filter: Annotated[Optional[list[str]], typer.Option(
        "--field-filter", metavar="JSON",
        help='A field filter object, e.g. \'{"merge_tag": "age", "operator": "LESS_THAN", "value": 18}\'.')] = None,
    tag: Annotated[Optional[list[str]], typer.Option(
        "--tag", metavar="TAG", help="Only contacts with this tag, by name or id (repeatable: all of them).")] = None,
    status: Annotated[Optional[str], typer.Option("--status", help="SUBSCRIBED, UNSUBSCRIBED, UNCONFIRMED, CLEANED"
                                                                  " or COMPLAINED.")] = None,
    page: Annotated[Optional[int], typer.Option("--page", help="Page number, from 1.")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Contacts per page, 10-250 (default 50).")] = None,
    sort_by: Annotated[Optional[str], typer.Option("--sort-by", help="created_at (default) or updated_at.")] = None,
    sort_order: Annotated[Optional[str], typer.Option("--sort-order", help="asc (default) or desc.")] = None,
    body: Annotated[Optional[str], typer.Option(
        "--body", metavar="JSON",
        help="The whole search body as JSON (- reads stdin); the other options add to it.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Search contacts by field filters, tags and status, a page at a time."""
    from marketing_cli.services.contacts.search import search_contacts

    s = state(ctx)
    if body == "-":
        body = sys.stdin.read()
    request: Any = json_option(body, "--body") if body is not None else {}
    if isinstance(request, dict):
        filters = [parse_where(w) for w in where or []]
        filters += [json_option(f, "--field-filter", member="fields", expect=dict) for f in field_filter or []]
        if filters:
            existing = request.get("fields")
            request["fields"] = (existing if isinstance(existing, list) else []) + filters
        if tag:
            existing = request.get("tags")
            request["tags"] = ((existing if isinstance(existing, list) else [])
                               + (tag_ids(s, tag) or []))
        for name, value in (("status", status), ("page", page), ("limit", limit), ("sort_by", sort_by),
                            ("sort_order", sort_order)):
            if value is not None:
                request[name] = value
    emit(search_contacts(s.conn(), s.workspace_id(), request), as_json, _human)


def register(app: typer.Typer) -> None:
    """Add search to the contacts app."""
    app.command("search")(contacts_search)

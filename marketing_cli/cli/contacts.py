"""`mkt contacts`: create, upsert, read and tag contacts (the twin of /v1/contacts).

Each command builds the same JSON body the API takes (from options, or whole from
`--body`) and calls the same service; `--json` prints the API's `data`.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli import contacts_tagging
from marketing_cli.cli.contacts_io import ConsentTextOption
from marketing_cli.cli.contacts_tagging import FileOption, SearchOption, SegmentOption
from marketing_cli.cli.output import JsonOption, emit, json_option, pairs, usage_error
from marketing_cli.cli.references import contact_id, tag_ids
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["contacts"], no_args_is_help=True)

FieldOption = Annotated[Optional[list[str]], typer.Option(
    "--field", "-f", metavar="TAG=VALUE",
    help="A field value by merge tag, e.g. --field first_name=Ann (repeatable).")]
TagOption = Annotated[Optional[list[str]], typer.Option(
    "--tag", metavar="TAG", help="A tag, by name or id (repeatable).")]
StatusOption = Annotated[Optional[str], typer.Option(
    "--status", help="SUBSCRIBED, UNSUBSCRIBED, UNCONFIRMED, CLEANED or COMPLAINED.")]
SmsStatusOption = Annotated[Optional[str], typer.Option(
    "--sms-status", help="SUBSCRIBED, UNSUBSCRIBED, CLEANED or BLOCKED.")]
BodyOption = Annotated[Optional[str], typer.Option(
    "--body", metavar="JSON", help="The whole request body as JSON ('-' reads stdin); other options override it.")]
ContactId = Annotated[str, typer.Argument(metavar="CONTACT", help="The contact: its id (24 hex characters), "
                                                                   "email address or phone number.")]


def _body(body: Optional[str]) -> dict[str, Any]:
    return json_option(body, "--body", expect=dict) or {}


def _fields(pairs_: Optional[list[str]], into: dict[str, Any]) -> dict[str, Any]:
    fields = dict(into.get("fields") or {}) if isinstance(into.get("fields"), dict) else {}
    for item in pairs_ or []:
        tag, sep, value = item.partition("=")
        if not sep or not tag.strip():
            raise typer.BadParameter(f"expected TAG=VALUE, got {item!r}.", param_hint="--field")
        fields[tag.strip()] = value
    return fields


def render_contact(c: dict[str, Any]) -> Any:
    values = c.get("data", c.get("fields")) or {}
    shown: dict[str, Any] = {
        "id": c["id"],
        "status": c["status"],
        "SMS status": c.get("sms_status"),
        "tags": ", ".join(f"{t['name']} ({t['id']})" for t in c["tags"]) or "-",
    }
    shown.update({tag: ", ".join(map(str, v)) if isinstance(v, list) else v
                  for tag, v in values.items() if v is not None})
    if "statistics" in c:
        st = c["statistics"]
        shown["opens / clicks"] = f"{st['total_opens']} / {st['total_clicks']}"
        shown["delivered / bounces"] = f"{st['total_delivered']} / {st['total_bounces']}"
    shown["created"] = c["created_at"]
    shown["updated"] = c["updated_at"]
    return pairs(shown, title="Contact")


@app.command("create")
def contacts_create(
    ctx: typer.Context,
    field: FieldOption = None,
    tag: TagOption = None,
    status: StatusOption = None,
    sms_status: SmsStatusOption = None,
    consent_text: ConsentTextOption = None,
    body: BodyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a contact (POST /v1/contacts); --status and --field email_address=... are required."""
    from marketing_cli.services.contacts import records as contacts

    s = state(ctx)
    request = _body(body)
    if field or "fields" in request:
        request["fields"] = _fields(field, request)
    for key, value in (("tags", tag_ids(s, tag)), ("status", status), ("sms_status", sms_status),
                       ("consent_text", consent_text)):
        if value:
            request[key] = value
    emit(contacts.create_contact(s.conn(), s.workspace_id(), request, source="command"), as_json, render_contact)


@app.command("upsert")
def contacts_upsert(
    ctx: typer.Context,
    email: Annotated[Optional[str], typer.Option("--email", help="The lookup email address.")] = None,
    phone: Annotated[Optional[str], typer.Option("--phone", help="The lookup phone number (any format).")] = None,
    field: FieldOption = None,
    tag: TagOption = None,
    status: StatusOption = None,
    sms_status: SmsStatusOption = None,
    partial: Annotated[bool, typer.Option(
        "--partial", help="Merge (the default): the values given replace those fields' values; other fields, "
                          "the status and the tags are kept; --tag adds tags to the contact's.")] = False,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace the contact as the API does by default: fields left out lose their values, the "
                          "tags become exactly the --tag ones (none without --tag), the status becomes --status or "
                          "SUBSCRIBED. What was removed is listed.")] = False,
    consent_text: ConsentTextOption = None,
    body: BodyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create or update a contact by email and/or phone; merges unless --replace (POST /v1/contacts/upsert)."""
    from marketing_cli.services.contacts import records as contacts

    if partial and replace:
        raise usage_error("Give --partial (merge, the default) or --replace, not both.")
    s = state(ctx)
    request = _body(body)
    if field or "fields" in request:
        request["fields"] = _fields(field, request)
    for key, value in (("email_address", email), ("phone_number", phone), ("tags", tag_ids(s, tag)),
                       ("status", status), ("sms_status", sms_status), ("consent_text", consent_text)):
        if value:
            request[key] = value
    if partial or replace or "partial_update" not in request:  # the command line merges unless told otherwise
        request["partial_update"] = not replace
    contact, removed = contacts.upsert_and_report(s.conn(), s.workspace_id(), request, source="command")
    emit(contact, as_json, render_contact)
    if removed is not None:
        from marketing_cli.cli.output import err_console

        err_console.print(replaced_message(removed), markup=False, soft_wrap=True)


def replaced_message(removed: dict[str, Any]) -> str:
    """What `upsert --replace` took away from the contact (on stderr, so --json stays the data)."""
    parts = []
    if removed["fields"]:
        parts.append("field values " + ", ".join(f"{tag} ({_shown(value)})" for tag, value in removed["fields"].items()))
    if removed["tags"]:
        parts.append("tags " + ", ".join(removed["tags"]))
    if removed["status"]:
        parts.append(f"status {removed['status']} (now SUBSCRIBED: no --status was given)")
    if not parts:
        return "Replaced the contact: nothing was removed."
    return "Replaced the contact; removed: " + "; ".join(parts) + "."


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


@app.command("get")
def contacts_get(ctx: typer.Context, contact: ContactId, as_json: JsonOption = False) -> None:
    """Show one contact by id, email address or phone number (GET /v1/contacts/:id)."""
    from marketing_cli.services.contacts import records as contacts

    s = state(ctx)
    emit(contacts.get_contact(s.conn(), s.workspace_id(), contact_id(s, contact)), as_json, render_contact)


@app.command("by-phone")
def contacts_by_phone(
    ctx: typer.Context,
    phone_number: Annotated[str, typer.Argument(metavar="NUMBER", help="Any format; without + the phone_number "
                                                                       "field's default region applies.")],
    as_json: JsonOption = False,
) -> None:
    """Find the contact with a phone number (GET /v1/contacts/by-phone)."""
    from marketing_cli.services.contacts import records as contacts

    s = state(ctx)
    emit(contacts.get_contact_by_phone(s.conn(), s.workspace_id(), phone_number), as_json, render_contact)


TagArgs = Annotated[list[str], typer.Argument(
    metavar="[CONTACT] TAG",
    help="The contact (its id, email address or phone number), then tags by name or id; with --search,"
         " --segment or --file only the one tag.")]


@app.command("tag")
def contacts_tag(
    ctx: typer.Context,
    args: TagArgs,
    search: SearchOption = None,
    segment: SegmentOption = None,
    file: FileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add tags to a contact (POST /v1/contacts/:id/tags/add), or one tag to the contacts of a search, a segment or
    a file (POST /v1/tags/:id/contacts); tags already there are ignored, the rest fire TAG_ADDED."""
    _tag(ctx, args, search, segment, file, as_json, add=True)


@app.command("untag")
def contacts_untag(
    ctx: typer.Context,
    args: TagArgs,
    search: SearchOption = None,
    segment: SegmentOption = None,
    file: FileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove tags from a contact (POST /v1/contacts/:id/tags/remove), or one tag from the contacts of a search, a
    segment or a file (POST /v1/tags/:id/contacts/remove); each removal fires TAG_REMOVED."""
    _tag(ctx, args, search, segment, file, as_json, add=False)


def _tag(ctx: typer.Context, args: list[str], search: Optional[list[str]], segment: Optional[int],
         file: Optional[str], as_json: bool, *, add: bool) -> None:
    from marketing_cli.services.contacts import records as contacts

    s = state(ctx)
    if contacts_tagging.selected(search, segment, file):
        contacts_tagging.run(s, args, search, segment, file, add=add, as_json=as_json)
        return
    if len(args) < 2:
        raise usage_error("Give the contact and at least one TAG (or --search, --segment or --file and one TAG).")
    change = contacts.add_contact_tags if add else contacts.remove_contact_tags
    body = {"tag_ids": tag_ids(s, args[1:])}
    emit(change(s.conn(), s.workspace_id(), contact_id(s, args[0]), body), as_json, render_contact)


def render_consents(rows: list[dict[str, Any]]) -> Any:
    from marketing_cli.cli.output import table

    shown = [(r["id"], r["created_at"], r["channel"], r["consent"], r["status"], r["source"], _evidence(r),
              r["consent_text"] or "") for r in rows]
    return table(["id", "at (UTC)", "channel", "consent", "status", "source", "evidence", "wording"], shown,
                 title="Consent ledger (oldest first)", drop=("wording", "evidence"))


def _evidence(row: dict[str, Any]) -> str:
    """What the row's source proves, in one cell: file and line, the reply, campaign, IP."""
    parts = []
    if row["file_name"] or row["line"] is not None:
        parts.append(f"{row['file_name'] or 'file'}:{row['line']}")
    if row["message_text"]:
        parts.append(f"reply {row['message_text']!r}")
    for key in ("campaign_id", "ip", "user_agent"):
        if row[key]:
            parts.append(f"{key.replace('_', ' ')} {row[key]}")
    return "; ".join(parts)


@app.command("consents")
def contacts_consents(
    ctx: typer.Context,
    contact: ContactId,
    after_id: Annotated[Optional[int], typer.Option(
        "--after-id", metavar="N", help="Only the rows after this row id (the last one of the page before).")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Rows at most, 1 to 1,000.")] = 100,
    as_json: JsonOption = False,
) -> None:
    """Show a contact's consent ledger, oldest first (GET /v1/contacts/:id/consents)."""
    from marketing_cli.services.contacts import consent_export

    s = state(ctx)
    emit(consent_export.list_contact_consents(s.conn(), s.workspace_id(), contact_id(s, contact), after_id=after_id,
                                              limit=limit), as_json, render_consents)


# `contacts import` / `contacts export` (contacts_io.py), `contacts search` (contacts_search.py) and
# `contacts delete | erase | export-person` (contacts_privacy.py).
from marketing_cli.cli import contacts_io, contacts_privacy, contacts_search  # noqa: E402

contacts_io.register(app)
contacts_search.register(app)
contacts_privacy.register(app)

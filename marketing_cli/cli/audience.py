"""`mkt audience`: what the audience resolver gives for an audience (POST /v1/audience/count)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, emit, json_option
from marketing_cli.cli.references import tag_ids
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.errors import MktError

app = typer.Typer(help=HELP["audience"], no_args_is_help=True)

# The include/exclude options of an Audience object, shared by every command that takes one.
IncludeTags = Annotated[Optional[list[str]], typer.Option(
    "--include-tag", metavar="TAG", help="A tag to include, by name or id (TAGS; repeat for more).")]
IncludeSegments = Annotated[Optional[list[int]], typer.Option(
    "--include-segment", metavar="ID", help="A segment to include (SEGMENTS; repeat for more).")]
ExcludeTags = Annotated[Optional[list[str]], typer.Option(
    "--exclude-tag", metavar="TAG", help="A tag whose contacts are left out, by name or id (repeat for more).")]
ExcludeSegments = Annotated[Optional[list[int]], typer.Option(
    "--exclude-segment", metavar="ID", help="A segment whose contacts are left out (repeat for more).")]


def audience_object(ctx: typer.Context, audience_type: str | None, include_tag: list[str] | None,
                    include_segment: list[int] | None, exclude_tag: list[str] | None,
                    exclude_segment: list[int] | None) -> dict[str, Any]:
    """The Audience object the options describe (the service checks it with the API's messages);
    tags typed by name become their ids (cli/references.py)."""
    s = state(ctx)
    return {"type": audience_type, "include_tag_ids": tag_ids(s, include_tag),
            "include_segment_ids": include_segment or None, "exclude_tag_ids": tag_ids(s, exclude_tag),
            "exclude_segment_ids": exclude_segment or None}



@app.command("count")
def audience_count(
    ctx: typer.Context,
    audience_type: Annotated[Optional[str], typer.Option(
        "--type", help="ENTIRE_AUDIENCE, TAGS or SEGMENTS (or give --audience).")] = None,
    include_tag: IncludeTags = None,
    include_segment: IncludeSegments = None,
    exclude_tag: ExcludeTags = None,
    exclude_segment: ExcludeSegments = None,
    audience: Annotated[Optional[str], typer.Option(
        "--audience", metavar="JSON", help="The Audience object (or a list of them) as JSON.")] = None,
    channel: Annotated[str, typer.Option(help="email or sms: whose eligibility rules apply.")] = "email",
    as_json: JsonOption = False,
) -> None:
    """Count the eligible recipients of an audience on a channel, without sending anything."""
    from marketing_cli.services.contacts import audience as audience_service

    if audience is not None:
        if audience_type or include_tag or include_segment or exclude_tag or exclude_segment:
            raise MktError(400, "Give either --audience JSON or --type with the include/exclude options, not both.")
        value: Any = json_option(audience, "--audience", member="audience")
    else:
        value = audience_object(ctx, audience_type, include_tag, include_segment, exclude_tag, exclude_segment)
    s = state(ctx)
    emit(audience_service.audience_count(s.conn(), s.workspace_id(), {"audience": value, "channel": channel}),
         as_json, lambda r: f"{r['count']} {r['channel']} recipient(s).")

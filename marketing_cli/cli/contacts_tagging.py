"""`mkt contacts tag|untag --search FILTER | --segment ID | --file EMAILS TAG`: the bulk twin of
POST /v1/tags/{id}/contacts (and .../contacts/remove). `contacts tag CONTACT TAG...` (one
contact) stays in contacts.py; it calls `run` when a selector is given.
"""

from __future__ import annotations

import re
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import emit, json_option, usage_error
from marketing_cli.cli.state import State

SearchOption = Annotated[Optional[list[str]], typer.Option(
    "--search", metavar="FILTER",
    help="Select the contacts of a search: a field filter 'merge_tag OPERATOR value' as `contacts search --where`"
         " takes it (repeatable: all must hold), or a JSON object with the search's fields, tags and status"
         " ('{}' selects every contact).")]
SegmentOption = Annotated[Optional[int], typer.Option(
    "--segment", metavar="ID", help="Select the members of a segment, by id.")]
FileOption = Annotated[Optional[str], typer.Option(
    "--file", metavar="EMAILS",
    help="Select the contacts listed in a file, one email address (or contact id) per line; '-' reads stdin."
         " Blank lines and lines starting with # are skipped.")]
_HEX_ID = re.compile(r"[0-9a-fA-F]{24}")


def selected(search: list[str] | None, segment: int | None, file: str | None) -> bool:
    return bool(search) or segment is not None or file is not None


def _search(items: list[str]) -> dict[str, Any]:
    from marketing_cli.cli.contacts_search import parse_where

    body: dict[str, Any] = {}
    for item in items:
        if item.lstrip().startswith("{"):
            for key, value in json_option(item, "--search", member="search", expect=dict).items():
                body[key] = body.get("fields", []) + value if key == "fields" and isinstance(value, list) else value
        else:
            body.setdefault("fields", []).append(parse_where(item))
    return body


def _listed(file: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise usage_error(f"--file: cannot read {file}: {getattr(exc, 'strerror', None) or exc}.") from None
    entries = [line.strip() for line in text.splitlines()]
    entries = [e for e in entries if e and not e.startswith("#")]
    if entries and all(_HEX_ID.fullmatch(e) for e in entries):
        return {"contact_ids": [e.lower() for e in entries]}
    return {"emails": entries}


def _summary(result: dict[str, Any]) -> str:
    tag = f"tag {result['tag_id']}"
    if "tagged" in result:
        text = (f"Tagged {result['tagged']:,} of {result['selected']:,} selected contacts with {tag}"
                f" ({result['already_tagged']:,} had it already)")
    else:
        text = (f"Took {tag} off {result['untagged']:,} of {result['selected']:,} selected contacts"
                f" ({result['not_tagged']:,} did not have it)")
    if result["not_found"]:
        text += f"; {result['not_found']:,} listed were no contact of this workspace"
    return f"{text}; {result['enrolled']:,} entered automations."


def run(s: State, refs: list[str], search: list[str] | None, segment: int | None, file: str | None, *,
        add: bool, as_json: bool) -> None:
    """Bulk tag (add) or untag the selected contacts with the one TAG of `refs`."""
    from marketing_cli.cli.references import tag_ids
    from marketing_cli.services.automations import tagging

    if sum((bool(search), segment is not None, file is not None)) != 1:
        raise usage_error("Give one of --search, --segment or --file.")
    if len(refs) != 1:
        raise usage_error("With --search, --segment or --file, give exactly one TAG (and no contact).")
    if search:
        body: dict[str, Any] = {"search": _search(search)}
    elif segment is not None:
        body = {"segment_id": segment}
    else:
        body = _listed(file or "-")
    (tag_id,) = tag_ids(s, refs) or [None]
    with ExitStack() as stack:
        progress = None
        if not as_json:
            from marketing_cli.cli.contacts_io import _progress
            from marketing_cli.cli.output import err_console

            if err_console.is_terminal:
                bar = stack.enter_context(_progress("Tagging" if add else "Untagging", None))
                task = bar.add_task("contacts", total=None)

                def progress(done: int, total: int | None) -> None:
                    bar.update(task, completed=done, total=total)

        result = tagging.tag_contacts(s.conn(), s.workspace_id(), tag_id, body, add=add, progress=progress)
    emit(result, as_json, _summary)

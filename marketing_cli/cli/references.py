"""Tags and contacts as people type them on the command line, turned into the ids the services take.

Every command that takes a tag (`--tag`, `--include-tag`, `contacts tag CONTACT TAG...`) or a
contact (`contacts get`, `contacts tag`, `--contact`) resolves it here, through the one
resolver of services/contacts/references.py, so a tag is a name or an id and a contact an
id, an email address or a phone number everywhere, with the same messages. The API keeps
ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from marketing_cli.cli.state import State


def tag_ids(s: State, refs: Sequence[str] | None) -> list[int] | None:
    """The ids of the tags typed (names or ids); None when none was."""
    if not refs:
        return None
    from marketing_cli.services.contacts import references

    return references.tag_ids(s.conn(), s.workspace_id(), refs)


def contact_id(s: State, ref: str) -> str:
    """The id of the contact typed as its id, email address or phone number."""
    from marketing_cli.services.contacts import references

    return references.contact_id(s.conn(), s.workspace_id(), ref)

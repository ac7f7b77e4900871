"""Deleting what a workspace made: every resource but contacts (a contact's delete is an erase).

Why a package above every domain: a tag, a field or a segment belongs to contacts/, a sender or
a domain to email/, yet what keeps one from going is what the domains above them do with it:
a queued email or SMS campaign's audience, a sending campaign's sender, an active flow's
steps, a merge tag in a template or a draft. Asking those questions from contacts/ would draw
arrows up the layers; here they are SQL over the tables that hold the references (uses.py),
and the deletes themselves (audience.py: tags, fields, segments; sending.py: templates,
senders, domains; campaigns.py: email and SMS campaigns, automations) run each in one
transaction: the checks, then set-based statements, all or nothing.

Each delete has two faces over one function: `remove_<thing>` returns a `Removal`, whose
`data` is the API's (`{"id": ..., "deleted": true}`, CONTRACT section 10) and whose `effects`
are the lines the CLI prints about what went with it ("Tag vip removed from 1,204 contacts.");
`delete_<thing>` returns just the data, for the HTTP face.

What is kept is docs/privacy.md's "Deleting resources": the workspace's usage counters (what
was sent this month), the SMS ledger (every charge and refund), the contacts' own engagement
totals and the automation event log are never lowered by a delete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from marketing_cli.errors import MktError

NOT_FOUND = "Not found."


@dataclass
class Removal:
    """What a delete answered (`data`, the API's) and what went with it (`effects`, for people)."""

    data: dict[str, Any]
    effects: list[str] = field(default_factory=list)


def deleted(resource_id: Any, *effects: str) -> Removal:
    return Removal({"id": resource_id, "deleted": True}, list(effects))


def not_found() -> MktError:
    """A repeated delete, or an id of another workspace (CONTRACT section 10)."""
    return MktError(404, NOT_FOUND)


def in_use(message: str) -> MktError:
    return MktError(409, message)


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"

"""Deleting what email is sent with: templates, sender identities and sending domains
(DELETE /v1/templates|sender-identities|domains/{id}).

A template is never in use: a campaign variant or a flow's version keeps a copy of the HTML it
was made from, so deleting the template changes no campaign and no flow (a flow's draft that
names it is refused at its next publish, with the publisher's message). Its ZIP files go with
it (template_assets). A sender goes with nothing else; a draft, sent or archived campaign that
named it keeps its statistics and shows no sender (the key is ON DELETE SET NULL). A domain
goes with its DNS records and its senders. Both are refused while a campaign in flight or an
active flow sends from them (uses.py).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.services.deletion import Removal, deleted, in_use, not_found, plural, uses
from marketing_cli.services.email import domains, senders, templates
from marketing_cli.storage.db import transaction


def remove_template(conn: sqlite3.Connection, workspace_id: int, template_id: Any) -> Removal:
    template_id = parse_int_id(template_id, templates.NOT_FOUND, 404)
    with transaction(conn):
        row = conn.execute("SELECT id, name FROM templates WHERE id = ? AND workspace_id = ?",
                           (template_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        files = conn.execute("DELETE FROM template_assets WHERE template_id = ?", (template_id,)).rowcount
        conn.execute("DELETE FROM templates WHERE id = ?", (template_id,))
    effect = f"Template {row['name']} deleted" + (f" with {plural(files, 'file')} of its archive." if files else ".")
    return deleted(template_id, effect, "Campaigns and flows made from it keep their own copy of the HTML.")


def delete_template(conn: sqlite3.Connection, workspace_id: int, template_id: Any) -> dict[str, Any]:
    """DELETE /v1/templates/{id}."""
    return remove_template(conn, workspace_id, template_id).data


def remove_sender(conn: sqlite3.Connection, workspace_id: int, sender_id: Any) -> Removal:
    sender_id = parse_int_id(sender_id, senders.INVALID_ID)
    with transaction(conn):
        row = conn.execute("SELECT s.id, s.local_part, d.domain_name FROM sender_identities s"
                           " JOIN domains d ON d.id = s.domain_id WHERE s.id = ? AND s.workspace_id = ?",
                           (sender_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        user = uses.sender_user(conn, workspace_id, sender_id)
        if user:
            raise in_use(user)
        named = conn.execute("SELECT count(*) FROM campaigns WHERE sender_identity_id = ?", (sender_id,)).fetchone()[0]
        conn.execute("DELETE FROM sender_identities WHERE id = ?", (sender_id,))
    effects = [f"Sender {row['local_part']}@{row['domain_name']} deleted."]
    if named:
        effects.append(f"{plural(named, 'campaign')} that named it now show no sender.")
    return deleted(sender_id, *effects)


def delete_sender_identity(conn: sqlite3.Connection, workspace_id: int, sender_id: Any) -> dict[str, Any]:
    """DELETE /v1/sender-identities/{id}."""
    return remove_sender(conn, workspace_id, sender_id).data


def remove_domain(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> Removal:
    domain_id = parse_int_id(domain_id, domains.INVALID_ID)
    with transaction(conn):
        row = conn.execute("SELECT id, domain_name FROM domains WHERE id = ? AND workspace_id = ?",
                           (domain_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        user = uses.domain_user(conn, workspace_id, domain_id)
        if user:
            raise in_use(user)
        gone = conn.execute("DELETE FROM sender_identities WHERE domain_id = ?", (domain_id,)).rowcount
        records = conn.execute("DELETE FROM dns_records WHERE domain_id = ?", (domain_id,)).rowcount
        conn.execute("DELETE FROM domains WHERE id = ?", (domain_id,))
    return deleted(domain_id, f"Domain {row['domain_name']} deleted with {plural(records, 'DNS record')} and"
                              f" {plural(gone, 'sender')}.")


def delete_domain(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> dict[str, Any]:
    """DELETE /v1/domains/{id}."""
    return remove_domain(conn, workspace_id, domain_id).data

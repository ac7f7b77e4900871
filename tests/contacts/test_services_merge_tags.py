from __future__ import annotations

import sqlite3

from marketing_cli.services.contacts import merge_tags


def test_categories_and_live_fields(conn: sqlite3.Connection, workspace: dict) -> None:
    tags = merge_tags.list_merge_tags(conn, workspace["id"])
    assert {t["category"] for t in tags} == {"contact", "workspace", "actions", "system"}
    assert all(set(t) == {"tag", "label", "category"} for t in tags)
    contact = [t["tag"] for t in tags if t["category"] == "contact"]
    assert contact == ["{{contact.email_address}}", "{{contact.first_name}}", "{{contact.last_name}}"]
    conn.execute(
        "INSERT INTO fields (workspace_id, label, merge_tag, type, \"order\", created_at, updated_at)"
        " VALUES (?, 'Loyalty tier', 'tier', 'TEXT', 9, 'now', 'now')", (workspace["id"],))
    tags = merge_tags.list_merge_tags(conn, workspace["id"])
    assert {"tag": "{{contact.tier}}", "label": "Loyalty tier", "category": "contact"} in tags

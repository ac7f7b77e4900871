"""Tags: create (unique names, any letter case) and list."""

from __future__ import annotations

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import workspaces
from marketing_cli.services.contacts import tags


def test_create_and_list(conn, workspace) -> None:
    ws = workspace["id"]
    a = tags.create_tag(conn, ws, {"name": "  VIP "})
    b = tags.create_tag(conn, ws, {"name": "Leads"})
    assert a == {"id": a["id"], "name": "VIP"}
    assert tags.list_tags(conn, ws) == [a, b]
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    assert tags.list_tags(conn, other) == []
    assert tags.create_tag(conn, other, {"name": "VIP"})["name"] == "VIP"  # names are per workspace


@pytest.mark.parametrize("body,message", [
    ({}, "Please provide a name for the tag."),
    ({"name": "  "}, "Please provide a name for the tag."),
    ({"name": "x" * 101}, "Tag name must be 100 characters or less."),
    ({"name": "vip"}, "A tag named 'VIP' already exists in this workspace."),
    ({"name": 3}, "The member 'name' must be a string."),
    ([], "Invalid request body."),
])
def test_create_messages(conn, workspace, body, message) -> None:
    tags.create_tag(conn, workspace["id"], {"name": "VIP"})
    with pytest.raises(MktError) as info:
        tags.create_tag(conn, workspace["id"], body)
    assert (info.value.status, info.value.message) == (400, message)
    assert len(tags.list_tags(conn, workspace["id"])) == 1


def test_tags_by_id_checks_workspace(conn, workspace) -> None:
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    theirs = tags.create_tag(conn, other, {"name": "x"})
    mine = tags.create_tag(conn, workspace["id"], {"name": "y"})
    assert tags.tags_by_id(conn, workspace["id"], [mine["id"]]) == {mine["id"]: "y"}
    with pytest.raises(MktError, match=f"Tag ID {theirs['id']} does not exist in this workspace"):
        tags.tags_by_id(conn, workspace["id"], [mine["id"], theirs["id"]])

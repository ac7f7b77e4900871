"""`mkt tags create/list`: CONTRACT's {"id", "name"} output."""

from __future__ import annotations


def test_create_and_list(cli_json, cli, client, auth, workspace) -> None:
    assert cli_json("tags", "create", "VIP") == {"id": 1, "name": "VIP"}
    assert cli_json("tags", "list") == client.get("/v1/tags", headers=auth).json()["data"] == [{"id": 1, "name": "VIP"}]
    result = cli("tags", "create", "vip")
    assert result.exit_code == 1 and result.stderr.strip() == "A tag named 'VIP' already exists in this workspace."
    human = cli("tags", "list")
    assert human.exit_code == 0 and "VIP" in human.stdout

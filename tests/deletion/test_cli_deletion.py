"""`mkt <resource> delete ID`: asks on a terminal, `--yes` skips the question, refuses without a
terminal and without `--yes`; prints what went with the resource; `--json` is DELETE's data.
Also `mkt segments update` and `mkt campaigns archive`."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.cli import deletes
from tests import factories as f


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deletes, "stdin_is_terminal", lambda: True)


def tagged_world(conn: Any, ws: int) -> int:
    vip = f.tag(conn, ws, "vip")
    for n in range(2):
        f.contact(conn, ws, f"t{n}@example.com", tags=[vip])
    return vip


def test_without_a_terminal_a_delete_needs_yes(conn: Any, workspace: dict[str, Any], cli: Any) -> None:
    vip = tagged_world(conn, workspace["id"])
    result = cli("tags", "delete", str(vip))
    assert result.exit_code == 1 and result.stderr.strip() == deletes.NO_TERMINAL
    assert conn.execute("SELECT count(*) FROM contact_tags").fetchone()[0] == 2
    result = cli("tags", "delete", str(vip), "--yes")
    assert result.exit_code == 0 and result.stdout.strip() == "Tag vip removed from 2 contacts."
    assert conn.execute("SELECT count(*) FROM tags").fetchone()[0] == 0


def test_on_a_terminal_it_asks_and_no_keeps_it(conn: Any, workspace: dict[str, Any], cli: Any, terminal: None) -> None:
    vip = tagged_world(conn, workspace["id"])
    result = cli("tags", "delete", str(vip), input="n\n")
    assert result.exit_code == 1 and "Delete tag" in result.stderr and "Nothing deleted." in result.stderr
    assert conn.execute("SELECT count(*) FROM tags").fetchone()[0] == 1
    result = cli("tags", "delete", str(vip), input="\n")  # the default is no
    assert result.exit_code == 1 and conn.execute("SELECT count(*) FROM tags").fetchone()[0] == 1
    result = cli("tags", "delete", str(vip), input="y\n")
    assert result.exit_code == 0 and "Tag vip removed from 2 contacts." in result.stdout
    assert conn.execute("SELECT count(*) FROM tags").fetchone()[0] == 0


def test_json_is_the_apis_data_and_errors_are_the_apis_messages(conn: Any, workspace: dict[str, Any], cli: Any,
                                                               cli_json: Any, client: Any, auth: dict[str, str]) -> None:
    ws = workspace["id"]
    city = f.field(conn, ws, "city")
    f.contact(conn, ws, "a@example.com", city="Paris")
    assert cli_json("fields", "delete", str(city), "--yes") == {"id": city, "deleted": True}
    result = cli("fields", "delete", str(city), "--yes")
    assert result.exit_code == 1 and result.stderr.strip() == "Not found."
    template = f.code_template(conn, ws, "<p>{{contact.first_name}}</p>", name="Plain")
    first = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'first_name'", (ws,)).fetchone()[0]
    result = cli("fields", "delete", str(first), "--yes")
    assert result.exit_code == 1 and result.stderr.strip() == (
        f"This field is used by template {template['id']} (Plain) as {{{{contact.first_name}}}}: remove it from the"
        " template first.")
    assert result.stderr.strip() == client.delete(f"/v1/fields/{first}", headers=auth).json()["error"]["message"]


@pytest.mark.parametrize("group", ["segments", "templates", "senders", "domains", "campaigns", "sms", "automations"])
def test_every_delete_command_deletes_with_yes(conn: Any, workspace: dict[str, Any], cli: Any, cli_json: Any,
                                               group: str) -> None:
    from marketing_cli.services.sms import campaigns as sms_campaigns

    ws = workspace["id"]
    made = {
        "segments": lambda: f.segment(conn, ws, "S", {"condition": "AND", "filters": [
            {"type": "open_rate", "operator": "gte", "value": 1}]})["id"],
        "templates": lambda: f.code_template(conn, ws, "<p>x</p>")["id"],
        "senders": lambda: f.sender(conn, ws)["id"],
        "domains": lambda: f.domain(conn, ws)["id"],
        "campaigns": lambda: f.campaign(conn, ws)["id"],
        "sms": lambda: sms_campaigns.create_campaign(conn, ws, {"name": "Sms"})["id"],
        "automations": lambda: f.step_flow(conn, ws, [{"id": "a", "type": "exit"}], publish=False)["id"],
    }[group]()
    assert cli_json(group, "delete", str(made), "--yes") == {"id": made, "deleted": True}
    result = cli(group, "delete", str(made), "-y")
    assert result.exit_code == 1 and result.stderr.strip() == "Not found."


def test_segments_update_and_campaigns_archive(conn: Any, workspace: dict[str, Any], cli: Any, cli_json: Any) -> None:
    ws = workspace["id"]
    seg = f.segment(conn, ws, "Openers", {"condition": "AND", "filters": [
        {"type": "open_rate", "operator": "gte", "value": 1}]})
    assert cli_json("segments", "update", str(seg["id"]), "--name", "Readers")["name"] == "Readers"
    changed = cli_json("segments", "update", str(seg["id"]), "--filters",
                       '{"condition": "OR", "filters": [{"type": "click_rate", "operator": "gt", "value": 2}]}')
    assert changed["filters"]["condition"] == "OR" and changed["counting"] is True
    result = cli("segments", "update", str(seg["id"]))
    assert result.exit_code == 1 and "--name" in result.stderr
    result = cli("segments", "update", str(seg["id"]), "--filters", '{"condition": "NOR", "filters": []}')
    assert result.exit_code == 1 and result.stderr.strip() == "Filter condition must be AND or OR"
    sent = f.sent_email_campaign(conn, ws, ["a@example.com"])
    result = cli("campaigns", "delete", sent, "--yes")
    assert result.exit_code == 1 and result.stderr.strip() == "This campaign sent messages (SENT): archive it first."
    assert cli_json("campaigns", "archive", sent) == {"id": sent, "status": "ARCHIVED"}
    f.sent_long_ago(conn, sent)
    result = cli("campaigns", "delete", sent, "--yes")
    assert result.exit_code == 0 and "Campaign Spring sale deleted with 1 message" in result.stdout


def test_a_tag_is_deleted_by_its_name_too(conn: Any, workspace: dict[str, Any], cli: Any) -> None:
    """Tag names are taken wherever a tag id is on the command line (`mkt tags delete vip`)."""
    ws = workspace["id"]
    f.tag(conn, ws, "vip")
    f.contact(conn, ws, "ann@example.com", tags=[conn.execute("SELECT id FROM tags WHERE name = 'vip'").fetchone()[0]])
    unknown = cli("tags", "delete", "vipp", "--yes")
    assert unknown.exit_code == 1 and "There is no tag named 'vipp'" in unknown.stderr
    done = cli("tags", "delete", "vip", "--yes")
    assert done.exit_code == 0 and "removed from 1 contact" in done.stdout
    assert conn.execute("SELECT count(*) FROM tags WHERE workspace_id = ?", (ws,)).fetchone()[0] == 0

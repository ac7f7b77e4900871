"""Every command that takes a tag takes its name or id, and every command that takes a contact
takes its id, email address or phone number (cli/references.py over
services/contacts/references.py; issue 38, section 5). The API keeps ids."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from marketing_cli.cli.main import app
from marketing_cli.services.contacts import fields, records, tags
from tests import factories

TAG_PARAMS = {"tag", "tags", "tag_id", "tag_ids", "include_tag", "exclude_tag"}


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    fields.create_field(conn, ws, {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT",
                                   "default_region": "US"})
    vip = tags.create_tag(conn, ws, {"name": "VIP"})["id"]
    news = tags.create_tag(conn, ws, {"name": "news"})["id"]
    ann = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "+14155552671",
                                            "tags": [vip]})
    bob = records.upsert_contact(conn, ws, {"email_address": "bob@example.com", "tags": [news]})
    return {"ws": ws, "vip": vip, "news": news, "ann": ann["id"], "bob": bob["id"]}


def tag_names(contact: dict[str, Any]) -> list[str]:
    return [t["name"] for t in contact["tags"]]


def test_no_command_takes_a_tag_as_a_bare_integer() -> None:
    """A command added later with `--tag ID: int` would refuse `--tag vip`: it must take text and resolve it."""
    def walk(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
        if hasattr(command, "list_commands"):
            return [found for name in command.list_commands(None)
                    for found in walk(command.get_command(None, name), (*path, name))]
        return [(path, command)]

    integers = [(" ".join(path), p.name) for path, command in walk(typer.main.get_command(app))
                for p in command.params
                if p.name in TAG_PARAMS and "int" in str(p.type_descriptor.annotation).replace("Optional", "")]
    assert integers == []


def test_contacts_tag_and_untag_by_email_phone_and_tag_name(cli_json: Callable[..., Any], world: dict) -> None:
    assert tag_names(cli_json("contacts", "tag", "ann@example.com", "news", str(world["vip"]))) == ["VIP", "news"]
    assert tag_names(cli_json("contacts", "untag", "(415) 555-2671", "vip")) == ["news"]
    assert cli_json("contacts", "get", "ANN@example.com")["id"] == world["ann"]
    assert cli_json("contacts", "get", "+1 415-555-2671")["id"] == world["ann"]


def test_unknown_names_are_clear_errors_and_write_nothing(cli: Callable[..., Any], world: dict, conn: Any) -> None:
    before = conn.execute("SELECT count(*) FROM contact_tags").fetchone()[0]
    result = cli("contacts", "tag", "ann@example.com", "news", "gold")
    assert (result.exit_code, result.stderr.strip()) == (
        1, "There is no tag named 'gold' in this workspace (`mkt tags list` shows them).")
    result = cli("contacts", "tag", "zed@example.com", "news")
    assert (result.exit_code, result.stderr.strip()) == (
        1, "We couldn't find a contact with the email address zed@example.com.")
    result = cli("contacts", "tag", "ann@example.com", "99")  # an unknown id: the API's message
    assert (result.exit_code, result.stderr.strip()) == (1, "Tag ID 99 does not exist in this workspace")
    assert conn.execute("SELECT count(*) FROM contact_tags").fetchone()[0] == before


def test_create_upsert_import_and_search_take_tag_names(cli_json: Callable[..., Any], cli: Callable[..., Any],
                                                        world: dict, tmp_path: Path) -> None:
    created = cli_json("contacts", "create", "--field", "email_address=cy@example.com", "--status", "SUBSCRIBED",
                       "--tag", "vip")
    assert tag_names(created) == ["VIP"]
    assert tag_names(cli_json("contacts", "upsert", "--email", "cy@example.com", "--tag", "NEWS")) == ["VIP", "news"]
    path = tmp_path / "people.csv"
    path.write_text("email\ndan@example.com\n", encoding="utf-8")
    assert cli_json("contacts", "import", str(path), "--tag", "vip", "--tag", str(world["news"]))["created"] == 1
    assert tag_names(cli_json("contacts", "get", "dan@example.com")) == ["VIP", "news"]
    found = cli_json("contacts", "search", "--tag", "vip", "--tag", "news")
    assert sorted(c["data"]["email_address"] for c in found["contacts"]) == ["cy@example.com", "dan@example.com"]
    bad = cli("contacts", "import", str(path), "--tag", "gold")
    assert bad.exit_code == 1 and "no tag named 'gold'" in bad.stderr


def test_audience_and_campaign_options_take_tag_names(cli_json: Callable[..., Any], world: dict,
                                                      conn: Any) -> None:
    counted = cli_json("audience", "count", "--type", "TAGS", "--include-tag", "vip", "--include-tag", "news",
                       "--exclude-tag", "NEWS")
    assert counted["count"] == 1  # ann: vip without news
    campaign = factories.campaign(conn, world["ws"])
    configured = cli_json("campaigns", "configure", campaign["id"], "--audience-type", "TAGS", "--include-tag", "vip",
                          "--exclude-tag", "news")
    assert configured["audience"][0]["include_tag_ids"] == [world["vip"]]
    assert configured["audience"][0]["exclude_tag_ids"] == [world["news"]]


def test_automations_and_events_take_a_contact_by_email_or_phone(cli_json: Callable[..., Any], world: dict,
                                                                 conn: Any) -> None:
    flow = factories.automation(conn, world["ws"], {"name": "By hand", "triggers": [{"type": "manual"}],
                                                    "steps": [{"id": "a", "type": "exit"}]})
    entered = cli_json("automations", "enroll", str(flow["id"]), "--contact", "ann@example.com")
    assert entered["contact_id"] == world["ann"]
    walked = cli_json("automations", "simulate", str(flow["id"]), "--contact", "+14155552671")
    assert walked["contact_id"] == world["ann"]
    cli_json("contacts", "tag", "bob@example.com", "vip")
    logged = cli_json("events", "log", "--contact", "bob@example.com")
    assert logged and {e["contact_id"] for e in logged} == {world["bob"]}


def test_the_api_keeps_ids(client: Any, auth: dict[str, str], world: dict) -> None:
    r = client.post(f"/v1/contacts/{world['ann']}/tags/add", headers=auth, json={"tag_ids": ["news"]})
    assert r.status_code == 400
    assert client.get("/v1/contacts/ann@example.com", headers=auth).status_code in (400, 404)
    assert json.loads(client.post(f"/v1/contacts/{world['ann']}/tags/add", headers=auth,
                                  json={"tag_ids": [world["news"]]}).text)["data"]["tags"][1]["name"] == "news"

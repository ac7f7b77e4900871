"""`mkt contacts upsert` merges by default; `--replace` is the specification's full replace and
lists what it removed; `--tag` adds tags on a merge and sets them on a replace (issue 38,
section 5). The API keeps the specification's default (tests/contacts/test_api_contacts.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def ann(cli_json: Callable[..., Any], workspace: dict[str, Any]) -> dict[str, Any]:
    """Ann with two fields, two tags (vip, news) and the UNSUBSCRIBED status."""
    cli_json("fields", "create", "--label", "City", "--merge-tag", "city", "--type", "TEXT")
    vip, news = cli_json("tags", "create", "vip"), cli_json("tags", "create", "news")
    cli_json("tags", "create", "gold")
    cli_json("contacts", "upsert", "--email", "ann@example.com", "--field", "first_name=Ann", "--field",
             "city=Paris", "--tag", "vip", "--tag", "news", "--status", "UNSUBSCRIBED")
    return {"vip": vip, "news": news}


def names(contact: dict[str, Any]) -> list[str]:
    return sorted(t["name"] for t in contact["tags"])


def test_the_readme_command_merges_and_keeps_other_fields_tags_and_status(cli_json: Callable[..., Any],
                                                                          ann: dict[str, Any]) -> None:
    # README: mkt contacts upsert --email ann@example.com --field first_name=Ann ...
    c = cli_json("contacts", "upsert", "--email", "ann@example.com", "--field", "first_name=Anne")
    assert c["data"]["first_name"] == "Anne" and c["data"]["city"] == "Paris"
    assert names(c) == ["news", "vip"] and c["status"] == "UNSUBSCRIBED"


@pytest.mark.parametrize("flag", [(), ("--partial",)])
def test_tag_on_a_merge_is_added_to_the_other_tags(flag: tuple[str, ...], cli_json: Callable[..., Any],
                                                   cli: Callable[..., Any], ann: dict[str, Any]) -> None:
    """`--partial --tag 6` replaced every tag although --help said partial keeps them."""
    c = cli_json("contacts", "upsert", "--email", "ann@example.com", *flag, "--tag", "gold")
    assert names(c) == ["gold", "news", "vip"] and c["data"]["city"] == "Paris"
    help_text = " ".join(cli("contacts", "upsert", "--help").stdout.split())
    assert "--tag adds tags to the contact's" in help_text and "the tags become exactly the --tag ones" in help_text


def test_replace_sets_exactly_the_given_tags_and_lists_what_it_removed(cli: Callable[..., Any],
                                                                       ann: dict[str, Any]) -> None:
    result = cli("contacts", "upsert", "--email", "ann@example.com", "--replace", "--field", "first_name=Ann",
                 "--tag", "gold", "--json")
    assert result.exit_code == 0, result.stderr
    c = json.loads(result.stdout)  # stdout is the data alone; the list is on stderr
    assert names(c) == ["gold"] and c["data"]["city"] is None and c["status"] == "SUBSCRIBED"
    assert result.stderr.strip() == ("Replaced the contact; removed: field values city (Paris); tags vip, news; "
                                     "status UNSUBSCRIBED (now SUBSCRIBED: no --status was given).")
    again = cli("contacts", "upsert", "--email", "ann@example.com", "--replace", "--field", "first_name=Ann",
                "--tag", "gold")
    assert again.exit_code == 0 and again.stderr.strip() == "Replaced the contact: nothing was removed."


def test_replace_without_tag_removes_every_tag(cli_json: Callable[..., Any], ann: dict[str, Any]) -> None:
    assert cli_json("contacts", "upsert", "--email", "ann@example.com", "--replace")["tags"] == []


def test_a_new_contact_is_created_the_same_either_way_and_nothing_is_listed(cli: Callable[..., Any],
                                                                           ann: dict[str, Any]) -> None:
    for flag in ("--partial", "--replace"):
        result = cli("contacts", "upsert", "--email", f"new{flag}@example.com", flag, "--tag", "vip", "--json")
        assert result.exit_code == 0 and result.stderr == ""
        assert names(json.loads(result.stdout)) == ["vip"]


def test_a_body_that_says_partial_update_false_is_a_replace(cli: Callable[..., Any], ann: dict[str, Any]) -> None:
    body = json.dumps({"email_address": "ann@example.com", "partial_update": False})
    result = cli("contacts", "upsert", "--body", body, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["tags"] == []
    assert "removed" in result.stderr


def test_merge_and_replace_together_is_a_usage_error(cli: Callable[..., Any], ann: dict[str, Any]) -> None:
    result = cli("contacts", "upsert", "--email", "ann@example.com", "--partial", "--replace")
    assert result.exit_code == 2 and "not both" in result.stderr


def test_cli_json_equals_the_api_data_of_the_same_merge(cli_json: Callable[..., Any], client: Any,
                                                        auth: dict[str, str], ann: dict[str, Any]) -> None:
    api = client.post("/v1/contacts/upsert", headers=auth, json={
        "email_address": "ann@example.com", "partial_update": True, "tags": [ann["vip"]["id"]]}).json()["data"]
    cli = cli_json("contacts", "upsert", "--email", "ann@example.com", "--tag", "vip")
    assert cli == {**api, "updated_at": cli["updated_at"]}

"""Both faces of bulk tagging: POST /v1/tags/{id}/contacts[/remove] and `mkt contacts tag|untag
--search|--segment|--file TAG`; `--json` prints the API's data; errors carry the same message;
`mkt contacts tag CONTACT TAG...` keeps its one-contact behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.account import billing
from tests import factories as f

EMAILS = [f"p{i}@example.com" for i in range(4)]


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "automations", 5)
    w = {"ws": ws, "vip": f.tag(conn, ws, "vip"), "news": f.tag(conn, ws, "news"), "city": f.field(conn, ws, "city")}
    w["ids"] = {e: f.contact(conn, ws, e, city="Rome" if i % 2 else "Oslo")["id"] for i, e in enumerate(EMAILS)}
    w["flow"] = f.automation(conn, ws, {"name": "VIP", "triggers": [{"type": "tag_added", "tag": "vip"}],
                                        "steps": [{"id": "w", "type": "wait", "duration": {"days": 1}}]})["id"]
    return w


def _count(conn: Any, sql: str, *params: Any) -> int:
    return conn.execute(sql, params).fetchone()[0]


def test_the_api_tags_and_untags_a_search_and_a_list(client: Any, auth: dict[str, str], world: dict[str, Any],
                                                     conn: Any) -> None:
    vip = world["vip"]
    rome = {"search": {"fields": [{"merge_tag": "city", "operator": "EQUALS", "value": "Rome"}]}}
    answer = client.post(f"/v1/tags/{vip}/contacts", headers=auth, json=rome)
    assert answer.status_code == 200
    assert answer.json()["data"] == {"tag_id": vip, "selected": 2, "tagged": 2, "already_tagged": 0, "not_found": 0,
                                     "enrolled": 2}
    again = client.post(f"/v1/tags/{vip}/contacts", headers=auth, json={"emails": EMAILS[:2] + ["x@example.com"]})
    assert again.json()["data"] == {"tag_id": vip, "selected": 2, "tagged": 1, "already_tagged": 1, "not_found": 1,
                                    "enrolled": 1}
    removed = client.post(f"/v1/tags/{vip}/contacts/remove", headers=auth,
                          json={"contact_ids": list(world["ids"].values())})
    assert removed.json()["data"] == {"tag_id": vip, "selected": 4, "untagged": 3, "not_tagged": 1, "not_found": 0,
                                      "enrolled": 0}
    assert _count(conn, "SELECT count(*) FROM contact_events WHERE type = 'TAG_REMOVED'") == 3


@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/v1/tags/999/contacts", {"search": {}}, 404, "We couldn't find a tag with that ID in this workspace."),
    ("/v1/tags/abc/contacts", {"search": {}}, 400, "Please provide a valid tag ID."),
    ("/v1/tags/{vip}/contacts", {"emails": ["a@example.com"], "segment_id": 3}, 400, "Please provide exactly one of"),
    ("/v1/tags/{vip}/contacts", {"emails": ["nope"]}, 400, "is not an email address: 'nope' (entry 1)."),
    ("/v1/tags/{vip}/contacts", {"search": {"limit": 10}}, 400, "Unknown member 'search.limit'"),
    ("/v1/tags/{vip}/contacts", {"all": True}, 400, "Unknown member 'all'"),
    ("/v1/tags/{vip}/contacts/remove", {"segment_id": 77}, 404, "We were unable to find the segment."),
    ("/v1/tags/{vip}/contacts", {"contact_ids": "abc"}, 400, "contact_ids"),
])
def test_the_api_refuses_bad_requests_with_a_precise_message(client: Any, auth: dict[str, str], world: dict[str, Any],
                                                             conn: Any, path: str, body: Any, status: int,
                                                             message: str) -> None:
    answer = client.post(path.format(vip=world["vip"]), headers=auth, json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["data"] is None and message in answer.json()["error"]["message"]
    assert _count(conn, "SELECT count(*) FROM contact_tags") == 0


def test_the_cli_selectors_print_what_the_api_answers(cli_json: Any, client: Any, auth: dict[str, str],
                                                      world: dict[str, Any], tmp_path: Path, conn: Any) -> None:
    listed = tmp_path / "emails.txt"
    listed.write_text("# the VIPs\np0@example.com\n\nP1@Example.com\nnobody@example.com\n")
    by_file = cli_json("contacts", "tag", "--file", str(listed), "vip")
    assert by_file == {"tag_id": world["vip"], "selected": 2, "tagged": 2, "already_tagged": 0, "not_found": 1,
                       "enrolled": 2}
    by_search = cli_json("contacts", "tag", "--search", "city EQUALS Rome", "VIP")  # a tag by name, any case
    assert by_search == {"tag_id": world["vip"], "selected": 2, "tagged": 1, "already_tagged": 1, "not_found": 0,
                         "enrolled": 1}
    segment = f.segment(conn, world["ws"], "VIPs", {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [world["vip"]]}]})
    by_segment = cli_json("contacts", "tag", "--segment", str(segment["id"]), "news")
    assert (by_segment["selected"], by_segment["tagged"]) == (3, 3)
    api = client.post(f"/v1/tags/{world['news']}/contacts", headers=auth, json={"segment_id": segment["id"]})
    assert api.json()["data"] == {**by_segment, "tagged": 0, "already_tagged": 3}
    json_search = cli_json("contacts", "untag", "--search", '{"tags": [%d]}' % world["news"], str(world["news"]))
    assert json_search == {"tag_id": world["news"], "selected": 3, "untagged": 3, "not_tagged": 0, "not_found": 0,
                           "enrolled": 0}
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(world["ids"].values()))
    assert cli_json("contacts", "untag", "--file", str(ids), "vip")["untagged"] == 3


def test_the_cli_summary_and_its_errors(cli: Any, world: dict[str, Any], tmp_path: Path) -> None:
    done = cli("contacts", "tag", "--search", "{}", "vip")
    assert done.exit_code == 0
    assert "Tagged 4 of 4 selected contacts with tag" in done.stdout and "4 entered automations" in done.stdout
    two_tags = cli("contacts", "tag", "--search", "{}", "vip", "news")
    assert two_tags.exit_code == 2 and "exactly one TAG" in two_tags.stderr
    both = cli("contacts", "tag", "--search", "{}", "--segment", "1", "vip")
    assert both.exit_code == 2 and "one of --search, --segment or --file" in both.stderr
    unknown = cli("contacts", "tag", "--search", "{}", "nosuchtag")
    assert unknown.exit_code == 1 and "There is no tag named 'nosuchtag'" in unknown.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("p0@example.com\nnot an address\n")
    refused = cli("contacts", "tag", "--file", str(bad), "vip")
    assert refused.exit_code == 1 and "'not an address' (entry 2)" in refused.stderr
    missing = cli("contacts", "tag", "--file", str(tmp_path / "none.txt"), "vip")
    assert missing.exit_code == 2 and "cannot read" in missing.stderr


def test_one_contact_keeps_its_command(cli_json: Any, cli: Any, world: dict[str, Any]) -> None:
    shown = cli_json("contacts", "tag", "p0@example.com", "vip", "news")
    assert sorted(t["name"] for t in shown["tags"]) == ["news", "vip"]
    shown = cli_json("contacts", "untag", world["ids"]["p0@example.com"], "news")
    assert [t["name"] for t in shown["tags"]] == ["vip"]
    alone = cli("contacts", "tag", "p0@example.com")
    assert alone.exit_code == 2 and "at least one TAG" in alone.stderr


def test_a_list_of_100000_addresses_fits_in_a_body(client: Any, auth: dict[str, str], world: dict[str, Any]) -> None:
    listed = [f"someone.with.a.longer.name{i}@example.com" for i in range(99_999)] + EMAILS[:1]
    answer = client.post(f"/v1/tags/{world['vip']}/contacts", headers=auth, json={"emails": listed})
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == {"tag_id": world["vip"], "selected": 1, "tagged": 1, "already_tagged": 0,
                                     "not_found": 99_999, "enrolled": 1}

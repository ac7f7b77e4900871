"""DELETE /v1/<collection>/{id} for every resource but contacts, PATCH /v1/segments/{id} and
POST /v1/campaigns/{id}/archive over HTTP: the envelope of each family, 404 `Not found.` for a
repeated delete or another workspace's id, 409 with the message naming the user."""

from __future__ import annotations

from typing import Any

import pytest

from tests import factories as f
from tests.factories import error_of


def make_all(conn: Any, ws: int) -> dict[str, Any]:
    """One of each deletable resource, none in use."""
    from marketing_cli.services.sms import campaigns as sms_campaigns

    domain = f.domain(conn, ws, "shop.example")
    return {
        "tags": (f.tag(conn, ws, "vip"), "B"),
        "fields": (f.field(conn, ws, "city"), "B"),
        "segments": (f.segment(conn, ws, "S", {"condition": "AND", "filters": [
            {"type": "open_rate", "operator": "gte", "value": 1}]})["id"], "B"),
        "templates": (f.code_template(conn, ws, "<p>x</p>")["id"], "A"),
        "campaigns": (f.campaign(conn, ws)["id"], "A"),
        "sms-campaigns": (sms_campaigns.create_campaign(conn, ws, {"name": "Sms"})["id"], "A"),
        "automations": (f.step_flow(conn, ws, [{"id": "a", "type": "exit"}], publish=False)["id"], "A"),
        "sender-identities": (f.sender(conn, ws, domain["id"])["id"], "A"),
        "domains": (domain["id"], "A"),
    }


def test_every_resource_is_deleted_once_in_its_familys_envelope(conn: Any, workspace: dict[str, Any], client: Any,
                                                               auth: dict[str, str]) -> None:
    made = make_all(conn, workspace["id"])
    for collection, (item_id, envelope) in made.items():
        r = client.delete(f"/v1/{collection}/{item_id}", headers=auth)
        data = {"id": item_id, "deleted": True}
        assert r.status_code == 200, (collection, r.text)
        assert r.json() == ({"error": None, "data": data} if envelope == "A" else {"data": data}), collection
        assert error_of(client.delete(f"/v1/{collection}/{item_id}", headers=auth)) == (404, "Not found."), collection


def test_another_workspaces_resources_are_not_found_and_stay(conn: Any, workspace: dict[str, Any], client: Any,
                                                              auth: dict[str, str]) -> None:
    other = f.workspace(conn, "Other")
    theirs = make_all(conn, other["id"])
    for collection, (item_id, _) in theirs.items():
        assert error_of(client.delete(f"/v1/{collection}/{item_id}", headers=auth)) == (404, "Not found."), collection
    mine = {"Authorization": f"Bearer {other['api_key']}"}
    assert client.get(f"/v1/segments/{theirs['segments'][0]}", headers=mine).status_code == 200
    assert client.get(f"/v1/campaigns/{theirs['campaigns'][0]}", headers=mine).status_code == 200


@pytest.mark.parametrize(("path", "message"), [
    ("/v1/tags/x", "Please provide a valid tag ID."),
    ("/v1/segments/x", "Please provide a valid segment ID."),
    ("/v1/campaigns/x", "We could not find the campaign you are looking for."),
    ("/v1/sms-campaigns/x", "We could not find the campaign you are looking for."),
    ("/v1/sender-identities/x", "Please provide a valid sender identity ID."),
    ("/v1/domains/x", "Please provide a valid domain ID."),
])
def test_a_malformed_id_gets_the_resources_message(client: Any, auth: dict[str, str], path: str, message: str) -> None:
    assert error_of(client.delete(path, headers=auth)) == (400, message)


def test_in_use_is_409_naming_the_user(conn: Any, workspace: dict[str, Any], client: Any, auth: dict[str, str]) -> None:
    ws = workspace["id"]
    vip = f.tag(conn, ws, "vip")
    f.contact(conn, ws, "a@example.com", tags=[vip])
    campaign = f.queued_email_campaign(conn, ws, {"type": "TAGS", "include_tag_ids": [vip]})
    assert error_of(client.delete(f"/v1/tags/{vip}", headers=auth)) == (
        409, f"This tag is used by campaign {campaign} (QUEUED): wait for it to finish or cancel it first.")
    assert error_of(client.delete(f"/v1/campaigns/{campaign}", headers=auth)) == (
        409, "This campaign is QUEUED: wait for it to finish or cancel it first.")
    assert client.get("/v1/tags", headers=auth).json()["data"] == [{"id": vip, "name": "vip"}]


def test_a_sent_campaign_is_archived_then_deleted(conn: Any, workspace: dict[str, Any], client: Any,
                                                  auth: dict[str, str]) -> None:
    sent = f.sent_email_campaign(conn, workspace["id"], ["a@example.com"])
    assert error_of(client.delete(f"/v1/campaigns/{sent}", headers=auth)) == (
        409, "This campaign sent messages (SENT): archive it first.")
    r = client.post(f"/v1/campaigns/{sent}/archive", headers=auth)
    assert r.status_code == 200 and r.json() == {"error": None, "data": {"id": sent, "status": "ARCHIVED"}}
    assert client.get("/v1/campaigns?status=ARCHIVED", headers=auth).json()["data"]["pagination"]["total_count"] == 1
    assert error_of(client.delete(f"/v1/campaigns/{sent}", headers=auth))[0] == 409  # unsubscribe links: 30 days
    f.sent_long_ago(conn, sent)
    assert client.delete(f"/v1/campaigns/{sent}", headers=auth).json()["data"] == {"id": sent, "deleted": True}


def test_patch_a_segment(conn: Any, workspace: dict[str, Any], client: Any, auth: dict[str, str]) -> None:
    seg = f.segment(conn, workspace["id"], "Openers", {"condition": "AND", "filters": [
        {"type": "open_rate", "operator": "gte", "value": 1}]})
    r = client.patch(f"/v1/segments/{seg['id']}", json={"name": "Readers"}, headers=auth)
    assert r.status_code == 200 and r.json()["data"]["name"] == "Readers"
    assert set(r.json()) == {"data"}
    assert error_of(client.patch(f"/v1/segments/{seg['id']}", json={"filters": {"condition": "AND", "filters": []}},
                                 headers=auth)) == (400, "At least one filter is required")
    assert error_of(client.patch(f"/v1/segments/{seg['id']}", json={"colour": 1}, headers=auth))[0] == 400
    assert error_of(client.patch(f"/v1/segments/{seg['id']}", content=b"[", headers=auth)) == (
        400, "Invalid request body.")
    assert error_of(client.patch("/v1/segments/999", json={"name": "x"}, headers=auth)) == (
        404, "We were unable to find the segment.")


def test_a_deleted_campaigns_links_answer_404(conn: Any, workspace: dict[str, Any], client: Any,
                                              auth: dict[str, str], tmp_path: Any) -> None:
    """docs/sending.md: a deleted campaign's messages go with it, so its mailed links are unknown (once the
    30 days its unsubscribe links must work are over)."""
    import email
    import re

    sent = f.sent_email_campaign(conn, workspace["id"], ["a@example.com"])
    [eml] = list((tmp_path / "outbox").rglob("*.eml"))
    header = email.message_from_bytes(eml.read_bytes())["List-Unsubscribe"]
    link = re.sub(r"^https?://[^/]+", "", re.search(r"<([^>]+)>", header).group(1))
    assert client.get(link).status_code == 200
    client.post(f"/v1/campaigns/{sent}/archive", headers=auth)
    f.sent_long_ago(conn, sent)
    assert client.delete(f"/v1/campaigns/{sent}", headers=auth).status_code == 200
    assert client.get(link).status_code == 404

"""Deleting tags, fields and segments, and changing a segment (services/deletion/audience.py,
services/contacts/segments.update_segment): what goes, what refuses (409 naming the user, nothing
changed), 404 for a repeated delete or another workspace's id."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import segments
from marketing_cli.services.deletion import audience
from marketing_cli.storage import dialect, field_sql
from tests import factories as f


def refused(fn: Any, *args: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as err:
        fn(*args)
    return err.value.status, err.value.message


def tagged(conn: Any, tag_id: int) -> int:
    return conn.execute("SELECT count(*) FROM contact_tags WHERE tag_id = ?", (tag_id,)).fetchone()[0]


def events(conn: Any) -> int:
    return conn.execute("SELECT count(*) FROM contact_events").fetchone()[0]


def index_exists(conn: Any, field_id: int) -> bool:
    name = field_sql.index_name(field_id)
    sql = ("SELECT 1 FROM pg_indexes WHERE indexname = ?" if dialect.postgresql(conn)
           else "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?")
    return conn.execute(sql, (name,)).fetchone() is not None


@pytest.fixture
def ws(workspace: dict[str, Any]) -> int:
    return workspace["id"]


# --- tags --------------------------------------------------------------------------------------

def test_a_tag_leaves_its_contacts_in_one_go_without_events(conn: Any, ws: int) -> None:
    vip, other = f.tag(conn, ws, "vip"), f.tag(conn, ws, "other")
    for n in range(3):
        f.contact(conn, ws, f"t{n}@example.com", tags=[vip, other])
    before = events(conn)
    removal = audience.remove_tag(conn, ws, str(vip))
    assert removal.data == {"id": vip, "deleted": True}
    assert removal.effects == ["Tag vip removed from 3 contacts."]
    assert tagged(conn, vip) == 0 and tagged(conn, other) == 3
    assert events(conn) == before  # no TAG_REMOVED
    assert conn.execute("SELECT 1 FROM tags WHERE id = ?", (vip,)).fetchone() is None
    assert refused(audience.delete_tag, conn, ws, vip) == (404, "Not found.")


def test_a_tag_of_another_workspace_or_a_malformed_id(conn: Any, ws: int) -> None:
    theirs = f.tag(conn, f.workspace(conn, "Other")["id"], "vip")
    assert refused(audience.delete_tag, conn, ws, theirs) == (404, "Not found.")
    assert refused(audience.delete_tag, conn, ws, "abc") == (400, "Please provide a valid tag ID.")
    assert tagged(conn, theirs) == 0 and conn.execute("SELECT 1 FROM tags WHERE id = ?", (theirs,)).fetchone()


def test_a_tag_in_a_queued_campaigns_audience_is_refused(conn: Any, ws: int) -> None:
    vip = f.tag(conn, ws, "vip")
    f.contact(conn, ws, "a@example.com", tags=[vip])
    campaign = f.queued_email_campaign(conn, ws, {"type": "TAGS", "include_tag_ids": [vip]})
    assert refused(audience.delete_tag, conn, ws, vip) == (
        409, f"This tag is used by campaign {campaign} (QUEUED): wait for it to finish or cancel it first.")
    assert tagged(conn, vip) == 1


def test_a_tag_an_sms_campaign_excludes_is_refused(conn: Any, ws: int) -> None:
    vip = f.tag(conn, ws, "vip")
    campaign = f.queued_sms_campaign(conn, ws, [{"type": "ENTIRE_AUDIENCE", "exclude_tag_ids": [vip]}])
    assert refused(audience.delete_tag, conn, ws, vip) == (
        409, f"This tag is used by SMS campaign {campaign} (QUEUED): wait for it to finish or cancel it first.")


def test_a_tag_an_active_flow_adds_is_refused_until_archived(conn: Any, ws: int) -> None:
    from marketing_cli.services.automations import flows

    vip = f.tag(conn, ws, "vip")
    flow = f.step_flow(conn, ws, [{"id": "a", "type": "add_tag", "tag": "vip"}])
    assert refused(audience.delete_tag, conn, ws, vip) == (
        409, f"This tag is used by automation {flow['id']} (Flow, ACTIVE): archive the automation first.")
    flows.archive_automation(conn, ws, flow["id"])
    assert audience.delete_tag(conn, ws, vip) == {"id": vip, "deleted": True}


def test_a_tag_a_segment_filters_on_is_refused(conn: Any, ws: int) -> None:
    vip = f.tag(conn, ws, "vip")
    seg = f.segment(conn, ws, "VIPs", {"condition": "AND",
                                       "filters": [{"type": "tags", "operator": "contains", "value": [vip]}]})
    assert refused(audience.delete_tag, conn, ws, vip) == (
        409, f"This tag is used by segment {seg['id']} (VIPs): change the segment's filters or delete the segment"
             " first.")


# --- fields ------------------------------------------------------------------------------------

def test_a_field_leaves_every_contact_with_its_index(conn: Any, ws: int) -> None:
    city = f.field(conn, ws, "city")
    zip_ = f.field(conn, ws, "zip")
    f.contact(conn, ws, "a@example.com", city="Paris", zip="75001")
    f.contact(conn, ws, "b@example.com", city="Lyon")
    f.contact(conn, ws, "c@example.com", zip="13001")
    before = events(conn)
    assert index_exists(conn, city)
    removal = audience.remove_field(conn, ws, city)
    assert removal.data == {"id": city, "deleted": True}
    assert removal.effects == ["Field city: values removed from 2 contacts."]
    assert not index_exists(conn, city) and index_exists(conn, zip_)
    datas = [r[0] for r in conn.execute("SELECT data FROM contacts ORDER BY email")]
    assert all(f'"{city}"' not in d for d in datas) and sum(f'"{zip_}"' in d for d in datas) == 2
    assert events(conn) == before
    assert refused(audience.delete_field, conn, ws, city) == (404, "Not found.")
    assert refused(audience.delete_field, conn, ws, "x") == (404, "We were unable to find the field.")


def test_built_in_email_cannot_go_and_another_workspace_is_404(conn: Any, ws: int) -> None:
    email = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'email_address'",
                         (ws,)).fetchone()[0]
    assert refused(audience.delete_field, conn, ws, email) == (400, "This field is immutable and cannot be deleted.")
    theirs = f.field(conn, f.workspace(conn, "Other")["id"], "city")
    assert refused(audience.delete_field, conn, ws, theirs) == (404, "Not found.")


def test_the_phone_number_field_empties_the_phone_column(conn: Any, ws: int) -> None:
    f.sms_ready(conn, ws, balance=None, sender=None)
    f.sms_contacts(conn, ws, ["+14155550101", "+14155550102"])
    phone = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'phone_number'",
                         (ws,)).fetchone()[0]
    assert audience.remove_field(conn, ws, phone).effects == ["Field phone_number: values removed from 2 contacts."]
    assert conn.execute("SELECT count(*) FROM contacts WHERE phone IS NOT NULL").fetchone()[0] == 0


def test_the_phone_number_field_of_a_queued_sms_campaign_is_refused(conn: Any, ws: int) -> None:
    campaign = f.queued_sms_campaign(conn, ws, message="Sale today. Reply STOP to opt out.")
    phone = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'phone_number'",
                         (ws,)).fetchone()[0]
    assert refused(audience.delete_field, conn, ws, phone) == (
        409, f"This field is used by SMS campaign {campaign} (QUEUED): wait for it to finish or cancel it first.")


def test_a_field_a_segment_reads_is_refused(conn: Any, ws: int) -> None:
    city = f.field(conn, ws, "city")
    f.contact(conn, ws, "a@example.com", city="Paris")
    seg = f.segment(conn, ws, "Parisians", {"condition": "AND", "filters": [
        {"type": "field", "field_id": city, "operator": "eq", "value": "Paris"}]})
    assert refused(audience.delete_field, conn, ws, city) == (
        409, f"This field is used by segment {seg['id']} (Parisians): change the segment's filters or delete the"
             " segment first.")
    assert index_exists(conn, city) and f'"{city}"' in conn.execute("SELECT data FROM contacts").fetchone()[0]


def test_a_merge_tag_in_a_template_is_refused_but_a_longer_tag_is_not_it(conn: Any, ws: int) -> None:
    city = f.field(conn, ws, "city")
    f.field(conn, ws, "city_code")
    f.code_template(conn, ws, "<p>{{ contact.city_code }}</p>", name="Codes")
    template = f.code_template(conn, ws, "<p>Hello from {{ contact.city | Paris }}</p>", name="Cities")
    assert refused(audience.delete_field, conn, ws, city) == (
        409, f"This field is used by template {template['id']} (Cities) as {{{{contact.city}}}}: remove it from the"
             " template first.")


def test_a_merge_tag_in_a_draft_campaign_and_in_a_draft_flow_is_refused(conn: Any, ws: int) -> None:
    from marketing_cli.services.email import campaigns

    city = f.field(conn, ws, "city")
    draft = f.campaign(conn, ws)
    campaigns.configure_campaign(conn, ws, draft["id"], {"variants": [{"type": "A", "subject": "Hi {{contact.city}}"}]})
    assert refused(audience.delete_field, conn, ws, city) == (
        409, f"This field is used by campaign {draft['id']} (DRAFT) as {{{{contact.city}}}}: remove it from the"
             " campaign first.")
    campaigns.configure_campaign(conn, ws, draft["id"], {"variants": [{"type": "A", "subject": "Hi there"}]})
    flow = f.step_flow(conn, ws, [{"id": "a", "type": "set_field", "field": "city", "value": "Paris"}], publish=False)
    assert refused(audience.delete_field, conn, ws, city) == (
        409, f"This field is used by the draft of automation {flow['id']} (Flow, DRAFT): remove it from the flow"
             " first.")


def test_a_field_an_active_flow_sets_is_refused(conn: Any, ws: int) -> None:
    city = f.field(conn, ws, "city")
    flow = f.step_flow(conn, ws, [{"id": "a", "type": "set_field", "field": "city", "value": "Paris"}])
    assert refused(audience.delete_field, conn, ws, city) == (
        409, f"This field is used by automation {flow['id']} (Flow, ACTIVE): archive the automation first.")


# --- segments ----------------------------------------------------------------------------------

FILTERS = {"condition": "AND", "filters": [{"type": "open_rate", "operator": "gte", "value": 10}]}


def test_a_segment_goes_and_its_count_with_it(conn: Any, ws: int) -> None:
    seg = f.segment(conn, ws, "Openers", FILTERS)
    used = "SELECT used FROM usage_counters WHERE workspace_id = ? AND resource = 'segments'"
    assert conn.execute(used, (ws,)).fetchone()[0] == 1
    assert audience.remove_segment(conn, ws, seg["id"]).data == {"id": seg["id"], "deleted": True}
    assert conn.execute(used, (ws,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM jobs WHERE dedupe_key = ? AND status = 'queued'",
                        (segments.count_key(seg["id"]),)).fetchone()[0] == 0
    assert refused(audience.delete_segment, conn, ws, seg["id"]) == (404, "Not found.")
    assert refused(audience.delete_segment, conn, ws, "nope") == (400, "Please provide a valid segment ID.")


def test_a_segment_in_a_queued_audience_or_an_active_trigger_is_refused(conn: Any, ws: int) -> None:
    email = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'email_address'",
                         (ws,)).fetchone()[0]
    seg = f.segment(conn, ws, "Ours", {"condition": "AND", "filters": [
        {"type": "field", "field_id": email, "operator": "ends_with", "value": "@example.com"}]})
    campaign = f.queued_email_campaign(conn, ws, {"type": "SEGMENTS", "include_segment_ids": [seg["id"]]})
    assert refused(audience.delete_segment, conn, ws, seg["id"]) == (
        409, f"This segment is used by campaign {campaign} (QUEUED): wait for it to finish or cancel it first.")
    from marketing_cli.services.email import schedule

    schedule.cancel_campaign(conn, ws, campaign)
    flow = f.step_flow(conn, ws, [{"id": "a", "type": "exit"}],
                       triggers=[{"type": "segment_entered", "segment_id": seg["id"]}])
    assert refused(audience.delete_segment, conn, ws, seg["id"]) == (
        409, f"This segment is used by automation {flow['id']} (Flow, ACTIVE): archive the automation first.")


def test_patch_a_segment_renames_and_refilters_with_creates_rules(conn: Any, ws: int) -> None:
    seg = f.segment(conn, ws, "Openers", FILTERS)
    conn.execute("UPDATE jobs SET status = 'done' WHERE dedupe_key = ?", (segments.count_key(seg["id"]),))
    renamed = segments.update_segment(conn, ws, seg["id"], {"name": "Readers"})
    assert renamed["name"] == "Readers" and renamed["filters"] == seg["filters"] and renamed["counting"] is False
    clickers = {"condition": "OR", "filters": [{"type": "click_rate", "operator": "gt", "value": 5}]}
    changed = segments.update_segment(conn, ws, seg["id"], {"filters": clickers})
    assert changed["filters"] == clickers and changed["name"] == "Readers" and changed["counting"] is True
    assert refused(segments.update_segment, conn, ws, seg["id"], {"name": ""}) == (
        400, "Please provide a name for this segment")
    assert refused(segments.update_segment, conn, ws, seg["id"], {"name": "x" * 65}) == (
        400, "Segment name must be 64 characters or less")
    assert refused(segments.update_segment, conn, ws, seg["id"], {"filters": {"condition": "XOR"}}) == (
        400, "Filter condition must be AND or OR")
    assert refused(segments.update_segment, conn, ws, seg["id"], {"filters": {"condition": "AND", "filters": [
        {"type": "field", "field_id": 999, "operator": "eq", "value": "x"}]}}) == (
        400, "Filter #1: The specified field_id does not exist")
    assert refused(segments.update_segment, conn, ws, 999, {"name": "x"}) == (404, "We were unable to find the segment.")
    assert segments.get_segment(conn, ws, seg["id"])["name"] == "Readers"

"""Variant HTML: set (cleaned, CODE, body_json cleared, warnings), read, edit lock, preview job."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.services.email import campaigns as c
from marketing_cli.services.email import variant_html as h
from tests import factories as f

EMAIL = """<!DOCTYPE html><html><head><style>@media (max-width:600px){.col{width:100%!important}}</style></head>
<body><table width="600" align="center" cellpadding="0" bgcolor="#ffffff"><tr><td class="col" style="padding:8px">
<h1>Hello {{contact.first_name|friend}}</h1><p>Our <a href="https://shop.example/sale">spring sale</a> is on.</p>
<img src="https://cdn.example/logo.png" alt="Logo"><script>alert(1)</script>
<a href="{{unsubscribe_url}}" onclick="steal()">Unsubscribe</a></td></tr></table></body></html>"""


def err(fn: Any, *args: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as info:
        fn(*args)
    return info.value.status, info.value.message


@pytest.fixture
def campaign(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    return f.campaign(conn, workspace["id"], "AB", "AB_TESTING")


def test_set_html_cleans_and_stores_a_code_variant(conn: Any, workspace: dict[str, Any],
                                                   campaign: dict[str, Any]) -> None:
    out = h.set_variant_html(conn, workspace["id"], campaign["id"], "b", {"html": EMAIL})
    assert set(out) == {"id", "type", "template_type", "body_json", "body_html", "warnings"}
    assert out["id"] == campaign["variants"][1]["id"] and out["type"] == "B"
    assert out["template_type"] == "CODE" and out["body_json"] is None and out["warnings"] == []
    body = out["body_html"]
    assert "<script" not in body and "alert(1)" not in body and "onclick" not in body
    assert "{{preview_text}}" in body and "display:none" in body.replace(" ", "")
    for kept in ("https://shop.example/sale", "https://cdn.example/logo.png", "{{contact.first_name|friend}}",
                 "{{unsubscribe_url}}", "spring sale"):
        assert kept in body
    assert h.get_variant_html(conn, workspace["id"], campaign["id"], "B") == {
        k: v for k, v in out.items() if k != "warnings"}
    variant = c.get_campaign(conn, workspace["id"], campaign["id"])["variants"][1]
    assert variant["template_type"] == "CODE"
    assert c.get_campaign(conn, workspace["id"], campaign["id"])["variants"][0]["template_type"] == "EDITOR"


def test_unknown_merge_tags_are_warnings(conn: Any, workspace: dict[str, Any], campaign: dict[str, Any]) -> None:
    out = h.set_variant_html(conn, workspace["id"], campaign["id"], "A",
                             {"html": "<p>{{contact.nickname}} {{ coupon }} {{contact.first_name}}</p>"})
    assert out["warnings"] == [h.UNKNOWN_TAG_WARNING.format(tag="{{contact.nickname}}"),
                               h.UNKNOWN_TAG_WARNING.format(tag="{{coupon}}")]
    assert "{{contact.nickname}}" in out["body_html"]


@pytest.mark.parametrize(("campaign_id", "variant", "body", "status", "message"), [
    ("", "A", {"html": "x"}, 400, c.ID_REQUIRED),
    (None, "C", {"html": "x"}, 400, c.VARIANT_TYPE_INVALID),
    (None, "A", {}, 400, h.HTML_REQUIRED),
    (None, "A", {"html": "  \n "}, 400, h.HTML_REQUIRED),
    (None, "A", {"html": 5}, 400, "The member 'html' must be a string."),
    (None, "A", "html", 400, c.INVALID_BODY),
    ("f" * 24, "A", {"html": "x"}, 400, c.NOT_FOUND),
    ("bad", "A", {"html": "x"}, 400, c.NOT_FOUND),
])
def test_set_html_messages(conn: Any, workspace: dict[str, Any], campaign: dict[str, Any], campaign_id: Any,
                           variant: str, body: Any, status: int, message: str) -> None:
    cid = campaign["id"] if campaign_id is None else campaign_id
    assert err(h.set_variant_html, conn, workspace["id"], cid, variant, body) == (status, message)


def test_variant_b_of_a_single_variant_campaign_is_not_found(conn: Any, workspace: dict[str, Any]) -> None:
    single = f.campaign(conn, workspace["id"])
    assert err(h.set_variant_html, conn, workspace["id"], single["id"], "B", {"html": "<p>x</p>"}) == \
        (400, c.VARIANT_NOT_FOUND)
    assert err(h.get_variant_html, conn, workspace["id"], single["id"], "b") == (400, c.VARIANT_NOT_FOUND)


@pytest.mark.parametrize("status", ["PREPROCESSING", "IN_REVIEW"])
def test_html_is_locked_while_the_campaign_is_reviewed(conn: Any, workspace: dict[str, Any],
                                                       campaign: dict[str, Any], status: str) -> None:
    h.set_variant_html(conn, workspace["id"], campaign["id"], "A", {"html": "<p>before</p>"})
    c.set_campaign_status(conn, campaign["id"], "QUEUED")
    c.set_campaign_status(conn, campaign["id"], "PREPROCESSING")
    if status == "IN_REVIEW":
        c.set_campaign_status(conn, campaign["id"], "IN_REVIEW")
    assert err(h.set_variant_html, conn, workspace["id"], campaign["id"], "A", {"html": "<p>after</p>"}) == \
        (400, h.LOCKED)
    assert "before" in h.get_variant_html(conn, workspace["id"], campaign["id"], "A")["body_html"]


def test_html_can_be_set_in_other_states(conn: Any, workspace: dict[str, Any], campaign: dict[str, Any]) -> None:
    c.set_campaign_status(conn, campaign["id"], "QUEUED")
    assert h.set_variant_html(conn, workspace["id"], campaign["id"], "A", {"html": "<p>queued</p>"})["body_html"]


def test_another_workspace_cannot_read_or_write(conn: Any, workspace: dict[str, Any],
                                                campaign: dict[str, Any]) -> None:
    other = f.workspace(conn, "Other workspace")
    assert err(h.get_variant_html, conn, other["id"], campaign["id"], "A") == (400, c.NOT_FOUND)
    assert err(h.set_variant_html, conn, other["id"], campaign["id"], "A", {"html": "<p>x</p>"}) == \
        (400, c.NOT_FOUND)


# --- the preview thumbnail ---------------------------------------------------------------------

def _run_jobs(conn: Any) -> list[Any]:
    owner, done = jobs.new_owner(), []
    while (job := jobs.claim(conn, owner)) is not None:
        done.append(jobs.load_handlers()[job["type"]](conn, __import__("json").loads(job["payload"])))
        jobs.complete(conn, job["id"], owner)
    return done


def test_setting_html_queues_one_preview_job_per_variant(conn: Any, workspace: dict[str, Any],
                                                         campaign: dict[str, Any]) -> None:
    for text in ("<p>one</p>", "<p>two</p>"):
        h.set_variant_html(conn, workspace["id"], campaign["id"], "A", {"html": text})
    queued = conn.execute("SELECT COUNT(*) FROM jobs WHERE type = 'campaign.preview' AND status = 'queued'")
    assert queued.fetchone()[0] == 1


def test_preview_job_draws_an_svg_and_sets_preview_url(conn: Any, workspace: dict[str, Any],
                                                       campaign: dict[str, Any], monkeypatch: Any) -> None:
    monkeypatch.setenv("MKT_PUBLIC_URL", "https://mkt.example/")
    c.configure_campaign(conn, workspace["id"], campaign["id"], {"variants": [
        {"type": "A", "subject": "Spring <sale> & more"}, {"type": "B", "subject": "Other"}]})
    h.set_variant_html(conn, workspace["id"], campaign["id"], "A", {"html": EMAIL})
    [result] = _run_jobs(conn)
    url = c.get_campaign(conn, workspace["id"], campaign["id"])["variants"][0]["preview_url"]
    assert result == {"preview": url}
    assert url.startswith(f"https://mkt.example/v1/campaigns/{campaign['id']}/variants/A/preview?v=")
    content_type, svg = h.get_variant_preview(conn, workspace["id"], campaign["id"], "a")
    text = svg.decode()
    assert content_type == "image/svg+xml" and text.startswith("<svg")
    assert "Spring &lt;sale&gt; &amp; more" in text and "Hello friend" not in text and "Hello {{contact" in text
    assert "alert" not in text and "@media" not in text
    import xml.dom.minidom

    xml.dom.minidom.parseString(svg)  # well-formed
    # Idempotent: running it again (a worker died after the work) changes nothing.
    assert h.regenerate_preview(conn, {"variant_id": campaign["variants"][0]["id"]}) == {"preview": url}


def test_preview_before_any_html_is_404_and_handler_tolerates_a_deleted_variant(
        conn: Any, workspace: dict[str, Any], campaign: dict[str, Any]) -> None:
    assert err(h.get_variant_preview, conn, workspace["id"], campaign["id"], "A") == (404, h.NO_PREVIEW)
    assert h.regenerate_preview(conn, {"variant_id": "f" * 24}) == {"preview": None}


def test_a_new_subject_redraws_the_preview(conn: Any, workspace: dict[str, Any], campaign: dict[str, Any]) -> None:
    body = {"variants": [{"type": "A", "subject": "First subject"}, {"type": "B", "subject": "Other"}]}
    c.configure_campaign(conn, workspace["id"], campaign["id"], body)
    assert _run_jobs(conn) == []  # no HTML yet: nothing to draw
    h.set_variant_html(conn, workspace["id"], campaign["id"], "A", {"html": "<p>x</p>"})
    _run_jobs(conn)
    first = c.get_campaign(conn, workspace["id"], campaign["id"])["variants"][0]["preview_url"]
    body["variants"][0]["subject"] = "Second subject"
    c.configure_campaign(conn, workspace["id"], campaign["id"], body)
    _run_jobs(conn)
    second = c.get_campaign(conn, workspace["id"], campaign["id"])["variants"][0]["preview_url"]
    assert first != second
    assert b"Second subject" in h.get_variant_preview(conn, workspace["id"], campaign["id"], "A")[1]


def test_html_from_a_code_template(conn: Any, workspace: dict[str, Any], campaign: dict[str, Any]) -> None:
    from marketing_cli.services.email import templates

    template_id = f.code_template(conn, workspace["id"], EMAIL)["id"]
    out = h.set_variant_html(conn, workspace["id"], campaign["id"], "A", {"template_id": template_id})
    assert out["template_type"] == "CODE" and "spring sale" in out["body_html"] and "<script" not in out["body_html"]
    assert out["body_html"] == h.set_variant_html(conn, workspace["id"], campaign["id"], "B",
                                                  {"html": EMAIL})["body_html"]
    assert err(h.set_variant_html, conn, workspace["id"], campaign["id"], "A",
               {"template_id": template_id, "html": "<p>x</p>"}) == (400, h.HTML_OR_TEMPLATE)
    assert err(h.set_variant_html, conn, workspace["id"], campaign["id"], "A", {"template_id": 999}) == \
        (404, templates.NOT_FOUND)
    other = f.workspace(conn, "Other workspace")
    foreign = f.code_template(conn, other["id"], "<p>theirs</p>")["id"]
    assert err(h.set_variant_html, conn, workspace["id"], campaign["id"], "A", {"template_id": foreign}) == \
        (404, templates.NOT_FOUND)


def test_an_editor_template_has_no_html_for_a_variant(conn: Any, workspace: dict[str, Any],
                                                      campaign: dict[str, Any]) -> None:
    from marketing_cli.services.email import templates

    editor = templates.create_template(conn, workspace["id"], {"name": "Drag and drop", "type": "editor"})["id"]
    assert err(h.set_variant_html, conn, workspace["id"], campaign["id"], "A", {"template_id": editor}) == \
        (400, templates.NO_HTML.format(id=editor))


def test_a_fallback_that_would_not_stand_is_a_400_and_nothing_is_stored(conn: Any, workspace: dict[str, Any],
                                                                        campaign: dict[str, Any]) -> None:
    before = h.get_variant_html(conn, workspace["id"], campaign["id"], "A")
    html = '<p>Hi</p><a href="{{contact.website|javascript:alert(1)}}">site</a>'
    status, message = err(h.set_variant_html, conn, workspace["id"], campaign["id"], "A", {"html": html})
    assert status == 400 and message == ("The fallback of {{contact.website}} cannot stand where it is written: "
                                         "href takes only an http(s), mailto or tel URL.")
    assert h.get_variant_html(conn, workspace["id"], campaign["id"], "A") == before

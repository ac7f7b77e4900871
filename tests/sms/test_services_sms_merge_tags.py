"""SMS merge tags are email's: the same tags, the same `|fallback`, the same checks; a tag an
SMS cannot serve or the workspace does not define is refused at update and at schedule; a
message as sent and its price never hold a raw `{{...}}`."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel.merge import compile_template
from marketing_cli.services.contacts import merge_tags
from marketing_cli.services.contacts.fields import update_field
from marketing_cli.services.sms import campaigns, render, schedule
from tests import factories as f

US = ["+14155550101", "+14155550102", "+14155550103"]
STOP = " Reply STOP to opt out."


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    return workspace["id"]


def sent(conn: sqlite3.Connection, campaign: dict[str, Any]) -> dict[str, sqlite3.Row]:
    """Schedule, run the job, and answer each recipient's message row by number."""
    assert schedule.schedule_campaign(conn, campaign["workspace_id"], campaign["id"],
                                      {"schedule_type": "NOW"})["status"] == "QUEUED"
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    return {r["phone"]: r for r in conn.execute(
        "SELECT phone, COALESCE(body, ?) AS text, segments, price_units FROM sms_messages WHERE campaign_id = ?",
        (campaign["message"], campaign["id"]))}


def charged(conn: sqlite3.Connection, campaign_id: str) -> Decimal:
    return -sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ?",
                                                      (campaign_id,))), Decimal(0))


def refused(conn: sqlite3.Connection, call: Any, *args: Any) -> str:
    with pytest.raises(MktError) as err:
        call(conn, *args)
    assert err.value.status == 400
    return err.value.message


# --- rendering ---------------------------------------------------------------------------

def test_a_fallback_is_sent_and_charged_as_rendered(conn: sqlite3.Connection, ws: int) -> None:
    """The issue: `Hi {{contact.first_name|there}}` went out literally and was charged for it."""
    f.sms_contacts(conn, ws, [US[0]], first_name="Al")
    f.sms_contacts(conn, ws, [US[1]])  # no first name: the fallback
    f.sms_contacts(conn, ws, [US[2]], first_name="Zoë")  # UCS-2 for this one
    long_fallback = "y" * 30
    message = "x" * 140 + " {{ contact.first_name | " + long_fallback + " }}" + STOP  # spaces are allowed
    campaign = f.sms_campaign(conn, ws, message=message)
    rows = sent(conn, campaign)
    assert rows[US[0]]["text"] == "x" * 140 + " Al" + STOP
    assert rows[US[1]]["text"] == "x" * 140 + " " + long_fallback + STOP
    assert (rows[US[0]]["segments"], rows[US[0]]["price_units"]) == (2, 1660)  # 166 characters
    assert (rows[US[1]]["segments"], rows[US[1]]["price_units"]) == (2, 1660)  # 194 characters
    assert (rows[US[2]]["segments"], rows[US[2]]["price_units"]) == (3, 2490)  # 167 UCS-2 units
    assert charged(conn, campaign["id"]) == Decimal("0.05810")
    estimated = conn.execute("SELECT estimated_cost FROM sms_campaigns WHERE id = ?", (campaign["id"],)).fetchone()[0]
    assert Decimal(estimated) == charged(conn, campaign["id"])  # the estimate rendered the same texts


def test_the_fallback_decides_the_segments_and_the_price(conn: sqlite3.Connection, ws: int) -> None:
    f.sms_contacts(conn, ws, [US[0]], first_name="Al")
    f.sms_contacts(conn, ws, [US[1]])
    message = "x" * 150 + "{{contact.first_name|" + "y" * 20 + "}}"
    campaign = f.sms_campaign(conn, ws, message=message)
    assert schedule.estimate_cost(conn, ws, message, campaign["audience"]) == (Decimal("0.02490"), 2)
    rows = sent(conn, campaign)
    assert (rows[US[0]]["segments"], rows[US[0]]["price_units"]) == (1, 830)  # 152 characters
    assert (rows[US[1]]["segments"], rows[US[1]]["price_units"]) == (2, 1660)  # 170 characters
    assert charged(conn, campaign["id"]) == Decimal("0.02490")


def test_workspace_and_system_tags_render_once_for_everyone(conn: sqlite3.Connection, ws: int) -> None:
    f.sms_contacts(conn, ws, US[:2], first_name="Ann")
    campaign = f.sms_campaign(conn, ws, message="News from {{workspace.name}} ({{current_date}}){{preview_text|!}}"
                                                + STOP)
    rows = sent(conn, campaign)
    today = conn.execute("SELECT created_at FROM sms_messages LIMIT 1").fetchone()[0][:10]
    assert {r["text"] for r in rows.values()} == {f"News from Test workspace ({today})!" + STOP}
    assert conn.execute("SELECT COUNT(*) FROM sms_messages WHERE body IS NULL").fetchone()[0] == 0


def test_a_message_of_known_tags_never_stores_a_raw_tag(conn: sqlite3.Connection, ws: int) -> None:
    f.field(conn, ws, "city", "TEXT", default_value="your city")
    f.field(conn, ws, "vip", "BOOLEAN")
    f.sms_contacts(conn, ws, [US[0]], first_name="Ann", city="Lyon", vip=True)
    f.sms_contacts(conn, ws, [US[1]])
    for message in ["Hi {{contact.first_name|there}} in {{contact.city}} from {{workspace.name}}." + STOP,
                    "{{contact.vip|no}} {{contact.first_name}} {{contact.phone_number}} {{server_time}}" + STOP]:
        campaign = f.sms_campaign(conn, ws, message=message)
        rows = sent(conn, campaign)
        assert len(rows) == 2 and not any("{{" in r["text"] or "}}" in r["text"] for r in rows.values())
    texts = [r[0] for r in conn.execute("SELECT body FROM sms_outbox")]
    assert len(texts) == 4 and not any("{{" in t for t in texts)
    assert "Hi there in your city from Test workspace." + STOP in texts


def test_expansion_renders_every_value_as_email_does(conn: sqlite3.Connection, ws: int) -> None:
    """The SQL rendering and email's Python rendering (Renderer.values_for + Template.render)
    agree on every field type, default and fallback: one language for both channels."""
    f.field(conn, ws, "age", "NUMBER", default_value="18")
    f.field(conn, ws, "born", "DATE")
    f.field(conn, ws, "size", "DROPDOWN_SINGLE", definition="S,M,L")
    f.field(conn, ws, "langs", "DROPDOWN_MULTIPLE", definition="en,fr,de")
    f.field(conn, ws, "land", "COUNTRY")
    f.field(conn, ws, "city", "TEXT", default_value="Zürich")
    values: list[dict[str, Any]] = [
        {"first_name": "Ann", "age": 41, "born": "1990-02-03", "size": "M", "langs": "en,fr", "land": "fr",
         "city": "O'Hara"},
        {"age": 2.5}, {"age": "41.0"}, {"age": 0}, {"first_name": "Zoë", "langs": "de"}, {},
    ]
    for i, extra in enumerate(values):
        f.sms_contacts(conn, ws, [f"+1415555{i:04d}"], **extra)
    tags = "{{contact.first_name|friend}} {{contact.age}} {{contact.born|?}} {{contact.size}} {{contact.land}}" \
           " {{contact.city}} {{contact.email_address}} {{contact.phone_number}} {{workspace.name}}"
    for message in [tags + STOP, tags + " {{contact.langs|none}}" + STOP]:  # SQL only / through Python
        campaign = f.sms_campaign(conn, ws, message=message)
        rows = sent(conn, campaign)
        email = merge_tags.Renderer(conn, ws)
        template = compile_template(message)
        contacts = conn.execute("SELECT email, phone, data FROM contacts WHERE workspace_id = ?", (ws,)).fetchall()
        assert {c["phone"]: template.render(email.values_for(c)) for c in contacts} == \
            {phone: r["text"] for phone, r in rows.items()}
    assert rows["+14155550001"]["text"].startswith("friend 2.5 ? ")
    assert rows["+14155550002"]["text"].startswith("friend 41 ? ")  # a whole float is written as email writes it


# --- refused at update and at schedule ------------------------------------------------------

@pytest.mark.parametrize(("message", "expected"), [
    ("Hi {{first_name}}", render.UNKNOWN_TAG.format(tag="{{first_name}}")
     + render.DID_YOU_MEAN.format(tag="{{contact.first_name}}")),
    ("Hi {{ nickname | you }}", render.UNKNOWN_TAG.format(tag="{{nickname}}")),
    ("Hi {{contact.nickname|you}}", render.UNKNOWN_MERGE_TAG.format(tag="{{contact.nickname}}")),
    ("Bye: {{unsubscribe_url}}", render.UNSUPPORTED_TAG.format(tag="{{unsubscribe_url}}")),
    ("See {{ view_online_url }}", render.UNSUPPORTED_TAG.format(tag="{{view_online_url}}")),
    ("Manage {{preferences_url|here}}", render.UNSUPPORTED_TAG.format(tag="{{preferences_url}}")),
    ("Hi {{contact.first name}}", render.NOT_A_TAG.format(text="{{contact.first name}}")),
    ("Hi {{contact.first_name|a{b}}", render.NOT_A_TAG.format(text="{{contact.first_name|a")),
])
def test_a_tag_sms_cannot_send_is_refused_at_update(conn: sqlite3.Connection, ws: int, message: str,
                                                    expected: str) -> None:
    campaign = f.sms_campaign(conn, ws, message="Hello." + STOP)
    assert refused(conn, campaigns.update_campaign, ws, campaign["id"], {"message": message}) == expected
    assert campaigns.get_campaign(conn, ws, campaign["id"]) == campaign  # nothing written


def test_the_messages_name_the_tag() -> None:
    assert render.UNKNOWN_TAG.format(tag="{{first_name}}") + render.DID_YOU_MEAN.format(
        tag="{{contact.first_name}}") == ("The merge tag {{first_name}} is not a merge tag of this workspace."
                                          " Did you mean {{contact.first_name}}?")
    assert render.UNSUPPORTED_TAG.format(tag="{{unsubscribe_url}}") == (
        "The merge tag {{unsubscribe_url}} cannot be used in an SMS: an SMS has no unsubscribe, view online or"
        " preferences link (recipients reply STOP to opt out).")
    assert render.NOT_A_TAG.format(text="{{contact.first name}}") == (
        "The message contains '{{contact.first name}}', which is not a merge tag: write {{contact.<merge_tag>}},"
        " or {{contact.<merge_tag>|fallback}} for a fallback.")


@pytest.mark.parametrize(("message", "expected"), [
    ("Hi {{first_name}}" + STOP, render.UNKNOWN_TAG.format(tag="{{first_name}}")
     + render.DID_YOU_MEAN.format(tag="{{contact.first_name}}")),
    ("Bye {{unsubscribe_url}}" + STOP, render.UNSUPPORTED_TAG.format(tag="{{unsubscribe_url}}")),
])
def test_a_tag_sms_cannot_send_is_refused_at_schedule(conn: sqlite3.Connection, ws: int, message: str,
                                                      expected: str) -> None:
    """A message stored before these checks existed (or written by another path) is checked again."""
    f.sms_contacts(conn, ws, US)
    campaign = f.sms_campaign(conn, ws)
    conn.execute("UPDATE sms_campaigns SET message = ? WHERE id = ?", (message, campaign["id"]))
    assert refused(conn, schedule.schedule_campaign, ws, campaign["id"], {"schedule_type": "NOW"}) == expected
    assert campaigns.get_campaign(conn, ws, campaign["id"])["status"] == "DRAFT"
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0


def test_a_field_renamed_after_the_update_is_refused_at_schedule(conn: sqlite3.Connection, ws: int) -> None:
    city = f.field(conn, ws, "city", "TEXT")
    f.sms_contacts(conn, ws, US, city="Lyon")
    campaign = f.sms_campaign(conn, ws, message="Sale in {{contact.city|town}}." + STOP)
    update_field(conn, ws, city, {"label": "Town", "merge_tag": "town", "type": "TEXT"})
    assert refused(conn, schedule.schedule_campaign, ws, campaign["id"], {"schedule_type": "NOW"}) == \
        render.UNKNOWN_MERGE_TAG.format(tag="{{contact.city}}")
    assert campaigns.get_campaign(conn, ws, campaign["id"])["status"] == "DRAFT"

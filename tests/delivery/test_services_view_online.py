"""The view-online page (services/delivery/view_online.py): a sent message's and a test email's
{{view_online_url}} show that message, merged for its recipient, with its tracking."""

from __future__ import annotations

import email
import os
import re
import sqlite3
from email import policy
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs, services
from marketing_cli.errors import MktError
from marketing_cli.kernel import tokens
from marketing_cli.services.account import workspaces
from marketing_cli.services.delivery import path_tokens, tracking, view_online
from marketing_cli.services.delivery import test_emails as test_email
from marketing_cli.services.email import domains, variant_html
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.services.email import stats as campaign_stats
from marketing_cli.services.sms import links as sms_links
from marketing_cli.storage import db
from tests import factories

HTML = ('<html><body><h1>Hi {{contact.first_name|there}} from {{contact.city}}</h1>'
        '<p><a href="https://shop.example.org/sale?a=1&amp;b=2">Sale</a> <a href="mailto:help@example.org">mail</a>'
        ' <a href="{{view_online_url}}">View online</a></p>'
        '<p><a href="{{unsubscribe_url}}">Unsubscribe</a></p></body></html>')
IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Version/17.4 Mobile/15E148 Safari/604.1")


def _verified(conn: sqlite3.Connection, ws: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.email import dns_check

    monkeypatch.setattr(dns_check, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])


def _outbox() -> dict[str, Any]:
    """The messages in the outbox folder by recipient (the last one of each)."""
    found = {}
    for path in sorted(Path(os.environ["MKT_OUTBOX"]).glob("*.eml")):
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        found[message["To"]] = message
    return found


def _html(message: Any) -> str:
    return message.get_body(("html",)).get_content().replace("\r\n", "\n")


def _view_token(html: str) -> str:
    return re.search(r'href="[^"]*/t/v/([^"/]+)"', html).group(1)


@pytest.fixture
def sent(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A campaign sent (to the outbox) to Ann and Bob: {"campaign", "html": {address: HTML part}}."""
    ws = workspace["id"]
    factories.field(conn, ws, "city")
    factories.contact(conn, ws, "ann@example.org", first_name="Ann", city="Lyon")
    factories.contact(conn, ws, "bob@example.org", first_name="Bob <b>", city="Oslo")
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    _verified(conn, ws, monkeypatch)
    services.load_job_handlers()
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn)["failed"] == 0
    html = {address: _html(message) for address, message in _outbox().items()}
    assert set(html) == {"ann@example.org", "bob@example.org"}
    return {"campaign": campaign, "html": html}


def test_the_page_is_the_message_as_its_recipient_got_it(conn: sqlite3.Connection, sent: dict[str, Any]) -> None:
    ann, bob = sent["html"]["ann@example.org"], sent["html"]["bob@example.org"]
    assert view_online.view_online_page(conn, _view_token(ann)) == ann
    assert view_online.view_online_page(conn, _view_token(bob)) == bob
    assert "Hi Ann from Lyon" in ann and "Hi Bob &lt;b&gt; from Oslo" in bob and "Ann" not in bob
    secret = db.instance_secret(conn)
    own = path_tokens.MessageTokens.make(secret, tokens.read_token(secret, path_tokens.VIEW, _view_token(ann)))
    assert f"/t/v/{own.view}" in ann and f"/t/c/{own.click}/" in ann and f"/t/o/{own.open}" in ann
    assert f"/t/u/{own.unsubscribe}" in ann  # its own tracking, a token of each path's kind
    assert "https://shop.example.org/sale" not in ann and "mailto:help@example.org" in ann


def test_the_pages_links_and_pixel_count_as_the_emails(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                        sent: dict[str, Any]) -> None:
    page = view_online.view_online_page(conn, _view_token(sent["html"]["ann@example.org"]))
    token, link_id = re.search(r'href="[^"]*/t/c/([^"/]+)/(\d+)"', page).groups()
    assert tracking.track_click(conn, token, link_id, IPHONE, None) == "https://shop.example.org/sale?a=1&b=2"
    pixel = re.search(r'src="[^"]*/t/o/([^"/]+)"', page).group(1)
    assert tracking.track_open(conn, pixel, IPHONE) == tracking.PIXEL_GIF
    aggregate = campaign_stats.get_campaign_statistics(conn, workspace["id"], sent["campaign"]["id"])["aggregate"]
    assert (aggregate["opened"], aggregate["clicked"]) == (1, 1)


def test_the_page_shows_the_contacts_current_values(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                     sent: dict[str, Any]) -> None:
    factories.contact(conn, workspace["id"], "ann@example.org", first_name="Annie", city="Nantes")
    page = view_online.view_online_page(conn, _view_token(sent["html"]["ann@example.org"]))
    assert "Hi Annie from Nantes" in page


def test_a_page_whose_contact_was_deleted_says_so(conn: sqlite3.Connection, sent: dict[str, Any]) -> None:
    conn.execute("DELETE FROM contacts WHERE email = 'ann@example.org'")  # the message keeps its row
    with pytest.raises(MktError) as gone:
        view_online.view_online_page(conn, _view_token(sent["html"]["ann@example.org"]))
    assert (gone.value.status, gone.value.message) == (410, view_online.GONE)
    assert "Bob" in view_online.view_online_page(conn, _view_token(sent["html"]["bob@example.org"]))


def _not_found(conn: sqlite3.Connection, token: Any) -> None:
    with pytest.raises(MktError) as error:
        view_online.view_online_page(conn, token)
    assert (error.value.status, error.value.message) == (404, tracking.LINK_NOT_FOUND), token


def test_forged_malformed_and_other_kinds_of_tokens_are_refused(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                                sent: dict[str, Any]) -> None:
    token = _view_token(sent["html"]["ann@example.org"])
    message_id = tokens.read_token(db.instance_secret(conn), path_tokens.VIEW, token)
    secret = db.instance_secret(conn)
    before = conn.total_changes
    for bad in (token[:-1] + ("A" if token[-1] != "A" else "B"),      # forged
                tokens.make_token(b"guess" * 7, "m", message_id),         # made without the secret
                tokens.make_token(secret, "m", message_id + 1000),        # genuine, of no message
                "", "x", "!" * 20, "é" * 20, "A" * 49, token + "A"):    # malformed
        _not_found(conn, bad)
    # Genuine tokens of other kinds: the message's other paths', its "m" token (the one kind of
    # every path before schema step 32, refused for a message made since), an SMS link's, and
    # a test email's view token read as a message's.
    for kind in ("o", "c", "u", "m", *(k for k in path_tokens.KINDS if k != path_tokens.VIEW)):
        _not_found(conn, tokens.make_token(secret, kind, message_id))
    _not_found(conn, tokens.make_token(secret, sms_links.KIND, message_id * sms_links.MAX_LINKS, tokens.SMS_MAC_BYTES))
    variant = sent["campaign"]["variants"][0]["id"]
    assert tokens.read_token(secret, path_tokens.VIEW, test_email.view_token(secret, variant, None)) is None
    assert test_email.read_view_token(secret, token) is None
    assert conn.total_changes == before  # nothing was written


def test_without_interaction_tracking_the_page_has_the_original_links(conn: sqlite3.Connection,
                                                                       workspace: dict[str, Any],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    workspaces.update_workspace(conn, ws, {"name": "Plain", "conversion_tracking": False,
                                           "interaction_tracking": False})
    factories.field(conn, ws, "city")
    factories.contact(conn, ws, "ann@example.org", first_name="Ann", city="Lyon")
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    _verified(conn, ws, monkeypatch)
    services.load_job_handlers()
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    html = _html(_outbox()["ann@example.org"])
    page = view_online.view_online_page(conn, _view_token(html))
    assert page == html and "https://shop.example.org/sale?a=1&amp;b=2" in page and "/t/o/" not in page


def test_the_page_uses_the_tracking_base_url(conn: sqlite3.Connection, workspace: dict[str, Any],
                                             sent: dict[str, Any]) -> None:
    workspaces.update_operator_settings(conn, workspace["id"], tracking_url="https://t.example.com/mkt")
    page = view_online.view_online_page(conn, _view_token(sent["html"]["ann@example.org"]))
    assert 'href="https://t.example.com/mkt/t/c/' in page and 'href="https://t.example.com/mkt/t/u/' in page


# --- test emails --------------------------------------------------------------------------------

@pytest.fixture
def draft(conn: sqlite3.Connection, workspace: dict[str, Any]) -> dict[str, Any]:
    factories.field(conn, workspace["id"], "city", default_value="Paris")
    factories.contact(conn, workspace["id"], "ann@example.org", first_name="Ann", city="Lyon")
    return factories.ready_campaign(conn, workspace["id"], html=HTML)


def _test_email(conn: sqlite3.Connection, ws: int, campaign_id: str, to: str) -> str:
    test_email.send_test_email(conn, ws, campaign_id, {"variant_type": "A", "recipient": to})
    return _html(_outbox()[to])


def test_a_test_emails_link_shows_the_test_rendering(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                      draft: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_PUBLIC_URL", "https://mkt.example.com")
    ws = workspace["id"]
    ann = _test_email(conn, ws, draft["id"], "ann@example.org")
    assert 'href="https://mkt.example.com/t/v/' in ann  # below the tracking base, like a sent message's
    assert view_online.view_online_page(conn, _view_token(ann)) == ann and "Hi Ann from Lyon" in ann
    stranger = _test_email(conn, ws, draft["id"], "stranger@example.org")  # no contact: the fields' defaults
    assert view_online.view_online_page(conn, _view_token(stranger)) == stranger and "Hi there from Paris" in stranger
    assert "/t/c/" not in ann and "/t/o/" not in ann  # a test email is not tracked, nor is its page
    assert len(_view_token(ann)) == 46 and _view_token(ann) != _view_token(stranger)


def test_a_test_page_shows_the_variant_as_it_is_now(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                    draft: dict[str, Any]) -> None:
    ws = workspace["id"]
    token = _view_token(_test_email(conn, ws, draft["id"], "ann@example.org"))
    variant_html.set_variant_html(conn, ws, draft["id"], "A", {"html": HTML.replace("Hi", "Hello")})
    assert "Hello Ann from Lyon" in view_online.view_online_page(conn, token)
    conn.execute("DELETE FROM contacts WHERE email = 'ann@example.org'")
    with pytest.raises(MktError) as gone:
        view_online.view_online_page(conn, token)
    assert gone.value.status == 410


def test_test_view_tokens_are_signed_and_of_their_own_kind(conn: sqlite3.Connection, draft: dict[str, Any]) -> None:
    secret = db.instance_secret(conn)
    variant = draft["variants"][0]["id"]
    contact = conn.execute("SELECT id FROM contacts").fetchone()[0]
    token = test_email.view_token(secret, variant, contact)
    assert test_email.read_view_token(secret, token) == (variant, contact)
    assert test_email.read_view_token(secret, test_email.view_token(secret, variant, None)) == (variant, None)
    assert test_email.read_view_token(b"x" * 32, token) is None
    _not_found(conn, test_email.view_token(b"x" * 32, variant, contact))       # made without the secret
    _not_found(conn, tokens.make_token(secret, "m-view", int(variant + contact, 16)))  # another kind
    _not_found(conn, test_email.view_token(secret, "f" * 24, None))            # no such variant

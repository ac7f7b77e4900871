"""GET {base}/t/v/{token} through the HTTP face: the page of a message received through a
real SMTP server, its headers, its tracking, bad tokens, a deleted contact, a test email."""

from __future__ import annotations

import email
import re
import sqlite3
from email import policy
from typing import Any
from urllib.parse import quote

import pytest

from marketing_cli import jobs, services
from marketing_cli.kernel import tokens
from marketing_cli.services.email import domains
from tests import factories
from tests.smtp_server import SmtpServer

HTML = ('<p>Hi {{contact.first_name|there}}, <a href="https://shop.example.org/a?x=1&amp;y=2">shop</a>'
        ' <a href="{{view_online_url}}">View online</a> <a href="{{unsubscribe_url}}">Unsubscribe</a></p>')
WINDOWS = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
           "Chrome/124.0.0.0 Safari/537.36")


@pytest.fixture
def verified(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Ann and Bob, and a ready campaign on a verified domain."""
    from marketing_cli.services.email import dns_check

    monkeypatch.setattr(dns_check, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])
    ws = workspace["id"]
    factories.contact(conn, ws, "ann@gmail.com", first_name="Ann")
    factories.contact(conn, ws, "bob@yahoo.com", first_name="Bob")
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    return campaign


@pytest.fixture
def sent(conn: sqlite3.Connection, verified: dict[str, Any], monkeypatch: pytest.MonkeyPatch, client: Any,
         auth: dict[str, str]) -> dict[str, str]:
    """The campaign sent through a real SMTP server: {address: the HTML part received}."""
    services.load_job_handlers()
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        answer = client.post(f"/v1/campaigns/{verified['id']}/schedule", headers=auth, json={"schedule_type": "NOW"})
        assert answer.status_code == 200
        jobs.run_due(conn)
    received = {m.rcpt_tos[0]: email.message_from_bytes(m.raw, policy=policy.default) for m in server.messages}
    return {a: m.get_body(("html",)).get_content().replace("\r\n", "\n") for a, m in received.items()}


def _path(url: str) -> str:
    return re.sub(r"^https?://[^/]+", "", url)


def _view(html: str) -> str:
    return _path(re.search(r'href="([^"]+/t/v/[^"]+)"', html).group(1))


def test_the_page_is_served_without_a_key_with_safe_headers(client: Any, sent: dict[str, str]) -> None:
    page = client.get(_view(sent["ann@gmail.com"]))
    assert page.status_code == 200 and page.text == sent["ann@gmail.com"] and "Hi Ann" in page.text
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-store, max-age=0"
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "sandbox" in csp
    assert "frame-ancestors 'none'" in csp and "form-action 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"  # the token must not reach image and link hosts
    bob = client.get(_view(sent["bob@yahoo.com"]))
    assert bob.text == sent["bob@yahoo.com"] and "Hi Bob" in bob.text and "Ann" not in bob.text
    assert client.head(_view(sent["ann@gmail.com"])).status_code == 200
    assert client.post(_view(sent["ann@gmail.com"])).status_code == 405


def test_the_pages_tracking_works_like_the_emails(client: Any, auth: dict[str, str], sent: dict[str, str],
                                                   verified: dict[str, Any]) -> None:
    page = client.get(_view(sent["ann@gmail.com"])).text
    click = re.search(r'href="([^"]+/t/c/[^"]+)"', page).group(1)
    pixel = re.search(r'src="([^"]+/t/o/[^"]+)"', page).group(1)
    assert click in sent["ann@gmail.com"] and pixel in sent["ann@gmail.com"]  # the message's own URLs
    redirect = client.get(_path(click), headers={"User-Agent": WINDOWS}, follow_redirects=False)
    assert redirect.status_code == 302 and redirect.headers["location"] == "https://shop.example.org/a?x=1&y=2"
    assert client.get(_path(pixel), headers={"User-Agent": WINDOWS}).headers["content-type"] == "image/gif"
    stats = client.get(f"/v1/campaigns/{verified['id']}/statistics", headers=auth).json()["data"]
    assert (stats["aggregate"]["opened"], stats["aggregate"]["clicked"]) == (1, 1)


def test_below_a_base_path(client: Any, sent: dict[str, str]) -> None:
    assert client.get("/mkt" + _view(sent["ann@gmail.com"])).text == sent["ann@gmail.com"]


def test_bad_tokens_answer_a_404_page_and_change_nothing(client: Any, auth: dict[str, str], sent: dict[str, str],
                                                         conn: sqlite3.Connection, verified: dict[str, Any]) -> None:
    from marketing_cli.storage.db import instance_secret

    path = _view(sent["ann@gmail.com"])
    token = path.rsplit("/", 1)[1]
    message_id = tokens.read_token(instance_secret(conn), "view", token)
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    other_kind = tokens.make_token(instance_secret(conn), "s", message_id)
    before = conn.total_changes
    for bad in (forged, other_kind, "x", "%00", "A" * 60, "é"):
        answer = client.get(f"/t/v/{bad}")
        assert answer.status_code == 404, bad
        assert answer.headers["content-type"].startswith("text/html") and "This link is not valid." in answer.text
        assert answer.headers["cache-control"] == "no-store, max-age=0"
    assert client.get("/t/v/").status_code == 404
    assert conn.total_changes == before
    stats = client.get(f"/v1/campaigns/{verified['id']}/statistics", headers=auth).json()["data"]
    assert stats["aggregate"]["opened"] == 0


def test_a_deleted_contact_answers_410(client: Any, sent: dict[str, str], conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM contacts WHERE email = 'ann@gmail.com'")
    answer = client.get(_view(sent["ann@gmail.com"]))
    assert answer.status_code == 410 and answer.headers["content-type"].startswith("text/html")
    assert "no longer available" in answer.text and "Ann" not in answer.text


def test_a_test_emails_link_serves_the_test_rendering(client: Any, auth: dict[str, str], verified: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        answer = client.post(f"/v1/campaigns/{verified['id']}/test", headers=auth,
                             json={"variant_type": "A", "recipient": "bob@yahoo.com"})
        assert answer.status_code == 200, answer.text
    [received] = server.messages
    html = received.message.get_body(("html",)).get_content().replace("\r\n", "\n")
    page = client.get(_view(html))
    # (the standard library's add_alternative ends the test email's part with a line break)
    assert page.status_code == 200 and page.text == html.removesuffix("\n") and "Hi Bob" in html
    assert "default-src 'none'" in page.headers["content-security-policy"]


def test_the_openapi_document_lists_the_page(client: Any) -> None:
    operation = client.get("/v1/openapi.json").json()["paths"]["/t/v/{token}"]["get"]
    assert operation["security"] == []
    assert set(operation["responses"]) >= {"200", "404", "410"}
    assert "text/html" in operation["responses"]["200"]["content"]


@pytest.mark.parametrize("link_id", ["¹", "٣", "１", "𝟙", "9" * 40, "-1", "1.0", ""])
def test_a_link_id_that_is_not_ascii_digits_is_404_not_500(client: Any, auth: dict[str, str], sent: dict[str, str],
                                                           verified: dict[str, Any], link_id: str) -> None:
    """A genuine message token with a link id that str.isdigit() accepts and int() refuses
    (or the reverse) answered 500; ids from URLs are read by kernel/numbers.py only."""
    click = _path(re.search(r'href="([^"]+/t/c/[^"]+)"', sent["ann@gmail.com"]).group(1))
    forged = click.rsplit("/", 1)[0] + "/" + quote(link_id, safe="")
    assert client.get(forged, follow_redirects=False).status_code == 404
    stats = client.get(f"/v1/campaigns/{verified['id']}/statistics", headers=auth).json()["data"]
    assert stats["aggregate"]["clicked"] == 0

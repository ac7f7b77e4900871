"""One token kind per public path of a message (services/delivery/path_tokens.py): a token made
for one path is refused on every other (404, nothing changed), on the service and over HTTP;
the "m" tokens of messages mailed before schema step 32 keep working where they did, and
an "m" token of a message made since is refused everywhere."""

from __future__ import annotations

import email
import os
import sqlite3
from email import policy
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import tokens
from marketing_cli.services.delivery import bounces, confirmation, path_tokens, tracking, view_online
from marketing_cli.storage import db
from tests import factories as f

BROWSER = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Safari/537.36"


@pytest.fixture
def sent(conn: sqlite3.Connection, workspace: dict[str, Any]) -> dict[str, Any]:
    made = f.sent_message(conn, workspace["id"])
    made["link_id"] = conn.execute("SELECT id FROM email_links WHERE campaign_id = ?",
                                   (made["campaign_id"],)).fetchone()[0]
    return made


def _token(conn: sqlite3.Connection, kind: str, message_id: int) -> str:
    return tokens.make_token(db.instance_secret(conn), kind, message_id)


def _state(conn: sqlite3.Connection, message_id: int) -> tuple[Any, ...]:
    """What a path could change: the message's tracking columns, its clicks, the contact's status."""
    row = conn.execute("SELECT m.opened_at, m.machine_opened_at, m.clicked_at, m.unsubscribed_at, c.status,"
                       " (SELECT count(*) FROM email_clicks WHERE message_id = m.id),"
                       " (SELECT count(*) FROM contact_consents WHERE contact_id = c.id)"
                       " FROM email_messages m JOIN contacts c ON c.id = m.contact_id WHERE m.id = ?",
                       (message_id,)).fetchone()
    return tuple(row)


def _use(conn: sqlite3.Connection, path: str, token: str, link_id: int) -> Any:
    """Each public path's service, as its route calls it (POSTs included)."""
    calls = {
        "open": lambda: tracking.track_open(conn, token, BROWSER, None),
        "click": lambda: tracking.track_click(conn, token, str(link_id), BROWSER, None),
        "unsubscribe page": lambda: tracking.unsubscribe_page(conn, token),
        "unsubscribe": lambda: tracking.unsubscribe(conn, token, body=b"List-Unsubscribe=One-Click"),
        "view": lambda: view_online.view_online_page(conn, token),
        "confirm page": lambda: confirmation.confirmation_page(conn, token),
        "confirm": lambda: confirmation.confirm(conn, token),
    }
    return calls[path]()


PATH_KIND = {"open": path_tokens.OPEN, "click": path_tokens.CLICK, "unsubscribe page": path_tokens.UNSUBSCRIBE,
             "unsubscribe": path_tokens.UNSUBSCRIBE, "view": path_tokens.VIEW, "confirm page": path_tokens.CONFIRM,
             "confirm": path_tokens.CONFIRM}


def _refused(conn: sqlite3.Connection, path: str, token: str, sent: dict[str, Any]) -> None:
    before, changes = _state(conn, sent["message_id"]), conn.total_changes
    if path == "open":
        assert _use(conn, path, token, sent["link_id"]) == tracking.PIXEL_GIF  # answered, counted nothing
    else:
        with pytest.raises(MktError) as refused:
            _use(conn, path, token, sent["link_id"])
        assert (refused.value.status, refused.value.message) == (404, tracking.LINK_NOT_FOUND), (path, token)
    assert _state(conn, sent["message_id"]) == before and conn.total_changes == changes, path


def test_the_sent_message_carries_a_token_of_its_own_kind_on_each_path(conn: sqlite3.Connection,
                                                                        sent: dict[str, Any]) -> None:
    mailed = [email.message_from_bytes(p.read_bytes(), policy=policy.default)
              for p in Path(os.environ["MKT_OUTBOX"]).glob("*.eml")]
    assert len(mailed) == 1
    html = mailed[0].get_body(("html",)).get_content()
    own = sent["tokens"]
    assert len({own.open, own.click, own.unsubscribe, own.view, own.confirm, own.report}) == 6
    for fragment in (f"/t/o/{own.open}", f"/t/c/{own.click}/", f"/t/u/{own.unsubscribe}", f"/t/v/{own.view}"):
        assert fragment in html, fragment  # (a confirmation email's link: tests/contacts/test_services_consents.py)
    assert mailed[0]["List-Unsubscribe"].endswith(f"/t/u/{own.unsubscribe}>")
    assert mailed[0]["X-Mkt-Message"] == own.report
    assert tokens.make_token(db.instance_secret(conn), "m", sent["message_id"]) not in mailed[0].as_string()


@pytest.mark.parametrize("path", list(PATH_KIND))
def test_every_other_kind_is_refused_and_changes_nothing(conn: sqlite3.Connection, sent: dict[str, Any],
                                                         path: str) -> None:
    conn.execute("UPDATE contacts SET status = 'UNCONFIRMED' WHERE id = ?", (sent["contact_id"],))
    for kind in (*path_tokens.KINDS, path_tokens.LEGACY, "s", "test-view"):
        if kind != PATH_KIND[path]:
            _refused(conn, path, _token(conn, kind, sent["message_id"]), sent)
    _use(conn, path, _token(conn, PATH_KIND[path], sent["message_id"]), sent["link_id"])  # its own kind works


def test_the_pixels_token_neither_confirms_nor_unsubscribes(conn: sqlite3.Connection, sent: dict[str, Any]) -> None:
    """The case of the issue: an image proxy logs the pixel's URL; a POST of that token to the
    confirmation or the unsubscribe path is refused, and the open it counts is all it does."""
    conn.execute("UPDATE contacts SET status = 'UNCONFIRMED' WHERE id = ?", (sent["contact_id"],))
    pixel = sent["tokens"].open
    for path in ("confirm", "unsubscribe", "view"):
        _refused(conn, path, pixel, sent)
    confirmation.confirm(conn, sent["tokens"].confirm)
    assert conn.execute("SELECT status FROM contacts WHERE id = ?", (sent["contact_id"],)).fetchone()[0] == "SUBSCRIBED"


def test_a_bounce_report_is_attributed_by_the_report_token_only(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                                sent: dict[str, Any]) -> None:
    secret = db.instance_secret(conn)
    assert path_tokens.read_message_token(conn, path_tokens.REPORT, sent["tokens"].report) == sent["message_id"]
    for kind in (*path_tokens.KINDS, path_tokens.LEGACY):
        if kind != path_tokens.REPORT:
            entry = {"type": "hard", "mkt_message_token": _token(conn, kind, sent["message_id"]),
                     "original_message_id": None, "email_address": None}
            result = bounces._import_entry(conn, workspace["id"], secret, entry)  # noqa: SLF001 - the token step alone
            assert result["applied"] is False, kind  # not attributed: no address to fall back on


def _http(client: Any, path: str, token: str, link_id: int) -> Any:
    requests = {
        "open": lambda: client.get(f"/t/o/{token}", headers={"User-Agent": BROWSER}),
        "click": lambda: client.get(f"/t/c/{token}/{link_id}", headers={"User-Agent": BROWSER},
                                    follow_redirects=False),
        "unsubscribe page": lambda: client.get(f"/t/u/{token}"),
        "unsubscribe": lambda: client.post(f"/t/u/{token}", content=b"List-Unsubscribe=One-Click",
                                           headers={"Content-Type": "application/x-www-form-urlencoded"}),
        "view": lambda: client.get(f"/t/v/{token}"),
        "confirm page": lambda: client.get(f"/t/confirm/{token}"),
        "confirm": lambda: client.post(f"/t/confirm/{token}"),
    }
    return requests[path]()


def test_over_http_a_token_of_another_path_is_a_404_page_and_changes_nothing(
        client: Any, conn: sqlite3.Connection, sent: dict[str, Any]) -> None:
    conn.execute("UPDATE contacts SET status = 'UNCONFIRMED' WHERE id = ?", (sent["contact_id"],))
    for path, own_kind in PATH_KIND.items():
        for kind in (*path_tokens.KINDS, path_tokens.LEGACY):
            if kind == own_kind:
                continue
            before = _state(conn, sent["message_id"])
            answer = _http(client, path, _token(conn, kind, sent["message_id"]), sent["link_id"])
            if path == "open":
                assert answer.status_code == 200 and answer.headers["content-type"] == "image/gif"
            else:
                assert answer.status_code == 404, (path, kind)
                assert "This link is not valid." in answer.text
            assert _state(conn, sent["message_id"]) == before, (path, kind)
    own = sent["tokens"]
    assert _http(client, "click", own.click, sent["link_id"]).status_code == 302
    assert _http(client, "confirm", own.confirm, sent["link_id"]).status_code == 200
    assert _http(client, "unsubscribe", own.unsubscribe, sent["link_id"]).status_code == 200
    assert conn.execute("SELECT status FROM contacts WHERE id = ?", (sent["contact_id"],)).fetchone()[0] == "UNSUBSCRIBED"


def test_a_new_database_honours_no_m_token(conn: sqlite3.Connection) -> None:
    assert [tuple(r) for r in conn.execute("SELECT kind, last_id FROM token_cutovers")] == [("m", 0)]


def test_m_tokens_mailed_before_the_upgrade_keep_working_on_every_path(conn: sqlite3.Connection,
                                                                       workspace: dict[str, Any],
                                                                       sent: dict[str, Any]) -> None:
    f.mailed_before_the_upgrade(conn)
    old = _token(conn, path_tokens.LEGACY, sent["message_id"])
    conn.execute("UPDATE contacts SET status = 'UNCONFIRMED' WHERE id = ?", (sent["contact_id"],))
    assert "Confirm your subscription" in confirmation.confirmation_page(conn, old)
    assert "confirmed" in confirmation.confirm(conn, old)
    assert "Hi Ann" in view_online.view_online_page(conn, old)
    assert tracking.track_click(conn, old, str(sent["link_id"]), BROWSER, None) == "https://shop.example.org/sale"
    tracking.track_open(conn, old, BROWSER, None)
    assert path_tokens.read_message_token(conn, path_tokens.REPORT, old) == sent["message_id"]
    assert "Unsubscribe" in tracking.unsubscribe_page(conn, old)
    tracking.unsubscribe(conn, old, body=b"List-Unsubscribe=One-Click")
    opened_at, _, clicked_at, unsubscribed_at, status = _state(conn, sent["message_id"])[:5]
    assert opened_at and clicked_at and unsubscribed_at and status == "UNSUBSCRIBED"
    # A message made after the upgrade never carried an "m" token: refused on every path.
    f.allow_domains(conn, workspace["id"])
    later = f.sent_message(conn, workspace["id"], "bob@example.com", domain="example.org")
    later["link_id"] = sent["link_id"]  # (refused before the link is looked at)
    newer = _token(conn, path_tokens.LEGACY, later["message_id"])
    assert later["message_id"] > sent["message_id"]
    for path in PATH_KIND:
        _refused(conn, path, newer, later)
    assert path_tokens.read_message_token(conn, path_tokens.REPORT, newer) is None


@pytest.mark.sqlite_only(reason="the step run over a SQLite file that holds messages; PostgreSQL's twin is the same SQL")
def test_the_upgrade_records_the_last_message_mailed_with_an_m_token(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = db.connect(path, upgrade=False)
    db.migrate(conn, target=31)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("INSERT INTO email_messages (id, campaign_id, variant_id, email, domain, provider, created_at)"
                 " VALUES (41, 'c', 'v', 'ann@example.com', 'example.com', 'Other', '2026-01-01T00:00:00.000Z')")
    conn.execute("PRAGMA foreign_keys = ON")
    db.migrate(conn)
    assert [tuple(r) for r in conn.execute("SELECT kind, last_id FROM token_cutovers")] == [("m", 41)]
    at = conn.execute("SELECT at FROM token_cutovers").fetchone()[0]
    assert len(at) == 24 and at.endswith("Z") and at[10] == "T"
    conn.close()

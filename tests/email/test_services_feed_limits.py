"""Feeds are read within bounds (issue 40, item 2; services/email/feed_xml.py): what is not
well-formed XML or declares entities is refused, size, depth and attributes are capped before
feedparser sees the document, the parse runs under a CPU-time bound, feedparser's `bozo` is a
failure, and declared charsets are read safely. Before: a feed cut short, with crossed tags
or a billion laughs was accepted (201, exit 0) and a later copy sent an empty item or
`&amp;lol9;`; `charset=unicode_escape` answered 500; ISO-8859-1 and UTF-16 feeds were refused;
100,000 attributes on one element took about 3 minutes of CPU."""

from __future__ import annotations

import resource
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.email import campaigns, feed_xml, feeds, series
from tests import factories

WEEKLY = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"
OLD = ("post-1", "First post", "Mon, 23 Nov 2026 10:00:00 GMT")
GOOD = factories.rss([OLD])
RSS = b'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>T</title>'
END = b"</channel></rss>"
XML = {"Content-Type": "application/rss+xml"}
CPU_MARGIN = 1.0  # seconds of CPU over the bound: the child's start (0.1 s) and its imports


def attributes(n: int) -> bytes:
    return RSS + b"<item " + b" ".join(b'a%d="v"' % i for i in range(n)) + b"><title>x</title></item>" + END


# name -> (body, headers, the start of the refusal)
HOSTILE: dict[str, tuple[bytes, dict[str, str], str]] = {
    "cut short": (GOOD[:-40], XML, "The feed is not well-formed XML: "),
    "crossed tags": (RSS + b"<item><title>x</item></title>" + END, XML,
                     "The feed is not well-formed XML: mismatched tag at line 1"),
    "billion laughs": (b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">'
                       b'<!ENTITY lol3 "&lol2;&lol2;&lol2;">]><rss version="2.0"><channel><title>&lol3;</title>'
                       b"<item><title>&lol3;</title></item></channel></rss>", XML, feed_xml.ENTITIES),
    "external entity": (b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                        b'<rss version="2.0"><channel><title>&x;</title></channel></rss>', XML, feed_xml.ENTITIES),
    "an undefined entity": (RSS + b"<item><title>&nbsp;x</title></item>" + END, XML,
                            "The feed is not well-formed XML: undefined entity"),
    "20,000 attributes on one element": (attributes(20_000), XML, feed_xml.TOO_MANY_ATTRIBUTES),
    "tags nested 100,000 deep": (RSS + b"<x>" * 100_000 + b"</x>" * 100_000 + END, XML, feed_xml.TOO_DEEP),
    "60,000 elements": (RSS + b"<item><title>a</title></item>" * 30_000 + END, XML, feed_xml.TOO_MANY_ELEMENTS),
    "an author that costs minutes": (RSS + b"<item><author>" + b"1" * 300_000 + b"</author></item>" + END, XML,
                                     feed_xml.TOO_COSTLY),
    "charset=unicode_escape": (GOOD, {"Content-Type": "application/rss+xml; charset=unicode_escape"},
                               "The feed declares the charset 'unicode_escape', which mkt does not read."),
    "an unknown charset in the declaration": (GOOD.replace(b'encoding="utf-8"', b'encoding="x-no-such"'), XML,
                                              "The feed declares the charset 'x-no-such', which mkt does not read."),
    "bytes that are not UTF-8": (GOOD.replace(b"First", b"F\xffirst"), XML,
                                 "The feed is not text in the charset it declares (utf-8)."),
    "not a feed": (b"<html><body><p>hello</p></body></html>", {"Content-Type": "text/html"},
                   "The url did not return an RSS or Atom feed."),
}


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> factories.FixedClock:
    fake = factories.FixedClock(datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc))
    monkeypatch.setattr(clock, "utcnow", fake)
    return fake


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")
    pages: dict[str, tuple[int, dict[str, str], bytes]] = {"/feed.xml": (200, XML, GOOD)}
    with factories.PageServer(pages) as page_server:
        page_server.pages = pages
        yield page_server


@pytest.fixture
def campaign(conn: Any, workspace: dict[str, Any], fixed: factories.FixedClock) -> dict[str, Any]:
    return factories.feed_campaign(conn, workspace["id"], ("ann@example.org", "bob@example.org"))


def serve(server: Any, name: str) -> str:
    body, headers, _ = HOSTILE[name]
    server.pages["/feed.xml"] = (200, headers, body)
    return server.url("/feed.xml")


def series_count(conn: Any) -> int:
    return conn.execute("SELECT COUNT(*) FROM campaign_series").fetchone()[0]


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@pytest.mark.parametrize("name", list(HOSTILE))
def test_making_a_series_with_a_hostile_feed_is_refused(conn: Any, workspace: dict[str, Any], campaign: dict,
                                                        server: Any, name: str) -> None:
    url = serve(server, name)
    started, children = time.monotonic(), _children_cpu()
    with pytest.raises(MktError) as refused:
        series.create_series(conn, workspace["id"], campaign["id"], {"rrule": WEEKLY, "feed_url": url})
    assert _children_cpu() - children < feed_xml.CPU_SECONDS + CPU_MARGIN  # the bound, whatever the document
    assert time.monotonic() - started < feed_xml.WALL_SECONDS
    assert refused.value.status == 400 and refused.value.message.startswith(HOSTILE[name][2])
    assert series_count(conn) == 0


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_api_answers_400_naming_the_problem(client: Any, auth: dict[str, str], conn: Any, campaign: dict,
                                                server: Any, name: str) -> None:
    url = serve(server, name)
    answer = client.post(f"/v1/campaigns/{campaign['id']}/series", headers=auth, json={"rrule": WEEKLY, "feed_url": url})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith(HOSTILE[name][2])
    assert series_count(conn) == 0


@pytest.mark.parametrize("name", ["crossed tags", "billion laughs", "charset=unicode_escape"])
def test_the_cli_exits_1_naming_the_problem(cli: Any, conn: Any, campaign: dict, server: Any, name: str) -> None:
    done = cli("campaigns", "schedule", campaign["id"], "--every", WEEKLY, "--feed", serve(server, name))
    assert done.exit_code == 1 and HOSTILE[name][2] in done.stderr
    assert series_count(conn) == 0


@pytest.mark.parametrize("name", ["cut short", "billion laughs", "charset=unicode_escape", "an undefined entity"])
def test_an_occurrence_whose_feed_turned_bad_fails_and_sends_nothing(conn: Any, workspace: dict[str, Any],
                                                                     campaign: dict, server: Any,
                                                                     fixed: factories.FixedClock, tmp_path: Path,
                                                                     name: str) -> None:
    ws = workspace["id"]
    made = series.create_series(conn, ws, campaign["id"], {"rrule": WEEKLY, "feed_url": server.url("/feed.xml")})
    serve(server, name)
    fixed.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=timezone.utc))
    jobs.run_due(conn)
    shown = series.get_series(conn, ws, made["id"])
    assert shown["last_occurrence"]["status"] == "FAILED"
    assert shown["last_occurrence"]["reason"].startswith("The feed could not be fetched: " + HOSTILE[name][2])
    copies = [c for c in campaigns.list_campaigns(conn, ws, limit=100)["campaigns"] if c["id"] != campaign["id"]]
    assert copies == [] and not list((tmp_path / "outbox").rglob("*.eml"))


def test_a_feed_whose_body_is_an_address_is_not_fetched_by_the_parser(conn: Any, workspace: dict[str, Any],
                                                                      campaign: dict, server: Any) -> None:
    """feedparser.parse(text) fetches a URL and opens a file path it is given as text: the
    body of a feed is handed over as bytes, and is not XML anyway."""
    secret: dict[str, tuple[int, dict[str, str], bytes]] = {"/secret": (200, XML, GOOD)}
    with factories.PageServer(secret) as inside:
        for body in (inside.url("/secret").encode(), b"/etc/hostname"):
            server.pages["/feed.xml"] = (200, XML, body)
            with pytest.raises(MktError) as refused:
                series.create_series(conn, workspace["id"], campaign["id"],
                                     {"rrule": WEEKLY, "feed_url": server.url("/feed.xml")})
            assert refused.value.message.startswith("The feed is not well-formed XML: ")
    assert series_count(conn) == 0


CHANNEL = ('<rss version="2.0"><channel><title>Café crème</title><item><guid>g1</guid><title>Crème brûlée</title>'
           "</item></channel></rss>")


@pytest.mark.parametrize("body, headers", [
    (('<?xml version="1.0" encoding="ISO-8859-1"?>' + CHANNEL).encode("iso-8859-1"), XML),
    (("<?xml version='1.0' encoding='windows-1252'?>" + CHANNEL.replace("crème", "crème €")).encode("cp1252"), XML),
    (('<?xml version="1.0"?>' + CHANNEL).encode("cp1252"), {"Content-Type": "application/xml; charset=windows-1252"}),
    (('<?xml version="1.0" encoding="UTF-16"?>' + CHANNEL).encode("utf-16"), XML),
    (('<?xml version="1.0" encoding="UTF-16LE"?>' + CHANNEL).encode("utf-16-le"), XML),
    (('<?xml version="1.0" encoding="utf-8"?>' + CHANNEL).encode("utf-8-sig"), {"Content-Type": "text/xml; charset=utf-8"}),
])
def test_feeds_in_the_charsets_browsers_read_are_read(server: Any, body: bytes, headers: dict[str, str]) -> None:
    server.pages["/feed.xml"] = (200, headers, body)
    feed = feeds.fetch_feed(server.url("/feed.xml"))
    assert feed.title.startswith("Café crème") and [i.title for i in feed.items] == ["Crème brûlée"]
    assert feed.title in ("Café crème", "Café crème €")


def test_an_rss_091_feed_with_its_netscape_doctype_is_still_read() -> None:
    doc = (b'<?xml version="1.0"?><!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" '
           b'"http://my.netscape.com/publish/formats/rss-0.91.dtd"><rss version="0.91"><channel><title>Old</title>'
           b"<link>https://old.example/</link><item><title>One</title><link>https://old.example/1</link></item>"
           b"</channel></rss>")
    feed = feeds.parse_feed(doc)
    assert feed.title == "Old" and [(i.title, i.url) for i in feed.items] == [("One", "https://old.example/1")]


def test_the_shape_caps_are_exact() -> None:
    def nested(depth: int) -> bytes:
        return b"<rss>" + b"<x>" * (depth - 1) + b"</x>" * (depth - 1) + b"</rss>"

    feed_xml.check_xml(nested(feed_xml.MAX_DEPTH))
    with pytest.raises(feed_xml.Refused, match="more than 64 deep"):
        feed_xml.check_xml(nested(feed_xml.MAX_DEPTH + 1))
    many = b"<rss " + b" ".join(b'a%d="v"' % i for i in range(feed_xml.MAX_ATTRIBUTES)) + b"/>"
    feed_xml.check_xml(many)
    with pytest.raises(feed_xml.Refused, match="more than 64 attributes"):
        feed_xml.check_xml(many.replace(b"/>", b' z="v"/>'))
    feed_xml.check_xml(b"<rss>" + b"<i/>" * (feed_xml.MAX_ELEMENTS - 1) + b"</rss>")
    with pytest.raises(feed_xml.Refused, match="more than 50,000 elements"):
        feed_xml.check_xml(b"<rss>" + b"<i/>" * feed_xml.MAX_ELEMENTS + b"</rss>")


def test_a_5_mib_feed_of_5000_items_is_read_within_the_bound() -> None:
    items = [(f"post-{i}", f"Post {i} " + "x" * 350, "Mon, 23 Nov 2026 10:00:00 GMT") for i in range(5000)]
    doc = factories.rss(items)
    assert 4 * 2**20 < len(doc) <= feed_xml.MAX_BYTES
    assert len(feeds.parse_feed(doc).items) == 5000

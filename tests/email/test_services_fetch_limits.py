"""Template URLs and feeds against servers that misbehave (issue 40): 30 s in all for the
head and the body, 5 MiB read at most, the checked address connected to, every redirect
checked. Before, a head sent a byte at a time escaped the deadline (checked only while the
body was read): 126.7 s by hand. Each case runs for both callers and checks that nothing
was written where the caller writes (a template, a series)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.email import series, template_url, templates
from tests import factories
from tests.hostile_http import HostileServer, NetStandIn

DEADLINE = 1.5
MARGIN = 1.0
PUBLIC = "1.2.3.4"
WEEKLY = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"
FEED = factories.rss([("post-1", "First post", "Mon, 23 Nov 2026 10:00:00 GMT")])


@dataclass
class Caller:
    kind: str
    call: Callable[[str], Any]
    written: Callable[[], int]


@pytest.fixture(params=["template", "feed"])
def caller(request: pytest.FixtureRequest, conn: Any, workspace: dict[str, Any]) -> Caller:
    ws = workspace["id"]
    if request.param == "template":
        return Caller("template", lambda url: templates.create_template(conn, ws, {"name": "T", "type": "code",
                                                                         "import_format": "url", "url": url}),
                      lambda: conn.execute("SELECT COUNT(*) FROM templates").fetchone()[0])
    campaign = factories.feed_campaign(conn, ws)
    return Caller("feed", lambda url: series.create_series(conn, ws, campaign["id"], {"rrule": WEEKLY, "feed_url": url}),
                  lambda: conn.execute("SELECT COUNT(*) FROM campaign_series").fetchone()[0])


@pytest.fixture
def allow_private(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_url, "DEADLINE", DEADLINE)


def refused(caller: Caller, url: str) -> tuple[float, str]:
    started = time.monotonic()
    with pytest.raises(MktError) as failed:
        caller.call(url)
    assert failed.value.status == 400
    return time.monotonic() - started, failed.value.message


def test_the_documented_limits() -> None:
    assert template_url.DEADLINE == 30.0 and template_url.MAX_BYTES == 5 * 1024 * 1024


@pytest.mark.parametrize("kind", ["slow_head", "slow_body"])
def test_a_trickled_answer_is_refused_at_the_deadline(caller: Caller, allow_private: None, short_deadline: None,
                                                      kind: str) -> None:
    with HostileServer(kind, lasting=DEADLINE * 4) as server:
        elapsed, message = refused(caller, server.url("/"))
    assert message == "We could not fetch the url: it did not answer in time."
    assert DEADLINE - 0.05 <= elapsed <= DEADLINE + MARGIN
    assert caller.written() == 0


@pytest.mark.parametrize("kind", ["endless", "huge"])
def test_a_body_past_5_mib_is_refused(caller: Caller, allow_private: None, short_deadline: None, kind: str) -> None:
    with HostileServer(kind, lasting=DEADLINE * 4) as server:
        elapsed, message = refused(caller, server.url("/"))
    assert message == "The page at the url is larger than 5 MiB."
    assert elapsed < DEADLINE and max(server.sent) < 32 * 1024 * 1024
    assert caller.written() == 0


def test_a_rebinding_name_is_read_from_the_checked_address(caller: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    net = NetStandIn(monkeypatch)
    with HostileServer("ok", body=FEED) as public, HostileServer("ok", body=b"<p>internal</p>") as loopback:
        net.names["rebind.example"] = [PUBLIC, "127.0.0.1"]
        net.routes[PUBLIC] = public.port
        caller.call(f"http://rebind.example:{loopback.port}/feed.xml")
    assert loopback.requests == [] and len(public.requests) == 1
    assert caller.written() == 1


def test_a_redirect_to_a_private_address_is_refused(caller: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    net = NetStandIn(monkeypatch)
    with HostileServer("ok", body=FEED) as private, HostileServer("redirect") as public:
        public.location = private.url("/feed.xml")
        net.names["public.example"] = [PUBLIC]
        net.routes[PUBLIC] = public.port
        _, message = refused(caller, f"http://public.example:{public.port}/feed.xml")
    assert message == "The url points to a private, loopback or reserved network address, which is not allowed."
    assert private.requests == [] and caller.written() == 0


@pytest.mark.parametrize("charset", ["unicode_escape", "raw_unicode_escape", "rot13", "x-no-such-charset"])
def test_a_charset_no_browser_reads_is_a_400(caller: Caller, allow_private: None, charset: str) -> None:
    """Before: `charset=unicode_escape` turned `\\ud800` into a lone surrogate that could be
    neither stored nor answered (a 500)."""
    body = b"<p>\\ud800 \\u0000</p>" if caller.kind == "template" else FEED.replace(b"First", b"\\ud800 First")
    headers = {"Content-Type": f"text/html; charset={charset}"}
    with HostileServer("ok", headers=headers, body=body) as server:
        _, message = refused(caller, server.url("/"))
    assert message == ("The page at the url is not text in UTF-8 or in the charset it declares."
                       if caller.kind == "template" else
                       f"The feed declares the charset '{charset}', which mkt does not read.")
    assert caller.written() == 0

"""The outbound HTTP helper (kernel/outbound.py) against real misbehaving local servers: one
deadline over the head and the body, a cap on what is read, the checked address connected
to (a rebinding name), redirects checked hop by hop, and the charsets it reads."""

from __future__ import annotations

import gzip
import socket
import time
from typing import Any

import pytest

from marketing_cli.kernel import outbound
from tests.hostile_http import HostileServer, NetStandIn

pytestmark = pytest.mark.engine_neutral  # no database

DEADLINE = 1.5
MARGIN = 1.0  # the machine is shared: the deadline holds to within this
PUBLIC = "1.2.3.4"  # a public address the stand-in routes to a local server


@pytest.fixture
def allow_private(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")


@pytest.fixture
def net(monkeypatch: pytest.MonkeyPatch) -> NetStandIn:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    return NetStandIn(monkeypatch)


def get(url: str, **kw: Any) -> outbound.Answer:
    options = {"deadline": DEADLINE, "max_bytes": 64 * 1024, "size": "64 KB", "max_redirects": 5, **kw}
    return outbound.request("GET", url, **options)


def timed_failure(url: str, **kw: Any) -> tuple[float, outbound.OutboundError]:
    started = time.monotonic()
    with pytest.raises(outbound.OutboundError) as failed:
        get(url, **kw)
    return time.monotonic() - started, failed.value


@pytest.mark.parametrize("kind", ["slow_head", "slow_body"])
def test_a_trickled_answer_is_cut_off_at_the_deadline(allow_private: None, kind: str) -> None:
    """Before: the head was read under a per-read timeout only (a byte every 0.2 s never
    trips 10 s), and the webhook had no total deadline at all."""
    with HostileServer(kind, lasting=DEADLINE * 4) as server:
        elapsed, error = timed_failure(server.url("/"), max_bytes=5 * 1024 * 1024)
    assert error.kind == "timeout" and error.message == "We could not fetch the url: it did not answer in time."
    assert DEADLINE - 0.05 <= elapsed <= DEADLINE + MARGIN


def test_the_deadline_covers_a_name_that_takes_long_to_resolve(net: NetStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def slow(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow.example":
            time.sleep(DEADLINE * 3)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    elapsed, error = timed_failure("http://slow.example/")
    assert error.kind == "timeout" and DEADLINE - 0.05 <= elapsed <= DEADLINE + MARGIN


@pytest.mark.parametrize("kind", ["endless", "huge"])
def test_a_body_past_the_cap_is_refused_without_reading_it_all(allow_private: None, kind: str) -> None:
    with HostileServer(kind, lasting=DEADLINE * 4) as server:
        elapsed, error = timed_failure(server.url("/"))
    assert error.kind == "too_large" and error.message == "The page at the url is larger than 64 KB."
    assert elapsed < DEADLINE
    assert max(server.sent) < 32 * 1024 * 1024  # the huge one declares 200 MB: never read


@pytest.mark.parametrize("kind", ["endless", "huge"])
def test_a_cut_answer_keeps_the_status_and_at_most_the_cap(allow_private: None, kind: str) -> None:
    with HostileServer(kind, lasting=DEADLINE * 4) as server:
        answer = get(server.url("/"), cut=True)
    assert answer.status == 200 and answer.cut and len(answer.body) == 64 * 1024
    assert answer.elapsed < DEADLINE


def test_a_compressed_answer_is_capped_once_decoded(allow_private: None) -> None:
    bomb = gzip.compress(b"a" * (8 * 1024 * 1024))  # 8 KB that decode to 8 MiB
    with HostileServer("ok", headers={"Content-Encoding": "gzip"}, body=bomb) as server:
        _, error = timed_failure(server.url("/"))
        assert error.kind == "too_large"
        answer = get(server.url("/"), cut=True)
        assert answer.cut and answer.body == b"a" * 64 * 1024
        small = gzip.compress(b"<p>fine</p>")
    with HostileServer("ok", headers={"Content-Encoding": "gzip"}, body=small) as server:
        assert get(server.url("/")).body == b"<p>fine</p>"


def test_a_rebinding_name_reaches_only_the_address_that_was_checked(net: NetStandIn) -> None:
    """The name answers a public address, then 127.0.0.1 (TTL 0): the request goes to the first."""
    with HostileServer("ok", body=b"public") as public, HostileServer("ok", body=b"loopback") as loopback:
        net.names["rebind.example"] = [PUBLIC, "127.0.0.1"]
        net.routes[PUBLIC] = public.port
        answer = get(f"http://rebind.example:{loopback.port}/")
    assert answer.body == b"public" and loopback.requests == []
    assert net.lookups == ["rebind.example"] and net.connects == [(PUBLIC, loopback.port)]
    assert public.requests[0]["headers"]["host"] == f"rebind.example:{loopback.port}"


def test_a_redirect_to_a_private_address_is_refused(net: NetStandIn) -> None:
    with HostileServer("ok", body=b"secret") as private:
        with HostileServer("redirect", location=private.url("/secret")) as public:
            net.names["public.example"] = [PUBLIC]
            net.routes[PUBLIC] = public.port
            _, error = timed_failure(f"http://public.example:{public.port}/")
    assert error.kind == "private" and error.message == outbound.PRIVATE
    assert len(public.requests) == 1 and private.requests == []


def test_redirects_are_not_followed_when_the_caller_says_so(allow_private: None) -> None:
    with HostileServer("redirect", location="http://127.0.0.1:9/elsewhere") as server:
        answer = get(server.url("/"), max_redirects=0)
    assert answer.status == 302 and answer.body == b""


def test_a_name_with_a_private_address_is_refused_before_connecting(net: NetStandIn) -> None:
    net.names["inside.example"] = ["10.0.0.7"]
    _, error = timed_failure("http://inside.example/")
    assert error.kind == "private" and net.connects == []


@pytest.mark.parametrize("charset, codec", [
    (None, "utf-8"), ("UTF-8", "utf-8"), ("iso-8859-1", "iso8859-1"), ("latin1", "iso8859-1"),
    ("windows-1252", "cp1252"), ("utf-16", "utf-16"), ("Shift_JIS", "shift_jis"), ('"utf-8"', "utf-8"),
    ("unicode_escape", None), ("raw-unicode-escape", None), ("rot13", None), ("punycode", None), ("utf-7", None),
    ("idna", None), ("no-such-charset", None), ("zlib", None),
])
def test_only_the_charsets_a_browser_reads_are_read(charset: str | None, codec: str | None) -> None:
    assert outbound.text_codec(charset) == codec


def test_decoding_refuses_what_is_not_text() -> None:
    assert outbound.decode("café".encode("cp1252"), "windows-1252") == "café"
    assert outbound.decode("\ufeffcafé".encode(), None) == "café"
    for body, charset in ((b"caf\xe9", None), (b"a\x00b", "utf-8"), (b"\\ud800", "unicode_escape")):
        with pytest.raises(ValueError):
            outbound.decode(body, charset)

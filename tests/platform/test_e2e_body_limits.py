"""Bodies over the limit, and answers sent before a body has arrived, over raw sockets against
a real `mkt serve` (docs/reliability.md, "The HTTP server").

The client here is the plainest one: it sends the whole request (head and body) and only
then reads. Before the lingering close, a server that answered early (413, 401) and closed
with the body still arriving made the kernel reset the connection: the client's send failed
with a reset or a broken pipe and the answer could be lost. Each test asserts the whole
body was sent without an error, the answer was read whole, and the connection ended with a
clean close (no reset).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from marketing_cli.api.responses import MAX_BODY_BYTES
from tests.conftest import Server, mkt
from tests.engines import new_database

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
# Far more than the kernel buffers on both sides of a loopback connection hold (a few MiB),
# so the body is still being sent when the server answers.
BIG = 24 * MIB
TOO_LARGE = f"The request body is too large: the limit is {MAX_BODY_BYTES // 1024} KiB."


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[tuple[Server, str]]:
    db = new_database(postgres_server, tmp_path_factory.mktemp("bodies"), "served.db")
    key = mkt(db, "init", "--name", "Bodies")["api_key"]
    server = Server(db)
    yield server, key
    assert server.stop() == 0
    if postgres_server is not None:
        postgres_server.drop(db)
    out = server.output()
    assert "Traceback" not in out and '" 500' not in out


def exchange(port: int, head: bytes, body: bytes | Iterator[bytes] = b"") -> tuple[int, dict[str, str], Any, float]:
    """Send head and body, then read until the server closes: (status, headers, JSON body,
    seconds from the end of the send to the close). Any socket error fails the test."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(15)
        s.sendall(head)
        for piece in [body] if isinstance(body, bytes) else body:
            s.sendall(piece)
        sent = time.monotonic()
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        closed = time.monotonic() - sent
    raw_head, _, raw_body = answer.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(raw_body), closed


def post_head(path: str, key: str | None, framing: str, size: int = BIG, close: bool = False) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    lines.append(f"Content-Length: {size}" if framing == "length" else "Transfer-Encoding: chunked")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(size: int, piece: int = MIB) -> Iterator[bytes]:
    for _ in range(size // piece):
        yield b"%x\r\n" % piece + b" " * piece + b"\r\n"
    yield b"0\r\n\r\n"


def body_of(framing: str, size: int = BIG) -> bytes | Iterator[bytes]:
    return b" " * size if framing == "length" else chunked(size)


@pytest.mark.parametrize("close", [False, True], ids=["keep-alive", "connection-close"])
@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_an_oversize_body_gets_a_readable_413(served: tuple[Server, str], framing: str, close: bool) -> None:
    server, key = served
    status, headers, body, closed = exchange(server.port, post_head("/v1/contacts/upsert", key, framing, close=close),
                                             body_of(framing))
    assert (status, body) == (413, {"data": None, "error": {"status": 413, "message": TOO_LARGE}})
    assert headers["connection"] == "close"  # the rest of that body cannot be told from a next request
    assert closed < 1.0  # closed as soon as the client has finished, not after a timeout


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_wrong_key_with_a_large_body_and_connection_close_gets_a_readable_401(
        served: tuple[Server, str], framing: str) -> None:
    server, _ = served
    status, _, body, _ = exchange(server.port, post_head("/v1/contacts/upsert", "mkt_wrong", framing, close=True),
                                  body_of(framing))
    assert (status, body["error"]["message"]) == (401, "The API key you provided is invalid or has been revoked.")


@pytest.mark.parametrize("close", [False, True], ids=["keep-alive", "connection-close"])
def test_an_oversize_one_click_unsubscribe_gets_413(served: tuple[Server, str], close: bool) -> None:
    from marketing_cli.services.delivery.tracking import UNSUBSCRIBE_MAX_BYTES

    server, _ = served
    head = post_head("/t/u/not-a-token", None, "length", size=4 * MIB, close=close)
    status, _, body, _ = exchange(server.port, head.replace(b"application/json", b"application/x-www-form-urlencoded"),
                                  b"List-Unsubscribe=One-Click&" + b"x" * (4 * MIB - 27))
    assert (status, body["error"]["message"]) == (
        413, f"The request body is too large: the limit is {UNSUBSCRIBE_MAX_BYTES // 1024} KiB.")
    # Within the limit the body is read and the token decides (this one is not valid).
    r = httpx.post(server.base + "/t/u/not-a-token", content=b"List-Unsubscribe=One-Click",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 404 and "This link is not valid." in r.text


def test_a_client_that_stops_sending_mid_body_is_closed_after_a_second(served: tuple[Server, str]) -> None:
    server, key = served
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.settimeout(10)
        s.sendall(post_head("/v1/contacts/upsert", key, "length") + b" " * MIB)
        answer = b""
        while chunk := s.recv(65536):  # the answer, then the server's half-close
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 413 ")
        s.sendall(b" " * 65536)  # still read and dropped: the server lingers
        time.sleep(1.5)  # nothing for longer than the linger: the server has closed
        with pytest.raises(OSError):  # its kernel resets what arrives now
            for _ in range(20):
                s.sendall(b" " * 65536)
                time.sleep(0.05)


def test_bodies_read_in_full_keep_the_connection_alive(served: tuple[Server, str]) -> None:
    """Answers given after the whole request arrived keep the connection, a refusal included."""
    server, key = served
    small = b'{"email_address": "ann@example.com"}'
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.settimeout(10)
        pending = b""
        for sent_key, status in ((key, 200), ("mkt_wrong", 401), (key, 200)):
            s.sendall(post_head("/v1/contacts/upsert", sent_key, "length", size=len(small)) + small)
            while b"\r\n\r\n" not in pending:
                pending += s.recv(65536)
            head, _, pending = pending.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 %d " % status), head
            assert b"connection: close" not in head.lower()
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(pending) < length:
                pending += s.recv(65536)
            pending = pending[length:]


def test_the_server_keeps_serving_after_refusing_large_bodies(served: tuple[Server, str]) -> None:
    server, key = served
    for _ in range(3):
        exchange(server.port, post_head("/v1/contacts/upsert", key, "length", close=True), b" " * (2 * MIB))
    r = httpx.get(server.base + "/v1/workspace", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200


def test_every_route_reads_its_body_through_read_body() -> None:
    """A body is only read with a limit: through api/responses.read_body (or read_json over it)."""
    api = Path(__file__).resolve().parents[2] / "marketing_cli" / "api"
    unbounded = ("request.body()", "request.stream()", "request.form(", "request.json()", "await receive()")
    offenders = [f"{path.name}: {needle}" for path in sorted(api.glob("*.py")) if path.name != "responses.py"
                 for needle in unbounded if needle in path.read_text(encoding="utf-8")]
    assert offenders == []

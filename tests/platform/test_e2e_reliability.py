"""Network and process faults against a real `mkt serve` (docs/reliability.md).

Idle connections, a slowloris client, oversized heads, a trickled body, a client that
leaves mid-request, the connection cap, and SIGTERM during a large HTTP import.
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Server, mkt
from tests.engines import new_database

pytestmark = pytest.mark.slow

HEADER_TIMEOUT = 1.5


def raw_request(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes, return everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(timeout)
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may refuse before it has read everything
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def read_rest(s: socket.socket, seconds: float = 2.0) -> bytes:
    """What else the server sends until it closes the connection (or `seconds` pass)."""
    s.settimeout(seconds)
    rest = b""
    try:
        while chunk := s.recv(4096):
            rest += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return rest


def error_body(response: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[tuple[Server, str]]:
    db = new_database(postgres_server, tmp_path_factory.mktemp("reliability"), "served.db")
    key = mkt(db, "init", "--name", "Reliable")["api_key"]
    server = Server(db, "--header-timeout", str(HEADER_TIMEOUT), "--body-timeout", "1")
    yield server, key
    assert server.stop() == 0
    assert "Traceback" not in server.output()
    assert '" 500' not in server.output()


def test_serves_others_while_hundreds_of_connections_sit_idle(served: tuple[Server, str]) -> None:
    server, key = served
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(600)]
    try:
        latencies = []
        with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}) as client:
            for _ in range(30):
                started = time.perf_counter()
                assert client.get("/v1/workspace").status_code == 200
                latencies.append(time.perf_counter() - started)
        print(f"\nGET /v1/workspace beside 600 idle connections: median {statistics.median(latencies) * 1000:.1f} ms, "
              f"max {max(latencies) * 1000:.1f} ms")
        assert max(latencies) < 2.0
        # Idle connections that never send a request are closed after the header timeout.
        time.sleep(HEADER_TIMEOUT + 0.5)
        for s in idle[:20]:
            s.settimeout(3)
            assert s.recv(100) == b""
    finally:
        for s in idle:
            s.close()


def test_a_slowloris_client_is_cut_off_after_the_header_timeout(served: tuple[Server, str]) -> None:
    server, _ = served
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        started = time.monotonic()
        answer = b""
        try:
            for byte in b"GET /v1/workspace HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                s.send(bytes([byte]))
                s.settimeout(0.2)
                try:
                    answer = s.recv(4096)
                    break
                except TimeoutError:
                    continue
        except OSError:
            pass
        elapsed = time.monotonic() - started
        if answer:
            answer += read_rest(s)  # the head and the body may arrive in separate segments
    assert HEADER_TIMEOUT - 0.1 <= elapsed < HEADER_TIMEOUT + 1.5
    status, body = error_body(answer)
    assert status == 408
    assert body == {"data": None, "error": {"status": 408,
                                            "message": "The request headers did not arrive within 1.5 seconds."}}


def test_a_huge_header_and_a_huge_url_are_refused_and_the_server_keeps_serving(served: tuple[Server, str]) -> None:
    server, _ = served
    status, body = error_body(raw_request(server.port, b"GET /v1/workspace HTTP/1.1\r\nHost: x\r\nX-Big: "
                                          + b"a" * (1 << 20) + b"\r\n\r\n"))
    assert (status, body["error"]["message"]) == (431, "The request headers are too large: the limit is 32768 bytes.")
    many = b"".join(b"X-%d: %s\r\n" % (i, b"a" * 100) for i in range(400))
    status, _ = error_body(raw_request(server.port, b"GET /v1/workspace HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n"))
    assert status == 431
    status, body = error_body(raw_request(server.port, b"GET /v1/workspace?q=" + b"a" * 100_000
                                          + b" HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert (status, body["error"]["message"]) == (414, "The request URL is too long: the limit is 8192 bytes.")
    assert httpx.get(server.base + "/v1/sms-rates").status_code == 200


def test_a_trickled_body_gets_408(served: tuple[Server, str]) -> None:
    server, key = served
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"POST /v1/tags HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        started = time.monotonic()
        s.settimeout(0.3)
        answer = b""
        while time.monotonic() - started < 5 and not answer:
            try:
                s.send(b" ")
                answer = s.recv(4096)
            except TimeoutError:
                continue
        answer += read_rest(s)  # the head and the body may arrive in separate segments
    status, body = error_body(answer)
    assert (status, body["error"]["message"]) == (408, "The request body did not arrive within 1 seconds.")
    assert 0.9 <= time.monotonic() - started < 3


def test_a_client_that_leaves_mid_request_is_not_a_500(served: tuple[Server, str]) -> None:
    server, key = served
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"POST /v1/tags HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":")
        time.sleep(0.2)
    time.sleep(0.3)
    out = server.output()
    assert "client left before its request was read: POST /v1/tags" in out
    assert "Traceback" not in out and "Exception in ASGI application" not in out


def test_query_string_secrets_never_reach_the_log(served: tuple[Server, str]) -> None:
    server, key = served
    assert httpx.get(server.base + "/v1/workspace", params={"api_key": key, "token": "s3cret"}).status_code == 401
    time.sleep(0.2)
    out = server.output()
    assert "/v1/workspace?api_key=[redacted]&token=[redacted]" in out
    assert key not in out and "s3cret" not in out


def test_tokens_and_signatures_on_the_public_paths_never_reach_the_log(served: tuple[Server, str]) -> None:
    """One request of each public path, each with a token of its own (forged: the log line is
    written whatever the answer), and the Twilio webhooks with a signature: none of them is in
    the log, only the tokens' first four characters."""
    server, _ = served
    tokens = {path: f"Tk{i}q" + secrets.token_urlsafe(12) for i, path in enumerate(
        ("/t/o/{}", "/t/c/{}/1", "/t/u/{}", "/t/v/{}", "/t/confirm/{}", "/s/{}"))}
    with httpx.Client(base_url=server.base) as client:
        for path, token in tokens.items():
            client.get(path.format(token))
            if path in ("/t/u/{}", "/t/confirm/{}"):
                client.post(path.format(token), data={"List-Unsubscribe": "One-Click"})
        signature = secrets.token_urlsafe(21)
        for hook in ("/webhooks/twilio/status", "/webhooks/twilio/inbound"):
            assert client.post(hook, data={"AccountSid": "AC1", "From": "+15550100", "Body": "STOP"},
                               headers={"X-Twilio-Signature": signature}).status_code == 403
    time.sleep(0.3)
    out = server.output()
    for path, token in tokens.items():
        assert token not in out and token[4:] not in out
        assert path.format(token[:4] + "...") in out
    assert signature not in out


def test_requests_past_the_connection_cap_get_503(new_db: Callable[..., Any]) -> None:
    db = new_db("cap.db")
    mkt(db, "init", "--name", "Capped")
    server = Server(db, "--max-connections", "20")
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(25)]
    try:
        time.sleep(0.2)
        status, body = error_body(raw_request(server.port, b"GET /v1/sms-rates HTTP/1.1\r\nHost: x\r\n\r\n"))
        assert (status, body["error"]["message"]) == (
            503, "The server has too many open connections (limit 20): try again shortly.")
    finally:
        for s in idle:
            s.close()
    time.sleep(0.3)
    assert httpx.get(server.base + "/v1/sms-rates").status_code == 200
    assert server.stop() == 0


def _soft_limit_1024() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def test_1100_idle_connections_do_not_exhaust_a_1024_descriptor_limit(new_db: Callable[..., Any]) -> None:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"the hard open-file limit ({hard}) leaves no room to raise")
    mine = resource.getrlimit(resource.RLIMIT_NOFILE)
    if mine[0] < 1400:  # this test process holds the client ends
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    db = new_db("fds.db")
    key = mkt(db, "init", "--name", "Descriptors")["api_key"]
    server = Server(db, preexec_fn=_soft_limit_1024)
    idle = []
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(1100)]
        r = httpx.get(server.base + "/v1/workspace", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert r.status_code == 200
    finally:
        for s in idle:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, mine)
    assert server.stop() == 0
    assert "Too many open files" not in server.output()


def _contacts_csv(rows: int, start: int = 0) -> bytes:
    return ("email,first_name\n" + "".join(f"sig{i}@example.com,Name{i}\n" for i in range(start, start + rows))).encode()


def test_sigterm_during_a_large_import_stops_quickly_and_tells_the_truth(new_db: Callable[..., Any]) -> None:
    db = new_db("sigterm.db")
    key = mkt(db, "init", "--name", "Stopping")["api_key"]
    mkt(db, "billing", "allowance", "set", "contacts", "10000000")
    server = Server(db)
    rows = 150_000
    body = _contacts_csv(rows)
    answer: dict[str, Any] = {}

    def upload() -> None:
        r = httpx.post(server.base + "/v1/contacts/import", content=body, timeout=60,
                       headers={"Authorization": f"Bearer {key}", "Content-Type": "text/csv"})
        answer["status"], answer["body"] = r.status_code, r.json()

    thread = threading.Thread(target=upload)
    thread.start()
    time.sleep(2.0)  # uploaded and importing
    stopped_at = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    code = server.stop()
    took = time.monotonic() - stopped_at
    thread.join(30)
    out = server.output()
    assert code == 0 and took < 8, out
    assert "Traceback" not in out and '" 500' not in out
    from marketing_cli.storage.db import connect

    conn = connect(db)
    stored = conn.execute("SELECT COUNT(*) FROM contacts").fetchone()[0]
    conn.close()
    print(f"\nSIGTERM during a {rows:,}-row import: stopped in {took:.1f} s, answer {answer['status']}, "
          f"{stored:,} rows stored: {answer['body']}")
    if answer["status"] in (200, 201):
        assert stored == rows and answer["body"]["data"]["created"] == rows
    else:
        assert answer["status"] == 503
        message = answer["body"]["error"]["message"]
        if stored == 0:
            assert message.startswith("The server is shutting down: nothing was imported.")
        else:
            assert f"the first {stored} rows of the file were imported" in message


def test_sigterm_during_a_long_search_stops_within_seconds(new_db: Callable[..., Any]) -> None:
    """A request still running after the graceful-shutdown time gets 503 and the process exits.

    The search is timed first through the service, with 150,000 contacts more until it takes
    0.6 s or more, so that it is still running when the stop cuts it (a quarter of its time after
    the request was sent, then the least graceful-shutdown time allowed, 0.1 s, then up to
    0.2 s for the server to act) on a fast machine as on a slow one. (150,000 contacts took
    0.41 s on one machine, and a fixed 0.3 s + 0.2 s had let it finish with a 200.)"""
    from marketing_cli.services.contacts import bulk
    from marketing_cli.services.contacts import search as contact_search
    from marketing_cli.storage.db import connect

    db = new_db("search.db")
    key = mkt(db, "init", "--name", "Searching")["api_key"]
    mkt(db, "billing", "allowance", "set", "contacts", "10000000")
    search = {"fields": [{"merge_tag": "email_address", "operator": "CONTAINS", "value": "example"}] * 100}  # the most a search may have
    conn = connect(db)
    try:
        rows, search_time = 0, 0.0
        while search_time < 0.6 and rows < 1_200_000:
            bulk.import_contacts(conn, 1, _contacts_csv(150_000, start=rows).decode().splitlines(keepends=True))
            started = time.monotonic()
            contact_search.search_contacts(conn, 1, search)
            search_time, rows = time.monotonic() - started, rows + 150_000
    finally:
        conn.close()
    server = Server(db, "--shutdown-timeout", "0.1")
    answer: dict[str, Any] = {}
    sent = threading.Event()

    def trace(event: str, info: dict[str, Any]) -> None:
        if event == "http11.send_request_body.complete":
            sent.set()

    def run_search() -> None:
        started = time.monotonic()
        with httpx.Client(timeout=120) as client:
            r = client.post(server.base + "/v1/contacts/search", json=search,
                            headers={"Authorization": f"Bearer {key}"}, extensions={"trace": trace})
        answer["status"], answer["body"], answer["took"] = r.status_code, r.json(), time.monotonic() - started

    thread = threading.Thread(target=run_search)
    thread.start()
    assert sent.wait(30), "the search request was not sent"  # (on a loaded machine the connect alone can take 0.3 s)
    time.sleep(search_time / 4)  # the search is running
    stopped_at = time.monotonic()
    code = server.stop()
    took = time.monotonic() - stopped_at
    thread.join(60)
    out = server.output()
    print(f"\nSIGTERM during a long search (alone: {search_time:.2f} s): exited in {took:.1f} s; answered {answer['status']} "
          f"after {answer['took']:.1f} s")
    assert code == 0 and took < 5, out
    assert "Traceback" not in out and '" 500' not in out
    assert (answer["status"], answer["body"]["error"]["message"]) == (
        503, "The server is shutting down: the request was stopped before it finished. Try again when it is back.")


def test_a_long_search_does_not_hold_up_other_workspaces(new_db: Callable[..., Any]) -> None:
    """While one workspace runs the heaviest search it may (100 CONTAINS conditions over 80,000
    contacts, in a loop), another workspace's GET /v1/workspace (run on the event loop,
    api/calls.quick_read) keeps answering in milliseconds, not after the search."""
    from marketing_cli.services.account import workspaces
    from marketing_cli.services.contacts import bulk
    from marketing_cli.storage.db import connect

    db = new_db("search.db")
    key = mkt(db, "init", "--name", "Searching")["api_key"]
    mkt(db, "billing", "allowance", "set", "contacts", "10000000")
    conn = connect(db)
    bulk.import_contacts(conn, 1, _contacts_csv(80_000).decode().splitlines(keepends=True))
    other_key = workspaces.create_workspace(conn, "Other")["api_key"]
    conn.close()
    server = Server(db)
    search = {"fields": [{"merge_tag": "email_address", "operator": "CONTAINS", "value": "example"}] * 100}
    stop = threading.Event()
    searches: list[float] = []

    def search_loop() -> None:
        with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
            while not stop.is_set():
                started = time.monotonic()
                assert http.post("/v1/contacts/search", json=search).status_code == 200
                searches.append(time.monotonic() - started)

    thread = threading.Thread(target=search_loop)
    thread.start()
    latencies = []
    try:
        time.sleep(0.3)
        with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {other_key}"}) as http:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                started = time.monotonic()
                r = http.get("/v1/workspace")
                latencies.append(time.monotonic() - started)
                assert r.status_code == 200 and r.json()["data"]["workspace"]["name"] == "Other"
                time.sleep(0.02)
    finally:
        stop.set()
        thread.join(120)
        assert server.stop() == 0
    print(f"\nbeside {len(searches)} searches (median {statistics.median(searches):.2f} s): {len(latencies)} reads, "
          f"median {statistics.median(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.0f} ms")
    # no read waited for a search: a read queued behind one would wait most of it, and reads
    # come every 20 ms through a search's whole length, so most would be slow. A scheduling
    # hiccup of the 2-core machine under a parallel suite is not that (single reads took 178 and
    # 591 ms beside 300 ms searches while the 95th percentile stayed at 6 ms): the 95th
    # percentile is held to half a search, and the slowest read is only printed.
    slow = sorted(latencies)[int(len(latencies) * 0.95)]
    assert slow < statistics.median(searches) / 2
    assert statistics.median(latencies) < 0.1

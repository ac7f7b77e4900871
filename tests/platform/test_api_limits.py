"""The server's limits in-process: log redaction, the serve defaults, help without `<bool>`.

The limits themselves are exercised against a real server in tests/platform/test_e2e_reliability.py.
"""

from __future__ import annotations

import inspect
import logging
import resource
import time
from collections.abc import Callable
from typing import Any

import pytest

from marketing_cli.api import limits
from marketing_cli.api.limits import RedactSecrets, redact


@pytest.mark.parametrize(("text", "expected"), [
    ("/v1/workspace?api_key=mkt_abcdefghijkl", "/v1/workspace?api_key=[redacted]"),
    ("/v1/x?a=1&token=t0k&b=2", "/v1/x?a=1&token=[redacted]&b=2"),
    ("/v1/x?API-KEY=zz&Password=pw", "/v1/x?API-KEY=[redacted]&Password=[redacted]"),
    ("Authorization: Bearer mkt_abcdefghijkl", "Authorization: Bearer [redacted]"),
    ("key mkt_abcdefghijkl leaked", "key [redacted] leaked"),
    ("GET /t/o/AAAAAQIDBAUGBwgJCg HTTP/1.1", "GET /t/o/AAAA... HTTP/1.1"),
    ("/t/c/AAAAAQIDBAUGBwgJCg/17", "/t/c/AAAA.../17"),
    ("/news/t/u/AAAAAQIDBAUGBwgJCg", "/news/t/u/AAAA..."),
    ("/t/v/AAAAAQIDBAUGBwgJCg /t/confirm/AAAAAQIDBAUGBwgJCg", "/t/v/AAAA... /t/confirm/AAAA..."),
    ("/s/Ab3dEf9hIjK", "/s/Ab3d..."),
    ("/v1/sms-campaigns/64a1/statistics", "/v1/sms-campaigns/64a1/statistics"),  # not a token path
    ("/v1/contacts?tag=3&keyword=a", "/v1/contacts?tag=3&keyword=a"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_access_log_lines_are_redacted_and_keep_their_shape() -> None:
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", "/v1/workspace?api_key=mkt_secretsecret", "1.1", 200), None)
    assert RedactSecrets().filter(record)
    assert record.args[2] == "/v1/workspace?api_key=[redacted]"
    assert record.getMessage() == '127.0.0.1:5 - "GET /v1/workspace?api_key=[redacted] HTTP/1.1" 200'


def test_any_log_line_is_redacted() -> None:
    record = logging.LogRecord("mkt.api", logging.ERROR, __file__, 1, "failed with %s", ("Bearer mkt_secretsecret",),
                               None)
    RedactSecrets().filter(record)
    assert record.getMessage() == "failed with Bearer [redacted]"


def test_serve_defaults_are_the_documented_limits(cli: Callable[..., Any]) -> None:
    import inspect

    from marketing_cli.api.responses import BODY_TIMEOUT
    from marketing_cli.cli.main import serve

    defaults = {name: p.default for name, p in inspect.signature(serve).parameters.items()}
    assert defaults["max_connections"] == limits.MAX_CONNECTIONS
    assert defaults["header_timeout"] == limits.HEADER_TIMEOUT
    assert defaults["body_timeout"] == BODY_TIMEOUT == limits.BODY_TIMEOUT
    assert defaults["shutdown_timeout"] == limits.GRACEFUL_SHUTDOWN


def test_the_open_file_limit_is_raised_to_the_hard_limit() -> None:
    from marketing_cli.cli.serve import raise_open_file_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        assert raise_open_file_limit() == (hard if hard != resource.RLIM_INFINITY else max(1024, 65536))
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= min(1024, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"], ["tags", "list", "--help"]])
def test_help_shows_no_bool_type_on_flags(cli: Callable[..., Any], args: list[str]) -> None:
    result = cli(*args)
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout
    assert "--help" in result.stdout


def test_the_uvicorn_protocol_hooks_still_exist() -> None:
    """GuardedHttpToolsProtocol overrides these uvicorn methods: a uvicorn upgrade must keep them."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    for name in ("connection_made", "connection_lost", "data_received", "on_message_begin", "on_url", "on_header",
                 "on_headers_complete", "on_message_complete", "on_response_complete", "shutdown",
                 "_unset_keepalive_if_required", "send_400_response"):
        assert callable(getattr(HttpToolsProtocol, name)), name
    # The lingering close sets these on each request's cycle: its transport (whose close it
    # replaces) and keep_alive (off until the whole request has arrived).
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    source = inspect.getsource(RequestResponseCycle)
    for attribute in ("self.transport.close()", "self.keep_alive", "self.response_started"):
        assert attribute in source, attribute


# An INSERT that never ends: interrupted inside a transaction, SQLite rolls the whole transaction back itself.
INFINITE = "INSERT INTO temp.sink WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"


@pytest.mark.parametrize(("committed", "message"), [
    (0, "The server is shutting down: nothing was imported. Send the file again when it is back."),
    (20000, "The server is shutting down: the first 20000 rows of the file were imported, the rest were not. "
            "Send the rest again when it is back."),
])
def test_an_import_stopped_by_the_shutdown_rolls_back_its_batch_and_says_what_was_kept(
        conn: Any, workspace: dict[str, Any], committed: int, message: str) -> None:
    import threading

    from marketing_cli.api.contacts_io import StopOnShutdown
    from marketing_cli.errors import MktError
    from marketing_cli.services.contacts import tags
    from marketing_cli.storage.db import transaction

    conn.execute("CREATE TEMP TABLE sink (x INTEGER)")
    event = threading.Event()
    stop = StopOnShutdown(event)
    stop.GRACE = 0.0

    def import_batches() -> None:
        if committed:
            stop.progress(committed)  # a batch committed before the stop began
        event.set()  # SIGTERM arrives while the next batch runs
        with transaction(conn):
            tags.create_tag(conn, workspace["id"], {"name": "half-written"})
            conn.execute(INFINITE)

    started = time.monotonic()
    with pytest.raises(MktError) as raised:
        stop.run(lambda: conn, import_batches)
    assert (raised.value.status, raised.value.message) == (503, message)
    # Stopped by the shutdown's own interrupt (SQLite's progress handler; PostgreSQL's watchdog),
    # not by the connection's 60 s statement_timeout, which would give the same answer.
    assert time.monotonic() - started < 30
    assert not conn.in_transaction
    assert [t["name"] for t in tags.list_tags(conn, workspace["id"])] == []
    with pytest.raises(MktError) as refused:  # the stop began before the import: nothing is started
        stop.run(lambda: conn, lambda: pytest.fail("ran"))
    assert refused.value.status == 503

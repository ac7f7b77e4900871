"""The HTTP server's limits: connections, timeouts and request-head sizes (docs/reliability.md).

uvicorn gives a keep-alive timeout, a connection cap (`limit_concurrency`) and a graceful
shutdown timeout, but no limit on how long a client may take to send its request head, nor
on the size of that head with httptools. `GuardedHttpToolsProtocol` adds them to uvicorn's
httptools protocol (`mkt serve` passes it as `http=`):

- header timeout: a connection must deliver a complete request head within `header_timeout`
  seconds of opening (or of the first byte of its next request). An idle new connection is
  then closed; a client that trickles its head gets 408 with the error body and is closed.
- URL and head size: a request line longer than MAX_URL_BYTES gets 414, a head larger than
  MAX_HEAD_BYTES gets 431, both with the error body, before the application sees anything.
- connection cap: past `max_connections` open connections a request gets 503 with the error
  body (uvicorn's own answer is plain text).
- answers sent before the request has fully arrived (a 401 for a wrong key, a 413 for a body
  over the limit, a refusal above) close the connection with a lingering close, whatever
  the request's framing (Content-Length, chunked) or its `Connection` header: the answer
  says `Connection: close`, the server half-closes (FIN after the answer) and reads and
  drops what the client is still sending until the client closes, nothing has arrived for
  LINGER seconds, LINGER_MAX seconds have passed or MAX_DRAIN_BYTES were dropped. Closing at
  once with unread data makes the kernel answer with a reset, which destroys the answer the
  client has not read yet and fails its send of the body.
- graceful shutdown: the lifespan's `shutting_down` event is set as soon as the server
  begins to stop, so long handlers (the HTTP import) can stop at a safe point.

The body timeout is enforced where bodies are read (`api/responses.read_body`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from marketing_cli.api.responses import BODY_TIMEOUT, MAX_BODY_BYTES  # noqa: F401 - listed here with the rest
from marketing_cli.storage.encoding import dumps_bytes

HEADER_TIMEOUT = 10.0  # seconds to send a complete request head
KEEP_ALIVE_TIMEOUT = 5.0  # seconds an idle keep-alive connection stays open
MAX_CONNECTIONS = 4096  # open connections before requests get 503
BACKLOG = 2048  # connections the kernel queues before the server accepts them
GRACEFUL_SHUTDOWN = 5.0  # seconds in-flight requests get to finish on SIGTERM/SIGINT
MAX_URL_BYTES = 8 * 1024  # the request target (path and query string)
LINGER = 1.0  # a lingering close ends once nothing has arrived for this many seconds
LINGER_MAX = 30.0  # ... or after this many seconds in all (the body timeout: a client's time to send a body)
MAX_DRAIN_BYTES = 64 * 1024 * 1024  # ... or once this much was dropped: the largest body a route takes (CSV import)
MAX_HEAD_BYTES = 32 * 1024  # the header lines together (names, values, separators)

URL_TOO_LONG = "The request URL is too long: the limit is {limit} bytes."
HEAD_TOO_LARGE = "The request headers are too large: the limit is {limit} bytes."
HEAD_TIMEOUT = "The request headers did not arrive within {seconds:g} seconds."
TOO_MANY_CONNECTIONS = "The server has too many open connections (limit {limit}): try again shortly."

log = logging.getLogger("mkt.api")


class _Refused(Exception):
    """Raised inside a parser callback to stop parsing a request that is refused."""


def error_bytes(status: int, message: str, reason: str) -> bytes:
    """A complete HTTP/1.1 error response with the error body, closing the connection."""
    body = dumps_bytes({"data": None, "error": {"status": status, "message": message}})
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("ascii") + body


class _CycleTransport:
    """The transport as uvicorn's request cycle sees it: writes go straight through (the bound
    methods themselves, no extra call), and the close after an answer is the protocol's."""

    __slots__ = ("write", "is_closing", "get_extra_info", "close")

    def __init__(self, protocol: GuardedHttpToolsProtocol, transport: Any) -> None:
        self.write = transport.write
        self.is_closing = transport.is_closing
        self.get_extra_info = transport.get_extra_info
        self.close = protocol.close_after_answer


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header timeout, head size limits, a JSON 503 cap and
    a lingering close after an answer sent before the request had fully arrived."""

    header_timeout = HEADER_TIMEOUT

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any], _loop: Any = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.max_connections = self.limit_concurrency
        self.limit_concurrency = None  # checked here, to answer with the error body
        self.head_timer: asyncio.TimerHandle | None = None
        self.reading_head = True  # no complete head yet for the current request
        self.begun = False  # a byte of the current request has arrived
        self.head_bytes = 0  # raw bytes received while reading the head
        self.header_bytes = 0  # the header lines parsed so far
        self.refused = False  # answered and closing (lingering): whatever arrives is dropped
        self.request_complete = True  # the current request has fully arrived (its body included)
        self.keep_alive_after_body = False  # the current request's cycle may keep the connection once it has
        self.linger_since = self.last_data = 0.0
        self.dropped = 0  # bytes dropped while lingering
        self.cycle_transport: _CycleTransport | None = None

    # --- the header timeout -----------------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.cycle_transport = _CycleTransport(self, transport)
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _start_head_timer(self) -> None:
        if self.head_timer is None:
            self.head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.transport.is_closing() or not self.reading_head:
            return
        if self.begun:  # a request was begun and never finished: say why it ends
            self._refuse(408, HEAD_TIMEOUT.format(seconds=self.header_timeout), "Request Timeout")
        else:
            self.transport.close()

    # --- parsing, with the head limits --------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.refused:
            self._drop(len(data))
            return
        self._unset_keepalive_if_required()
        if self.reading_head:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _Refused):
                return
            self._invalid()
        except httptools.HttpParserError:
            self._invalid()
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        else:
            if self.reading_head and self.head_bytes > MAX_HEAD_BYTES + MAX_URL_BYTES + 1024:
                self._refuse(431, HEAD_TOO_LARGE.format(limit=MAX_HEAD_BYTES), "Request Header Fields Too Large")

    def _invalid(self) -> None:
        msg = "Invalid HTTP request received."
        self.logger.warning(msg)
        self.send_400_response(msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.reading_head = self.begun = True
        self.request_complete = False
        self.header_bytes = 0
        self._start_head_timer()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_URL_BYTES:
            self._refuse(414, URL_TOO_LONG.format(limit=MAX_URL_BYTES), "URI Too Long")
            raise _Refused

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self.header_bytes += len(name) + len(value) + 4
        if self.header_bytes > MAX_HEAD_BYTES:
            self._refuse(431, HEAD_TOO_LARGE.format(limit=MAX_HEAD_BYTES), "Request Header Fields Too Large")
            raise _Refused

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        self.reading_head = self.begun = False
        self.head_bytes = 0
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            log.warning("%s: %d open connections, over the limit of %d: 503", self._peer(), len(self.connections),
                        self.max_connections)
            self._refuse(503, TOO_MANY_CONNECTIONS.format(limit=self.max_connections), "Service Unavailable")
            raise _Refused
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not before:
            # Until the whole request has arrived the connection cannot carry another one: an
            # answer sent before that (a 401, a 413) says `Connection: close` and the connection
            # closes lingering (close_after_answer). A request without a body completes in this
            # same parse, before its handler starts, and keeps the connection alive as asked.
            self.keep_alive_after_body = cycle.keep_alive
            cycle.keep_alive = False
            cycle.transport = self.cycle_transport

    def on_message_complete(self) -> None:
        self.request_complete = True
        super().on_message_complete()
        cycle = self.cycle
        if self.keep_alive_after_body and not cycle.response_started:
            cycle.keep_alive = True
        self.keep_alive_after_body = False

    def on_response_complete(self) -> None:
        if self.refused:  # lingering before the close: no next request, no keep-alive timer
            self.server_state.total_requests += 1
            return
        super().on_response_complete()

    # --- closing after an answer ------------------------------------------------------------

    def close_after_answer(self) -> None:
        """The request's cycle closes the connection after its answer (or on an error): at once
        when the request has fully arrived, else lingering so the client can read the answer."""
        if self.request_complete or self.transport.is_closing():
            self.transport.close()
        else:
            self._linger()

    def _linger(self) -> None:
        """Half-close now and close once the client has stopped sending (see the module docstring)."""
        self.refused = True
        self.pipeline.clear()
        self._stop_head_timer()
        self._unset_keepalive_if_required()
        if self.transport.is_closing():
            return
        if self.transport.can_write_eof():
            self.transport.write_eof()  # a FIN after the answer: the client sees where it ends
        self.flow.resume_reading()  # uvicorn pauses reading while a body waits for its handler
        self.linger_since = self.last_data = self.loop.time()
        self.loop.call_later(LINGER, self._linger_check)

    def _drop(self, size: int) -> None:
        self.dropped += size
        self.last_data = self.loop.time()
        if self.dropped > MAX_DRAIN_BYTES and not self.transport.is_closing():
            self.transport.close()

    def _linger_check(self) -> None:
        if self.transport.is_closing():
            return
        now = self.loop.time()
        idle_left = self.last_data + LINGER - now
        total_left = self.linger_since + LINGER_MAX - now
        if idle_left <= 0 or total_left <= 0:
            self.transport.close()
        else:
            self.loop.call_later(min(idle_left, total_left), self._linger_check)

    def _refuse(self, status: int, message: str, reason: str) -> None:
        """Answer `status` with the error body and close; the application never sees the request."""
        self.refused = True
        self._stop_head_timer()
        log.info("%s: request refused with %d: %s", self._peer(), status, message)
        if self.transport.is_closing():
            return
        self.transport.write(error_bytes(status, message, reason))
        self._linger()

    def _peer(self) -> str:
        return "%s:%d" % self.client if self.client else "-"

    # --- shutdown -----------------------------------------------------------------------

    def shutdown(self) -> None:
        """The server begins to stop: tell the application's long handlers (lifespan state)."""
        event = self.app_state.get("shutting_down")
        if event is not None:
            event.set()
        self.keep_alive_after_body = False  # the request in progress is the connection's last
        super().shutdown()


# --- secrets in logs ----------------------------------------------------------------------

_SECRET_PARAM = re.compile(
    r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|authorization|password|secret|signature)=)[^&;#\s\"]*")
_SECRET_WORD = re.compile(r"(?i)(bearer\s+)[^\s\"']+|\bmkt_[A-Za-z0-9_-]{8,}")
# The public paths carry a recipient's token in the path (api/tracking.py, api/sms_links.py):
# the pixel, a click, the unsubscribe page, view online, the double opt-in confirmation and an
# SMS short link, under any tracking prefix. A log keeps the first TOKEN_PREFIX characters, enough
# to find the message again (`mkt` stores no token: it is recomputed from the message id) and
# too few to act on the recipient's behalf.
TOKEN_PREFIX = 4
_PATH_TOKEN = re.compile(r"(/t/(?:o|c|u|v|confirm)/|/s/)([A-Za-z0-9_-]{%d})[A-Za-z0-9_-]*" % TOKEN_PREFIX)


def redact(text: str) -> str:
    """`text` with API keys, bearer tokens and secret query parameters replaced by `[redacted]`,
    and the tokens in public paths cut to their first TOKEN_PREFIX characters and `...`."""
    text = _SECRET_PARAM.sub(r"\1[redacted]", text)
    text = _PATH_TOKEN.sub(r"\1\2...", text)
    return _SECRET_WORD.sub(lambda m: (m.group(1) or "") + "[redacted]", text)


class RedactSecrets(logging.Filter):
    """A handler filter: no log line carries an API key or a token, whichever logger wrote it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            # uvicorn's access formatter unpacks these five arguments; the third is path?query.
            args = list(record.args)
            args[2] = redact(str(args[2]))
            record.args = tuple(args)
            return True
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True

"""The one outbound HTTP helper: every request mkt makes to an address a user gave (a
template's URL, an RSS or Atom feed, an automation's webhook) goes through `request`.

- **http(s) only**, for the URL given and for every redirect the caller lets it follow
  (`max_redirects`: templates and feeds 5, webhooks none), each redirect target checked
  again like the first URL.
- **Public addresses only.** The host is resolved once per hop and every address it
  resolves to must be public: loopback, private, link-local (the cloud metadata services),
  shared, multicast, reserved and unspecified networks are refused unless the server runs
  with `MKT_ALLOW_PRIVATE_URLS=1` (an operator setting for local networks and tests).
- **The checked address is the one connected to.** The network backend under httpcore is
  handed that address and never resolves the name again, so a DNS answer that changes
  between the check and the connection (rebinding: a TTL-0 name answering a public address,
  then 127.0.0.1) cannot send the request elsewhere; the name still travels as `Host`, as
  the TLS server name and as the name the certificate must carry.
- **One deadline over everything**: the name's resolution, the connection, TLS, sending,
  the response's head and its body, across redirects. Every socket operation waits at most
  for what is left of it. A per-read timeout (what httpx offers) lets a server that sends a
  byte every few seconds hold the caller for ever, the head included, which httpx reads
  before the caller sees any of it: that is why this module talks to httpcore (httpx's own
  transport layer) with a backend of its own instead of going through httpx.Client.
- **A cap on what is read**: the head by h11 (httpcore's 100 KiB), the body by `max_bytes`
  (after gzip or deflate decoding, so a small compressed answer cannot grow past it): past it
  the answer is refused (`TooLarge`), or cut there when `cut=True` (a webhook's answer is its
  status; at most 64 KB of its body is read). Only a 2xx answer's body is read at all.
- **A clear reason on failure**: `OutboundError`, an MktError(400) carrying the message the
  template import has always given, with `kind` (what failed) and `reason` (a short phrase)
  for callers that word it their own way (the webhook step retries a timeout, not a private
  address).
"""

from __future__ import annotations

import codecs
import email.message
import functools
import ipaddress
import os
import socket
import ssl
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.numbers import parse_digits

if TYPE_CHECKING:
    import httpcore
    import httpx

ALLOW_PRIVATE_ENV = "MKT_ALLOW_PRIVATE_URLS"
REDIRECTS = (301, 302, 303, 307, 308)
WRITE_CHUNK = 16 * 1024  # a request body goes out in pieces, each under what is left of the deadline

BAD_SCHEME = "The url must start with http:// or https://"
PRIVATE = "The url points to a private, loopback or reserved network address, which is not allowed."
UNRESOLVED = "We could not find the host of the url: {host}."
FETCH_FAILED = "We could not fetch the url: {reason}."
TOO_LARGE = "The page at the url is larger than {size}."
BAD_REDIRECT = "The url redirected to an address that does not start with http:// or https://"
TOO_MANY_REDIRECTS = "The url redirected more than {count} times."

IN_TIME = "it did not answer in time"
CONNECT_FAILED = "the connection to its server failed"
REQUEST_FAILED = "the request failed"
NOT_VALID = "the url is not valid"


class OutboundError(MktError):
    """A request that failed: MktError(400, message); `kind` says what failed (invalid,
    unresolved, private, timeout, connect, failed, too_large, redirect) and `reason` says it
    in a phrase ("it did not answer in time")."""

    def __init__(self, kind: str, message: str, reason: str | None = None) -> None:
        super().__init__(400, message)
        self.kind = kind
        self.reason = reason or message.rstrip(".")


def _failed(kind: str, reason: str) -> OutboundError:
    return OutboundError(kind, FETCH_FAILED.format(reason=reason), reason)


@dataclass
class Answer:
    """The final answer: its status and headers (names in lower case), the body read (a 2xx
    answer's only), whether the body was cut at the cap, and the address it came from."""

    status: int
    headers: dict[str, str]
    url: str
    body: bytes = b""
    cut: bool = False
    elapsed: float = field(default=0.0, compare=False)

    @property
    def charset(self) -> str | None:
        """The charset the Content-Type declares (None when it declares none)."""
        value = self.headers.get("content-type", "")
        if not value:
            return None
        message = email.message.Message()
        message["content-type"] = value
        charset = message.get_param("charset")
        return charset.strip() if isinstance(charset, str) and charset.strip() else None


# --- addresses ------------------------------------------------------------------------------

def allow_private() -> bool:
    return os.environ.get(ALLOW_PRIVATE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def has_http_scheme(url: str) -> bool:
    return url[:8].lower().startswith(("http://", "https://"))


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def resolve(host: str, port: int) -> str:
    """The address to connect to; OutboundError when any address of the host is not public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError, OverflowError):
        raise OutboundError("unresolved", UNRESOLVED.format(host=host[:200])) from None
    # IPv4 first: a host with both kinds is reached where IPv6 has no route too
    addresses = sorted({info[4][0] for info in infos}, key=lambda a: ":" in a)
    if not addresses:
        raise OutboundError("unresolved", UNRESOLVED.format(host=host[:200]))
    if not allow_private() and not all(is_public(a) for a in addresses):
        raise OutboundError("private", PRIVATE)
    return addresses[0]


def _resolve_within(host: str, port: int, clock: Deadline) -> str:
    """`resolve` under the deadline: getaddrinfo has no timeout of its own, so it runs in a
    thread of its own that is left behind (to finish on the resolver's own timeouts) when the
    deadline passes first."""
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append(resolve(host, port))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome.append(exc)

    worker = threading.Thread(target=work, name="mkt-resolve", daemon=True)
    worker.start()
    worker.join(clock.left())
    if not outcome:
        raise _failed("timeout", IN_TIME)
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


@functools.cache
def tls() -> ssl.SSLContext:
    """One TLS context for every request (building one reads the CA bundle: about 0.2 s)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


# --- the deadline, held by every socket operation ------------------------------------------

class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.at = self.started + seconds

    def left(self, cap: float | None = None) -> float:
        """The seconds left (at most `cap`); OutboundError(timeout) when none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise _failed("timeout", IN_TIME)
        return left if cap is None else min(cap, left)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def _network(address: str, clock: Deadline) -> httpcore.NetworkBackend:
    """httpcore's synchronous backend, connecting to `address` whatever name it is given,
    with every operation held to the deadline."""
    import httpcore

    def bounded(timeout: float | None, expired: type[Exception]) -> float:
        try:
            return clock.left(timeout)
        except OutboundError:
            raise expired("the deadline passed") from None

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self.inner.read(max_bytes, bounded(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            for start in range(0, len(buffer), WRITE_CHUNK):
                self.inner.write(buffer[start:start + WRITE_CHUNK], bounded(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                      timeout: float | None = None) -> httpcore.NetworkStream:
            return Stream(self.inner.start_tls(ssl_context, server_hostname,
                                               bounded(timeout, httpcore.ConnectTimeout)))

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self.sync = httpcore.SyncBackend()

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                        socket_options: Any = None) -> httpcore.NetworkStream:
            return Stream(self.sync.connect_tcp(address, port, bounded(timeout, httpcore.ConnectTimeout),
                                                local_address, socket_options))

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Any = None) -> httpcore.NetworkStream:
            raise httpcore.ConnectError("no unix sockets here")

        def sleep(self, seconds: float) -> None:
            time.sleep(bounded(seconds, httpcore.PoolTimeout))

    return Backend()


# --- the request ------------------------------------------------------------------------------

def request(method: str, url: str, *, deadline: float, max_bytes: int, size: str, cut: bool = False,
            headers: dict[str, str] | None = None, content: bytes = b"", max_redirects: int = 0) -> Answer:
    """`method url` under the rules of the module docstring: the final Answer, or
    OutboundError. `size` names `max_bytes` in the refusal ("5 MiB"); `cut` reads a body
    longer than it up to it instead of refusing."""
    import httpx

    clock = Deadline(deadline)
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        raise _failed("invalid", NOT_VALID) from None
    if not current.host:
        raise _failed("invalid", "the url has no host name")
    for _ in range(max_redirects + 1):
        answer = _hop(method, current, clock, headers or {}, content, max_bytes, size, cut)
        location = answer.headers.get("location")
        if max_redirects == 0 or answer.status not in REDIRECTS or location is None:
            answer.elapsed = clock.elapsed()
            return answer
        try:
            current = current.join(location)
        except (httpx.InvalidURL, ValueError):
            raise OutboundError("redirect", BAD_REDIRECT) from None
        if current.scheme not in ("http", "https"):
            raise OutboundError("redirect", BAD_REDIRECT)
        if answer.status == 303:
            method, content = "GET", b""
    raise OutboundError("redirect", TOO_MANY_REDIRECTS.format(count=max_redirects))


def _hop(method: str, url: httpx.URL, clock: Deadline, headers: dict[str, str], content: bytes, max_bytes: int,
         size: str, cut: bool) -> Answer:
    """One request to one address (the redirect loop is the caller's)."""
    import httpcore

    if url.scheme not in ("http", "https") or not url.host:
        raise OutboundError("redirect", BAD_REDIRECT)
    port = url.port or (443 if url.scheme == "https" else 80)
    if not 0 < port < 65536:
        raise _failed("invalid", NOT_VALID)
    host = url.raw_host.decode("ascii")
    address = _resolve_within(host, port, clock)
    sent = {"Host": url.netloc.decode("ascii"), "Accept-Encoding": "gzip, deflate", **headers}
    if content:
        sent["Content-Length"] = str(len(content))
    target = httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=port, target=url.raw_path)
    budget = clock.left()
    extensions = {"timeout": {"connect": budget, "read": budget, "write": budget, "pool": budget}}
    try:
        with httpcore.ConnectionPool(ssl_context=tls(), max_connections=1, retries=0,
                                     network_backend=_network(address, clock)) as pool, \
                pool.stream(method, target, headers=list(sent.items()), content=content or None,
                            extensions=extensions) as response:
            answer = Answer(status=response.status, url=str(url), headers={
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers})
            if 200 <= response.status < 300:
                answer.body, answer.cut = _read(response, answer.headers, max_bytes, size, cut)
            return answer
    except OutboundError:
        raise
    except httpcore.TimeoutException:
        raise _failed("timeout", IN_TIME) from None
    except httpcore.ConnectError:
        raise _failed("connect", CONNECT_FAILED) from None
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol, zlib.error):
        raise _failed("failed", REQUEST_FAILED) from None


def _decoder(encoding: str) -> Any:
    """A zlib decompressor for the Content-Encoding (None: the body is as sent)."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return zlib.decompressobj()
    raise _failed("failed", f"the answer is compressed as {encoding[:40]!r}, which mkt does not read")


def _read(response: httpcore.Response, headers: dict[str, str], max_bytes: int, size: str,
          cut: bool) -> tuple[bytes, bool]:
    """The body, at most max_bytes of it once decoded: refused past it, or cut there."""
    decoder = _decoder(headers.get("content-encoding", ""))
    declared = parse_digits(headers.get("content-length", ""), 40)
    if declared is not None and declared > max_bytes and decoder is None and not cut:
        raise OutboundError("too_large", TOO_LARGE.format(size=size))
    chunks: list[bytes] = []
    total = 0
    for chunk in response.iter_stream():
        room = max_bytes - total
        if decoder is not None:
            chunk = decoder.decompress(chunk, room + 1)  # one byte past the room tells it is over
        if len(chunk) > room:
            if not cut:
                raise OutboundError("too_large", TOO_LARGE.format(size=size))
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        total += len(chunk)
    if decoder is not None:
        tail = decoder.flush()
        if len(tail) > max_bytes - total:
            if not cut:
                raise OutboundError("too_large", TOO_LARGE.format(size=size))
            return b"".join(chunks) + tail[:max_bytes - total], True
        chunks.append(tail)
    return b"".join(chunks), False


# --- text -------------------------------------------------------------------------------------

# The charsets a page or a feed may declare: the Encoding Standard's (what browsers read),
# as Python names them. Anything else (unicode_escape, rot13, punycode, idna, utf-7 ...)
# can turn bytes into escapes, lone surrogates or code the page never held: refused.
TEXT_CODECS = frozenset({
    "utf-8", "utf-16", "utf-16-le", "utf-16-be", "ascii", "iso8859-1", "iso8859-2", "iso8859-3", "iso8859-4",
    "iso8859-5", "iso8859-6", "iso8859-7", "iso8859-8", "iso8859-10", "iso8859-13", "iso8859-14",
    "iso8859-15", "iso8859-16", "cp1250", "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256",
    "cp1257", "cp1258", "cp874", "cp866", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "shift_jis",
    "cp932", "euc_jp", "iso2022_jp", "gb2312", "gbk", "gb18030", "big5", "big5hkscs", "euc_kr", "cp949",
})
_WEB_NAMES = {"windows-874": "cp874", "x-mac-cyrillic": "mac-cyrillic", "x-mac-roman": "mac-roman"}


def text_codec(charset: str | None) -> str | None:
    """The Python codec for a declared charset; None when it is unknown or not a text charset."""
    if not charset:
        return "utf-8"
    try:
        label = charset.strip().strip("\"'").lower()
        name = codecs.lookup(_WEB_NAMES.get(label, label)).name
    except (LookupError, ValueError, TypeError):
        return None
    if name == "utf-8-sig":
        name = "utf-8"
    return name if name in TEXT_CODECS else None


def decode(body: bytes, charset: str | None) -> str:
    """The body as text in its declared charset (UTF-8 when none; a UTF-8 byte-order mark is
    dropped): ValueError when the charset is not one of TEXT_CODECS, the bytes are not text in
    it, or the text holds a NUL (which PostgreSQL's text cannot store)."""
    codec = text_codec(charset)
    if codec is None:
        raise ValueError(f"the charset {str(charset)[:40]!r} is not one mkt reads")
    text = body.decode("utf-8-sig" if codec == "utf-8" else codec)
    if "\x00" in text:
        raise ValueError("the text holds a NUL character")
    return text

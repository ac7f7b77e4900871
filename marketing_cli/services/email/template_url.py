"""Fetching a coded template's HTML from a URL (`import_format: url`), safely.

- http and https only, for the URL given and for every redirect (at most MAX_REDIRECTS),
  each redirect target checked again like the first URL;
- the host is resolved once per hop and every address it resolves to must be public:
  loopback, private, link-local, shared, multicast, reserved and unspecified networks are
  refused with 400 unless the server runs with `MKT_ALLOW_PRIVATE_URLS=1` (an operator
  setting for local networks and tests). The request then goes to the address that was
  checked (the name is sent as `Host` and as the TLS server name), so a DNS answer that
  changes between the check and the request cannot point it elsewhere;
- TIMEOUT seconds for each connect and read, DEADLINE seconds in all;
- the body is read as it arrives and refused past MAX_BYTES; it must be UTF-8 (or the
  charset the response declares).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from marketing_cli.errors import MktError
from marketing_cli.kernel.numbers import parse_digits

if TYPE_CHECKING:
    import httpx

MAX_BYTES = 5 * 1024 * 1024
MAX_REDIRECTS = 5
TIMEOUT = 10.0
DEADLINE = 30.0
ALLOW_PRIVATE_ENV = "MKT_ALLOW_PRIVATE_URLS"

BAD_SCHEME = "The url must start with http:// or https://"
PRIVATE = "The url points to a private, loopback or reserved network address, which is not allowed."
UNRESOLVED = "We could not find the host of the url: {host}."
FETCH_FAILED = "We could not fetch the url: {reason}."
BAD_STATUS = "We could not fetch the url: the server answered {status}."
TOO_LARGE = "The page at the url is larger than 5 MiB."
BAD_REDIRECT = "The url redirected to an address that does not start with http:// or https://"
TOO_MANY_REDIRECTS = "The url redirected more than 5 times."
NOT_TEXT = "The page at the url is not text in UTF-8 or in the charset it declares."
EMPTY = "The page at the url is empty."


@dataclass
class Fetched:
    html: str
    url: str  # the final address, after redirects


def allow_private() -> bool:
    return os.environ.get(ALLOW_PRIVATE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def has_http_scheme(url: str) -> bool:
    return url[:8].lower().startswith(("http://", "https://"))


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def resolve(host: str, port: int) -> str:
    """The address to connect to; 400 when any address of the host is not public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError, OverflowError):
        raise MktError(400, UNRESOLVED.format(host=host[:200])) from None
    # IPv4 first: a host with both kinds is reached where IPv6 has no route too
    addresses = sorted({info[4][0] for info in infos}, key=lambda a: ":" in a)
    if not addresses:
        raise MktError(400, UNRESOLVED.format(host=host[:200]))
    if not allow_private() and not all(_public(a) for a in addresses):
        raise MktError(400, PRIVATE)
    return addresses[0]


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every fetch (building one reads the CA bundle: about 0.2 s)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


HTML_ACCEPT = "text/html,*/*;q=0.5"


def fetch_html(url: str, *, accept: str = HTML_ACCEPT) -> Fetched:
    """The text at `url` under the rules above (`accept`: the Accept header; feeds ask for XML)."""
    import httpx

    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        raise MktError(400, FETCH_FAILED.format(reason="the url is not valid")) from None
    if not current.host:
        raise MktError(400, FETCH_FAILED.format(reason="the url has no host name"))
    started = time.monotonic()
    timeout = httpx.Timeout(TIMEOUT)
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, verify=_tls()) as client:
        for _ in range(MAX_REDIRECTS + 1):
            response_or_next = _hop(client, current, started, accept)
            if isinstance(response_or_next, Fetched):
                return response_or_next
            current = response_or_next
    raise MktError(400, TOO_MANY_REDIRECTS)


def _hop(client: httpx.Client, url: httpx.URL, started: float, accept: str) -> Fetched | httpx.URL:
    """One request: the Fetched page, or the next URL to go to."""
    import httpx
    if url.scheme not in ("http", "https") or not url.host:
        raise MktError(400, BAD_REDIRECT)
    port = url.port or (443 if url.scheme == "https" else 80)
    if not 0 < port < 65536:
        raise MktError(400, FETCH_FAILED.format(reason="the url is not valid"))
    address = resolve(url.host, port)
    pinned = url.copy_with(host=address)
    headers = {"Host": url.netloc.decode("ascii"), "User-Agent": "mkt-template-import/1",
               "Accept": accept}
    extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
    try:
        with client.stream("GET", pinned, headers=headers, extensions=extensions) as response:
            if response.is_redirect:
                location = response.headers.get("location", "")
                try:
                    target = url.join(location)
                except (httpx.InvalidURL, ValueError):
                    raise MktError(400, BAD_REDIRECT) from None
                if target.scheme not in ("http", "https"):
                    raise MktError(400, BAD_REDIRECT)
                return target
            if not response.is_success:
                raise MktError(400, BAD_STATUS.format(status=response.status_code))
            body = _read_capped(response, started)
            charset = response.charset_encoding or "utf-8"
    except httpx.TimeoutException:
        raise MktError(400, FETCH_FAILED.format(reason="it did not answer in time")) from None
    except httpx.ConnectError:
        raise MktError(400, FETCH_FAILED.format(reason="the connection to its server failed")) from None
    except httpx.HTTPError:
        raise MktError(400, FETCH_FAILED.format(reason="the request failed")) from None
    try:
        html = body.decode("utf-8-sig" if charset.lower().replace("_", "-") in ("utf-8", "utf8") else charset)
    except (UnicodeDecodeError, LookupError):
        raise MktError(400, NOT_TEXT) from None
    if not html.strip():
        raise MktError(400, EMPTY)
    return Fetched(html=html, url=str(url))


def _read_capped(response: httpx.Response, started: float) -> bytes:
    declared = response.headers.get("content-length", "")
    size = parse_digits(declared, 40)
    if size is not None and size > MAX_BYTES:
        raise MktError(400, TOO_LARGE)
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_BYTES:
            raise MktError(400, TOO_LARGE)
        if time.monotonic() - started > DEADLINE:
            raise MktError(400, FETCH_FAILED.format(reason="it did not answer in time"))
        chunks.append(chunk)
    return b"".join(chunks)

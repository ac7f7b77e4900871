"""Fetching a coded template's HTML from a URL (`import_format: url`), and a feed's bytes.

Every rule is the outbound helper's (kernel/outbound.py): http(s) only, public addresses
only unless `MKT_ALLOW_PRIVATE_URLS=1`, the checked address is the one connected to (the
name travels as `Host` and as the TLS server name), every redirect checked again (at most
MAX_REDIRECTS), DEADLINE seconds in all for resolving, connecting, the head and the body,
and the body refused past MAX_BYTES. This module adds what a page needs: a 2xx answer, text
in UTF-8 or in the charset the answer declares (one a browser reads: not unicode_escape),
and not empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from marketing_cli.errors import MktError
from marketing_cli.kernel import outbound
from marketing_cli.kernel.outbound import BAD_SCHEME, PRIVATE, allow_private, has_http_scheme  # noqa: F401

MAX_BYTES = 5 * 1024 * 1024
MAX_SIZE = "5 MiB"
MAX_REDIRECTS = 5
DEADLINE = 30.0

BAD_STATUS = "We could not fetch the url: the server answered {status}."
NOT_TEXT = "The page at the url is not text in UTF-8 or in the charset it declares."
EMPTY = "The page at the url is empty."
HTML_ACCEPT = "text/html,*/*;q=0.5"
USER_AGENT = "mkt-template-import/1"


@dataclass
class Fetched:
    html: str
    url: str  # the final address, after redirects


@dataclass
class Page:
    body: bytes
    charset: str | None  # what the answer's Content-Type declares
    url: str


def fetch(url: str, *, accept: str = HTML_ACCEPT) -> Page:
    """The bytes at `url` (a 2xx answer) under the rules above; MktError(400) otherwise."""
    answer = outbound.request("GET", url, deadline=DEADLINE, max_bytes=MAX_BYTES, size=MAX_SIZE,
                              max_redirects=MAX_REDIRECTS, headers={"User-Agent": USER_AGENT, "Accept": accept})
    if not 200 <= answer.status < 300:
        raise MktError(400, BAD_STATUS.format(status=answer.status))
    return Page(body=answer.body, charset=answer.charset, url=answer.url)


def fetch_html(url: str) -> Fetched:
    """The text at `url`: UTF-8 or its declared charset, not empty."""
    page = fetch(url)
    try:
        html = outbound.decode(page.body, page.charset)
    except ValueError:
        raise MktError(400, NOT_TEXT) from None
    if not html.strip():
        raise MktError(400, EMPTY)
    return Fetched(html=html, url=page.url)

"""The links of an email's HTML that tracking rewrites: every `<a href>` whose URL is http(s),
holds no merge tag (a URL with a merge tag differs per recipient and stays untracked) and is
at most 2048 bytes long.

Scheduling registers them (services/email/schedule.py) and the message builder rewrites them
(services/delivery/compose.py), by this one reading of an href.
"""

from __future__ import annotations

import html as html_lib
import re

HREF = re.compile(r"""(<a\b[^>]*?\bhref\s*=\s*)(["'])(.*?)\2""", re.IGNORECASE | re.DOTALL)


def tracked_links(html: str) -> list[str]:
    """The distinct original http(s) URLs of the HTML's links that tracking rewrites, in order."""
    seen: dict[str, None] = {}
    for match in HREF.finditer(html or ""):
        url = html_lib.unescape(match.group(3)).strip()
        if trackable(url):
            seen.setdefault(url, None)
    return list(seen)


# A link is registered under its URL (email_links, unique per campaign, variant and URL), and a
# PostgreSQL btree entry holds at most 2704 bytes: a longer URL is left as written, untracked,
# on both engines, rather than failing the send (docs/sending.md). Browsers and servers commonly
# stop well below it (8 KiB), and tracking parameters fit many times over.
MAX_TRACKED_URL_BYTES = 2048


def trackable(url: str) -> bool:
    return (url.lower().startswith(("http://", "https://")) and "{{" not in url
            and len(url.encode("utf-8", "surrogatepass")) <= MAX_TRACKED_URL_BYTES)

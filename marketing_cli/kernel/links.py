"""The links of an email's HTML that tracking rewrites: every `<a href>` whose URL is http(s)
and holds no merge tag (a URL with a merge tag differs per recipient and stays untracked).

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


def trackable(url: str) -> bool:
    return url.lower().startswith(("http://", "https://")) and "{{" not in url

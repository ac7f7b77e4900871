"""Safe URLs for merge tags (kernel/merge.py): which attributes hold a URL, and whether a
rendered URL may stand there.

A value is contact data, written by anyone who signs up (docs/security.md), so a URL a tag
helps to write is judged after every tag in it is rendered, as a browser would read it
(entities decoded, case, blanks and control characters ignored): a URL attribute must be
empty or http(s), mailto or tel. A URL the template's own text begins (`https://`,
`sms:{{...}}`, or a relative start such as `/p/{{...}}`) was judged by the cleaner and
stands. Each `srcset` candidate likewise (relative URLs allowed), and a value in a `srcset`
has its blanks and commas percent-encoded, so it cannot add a candidate.
(kernel/merge_contexts.py renders the tags and asks these questions of the result.)
"""

from __future__ import annotations

import re

from marketing_cli.kernel import css

# Attributes whose value is one URL; `srcset` (a list of candidates) and `style` (CSS) apart.
URL_ATTRIBUTES = frozenset({
    "href", "src", "action", "formaction", "background", "poster", "cite", "longdesc", "lowsrc",
    "dynsrc", "data", "codebase", "xlink:href", "usemap", "profile", "manifest", "o:href", "ping",
    "icon", "archive", "classid", "itemtype",
})
SRCSET_ATTRIBUTES = frozenset({"srcset", "imagesrcset"})
VALUE_SCHEMES = frozenset({"http", "https", "mailto", "tel"})  # what a value may start a URL with
TEMPLATE_SCHEMES = frozenset({"sms", "cid"})  # the cleaner keeps these when the template writes them

_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")


def safe_url(value: str) -> bool:
    """Whether a value may start a URL attribute: http(s), mailto or tel (case, blanks and
    control characters ignored, as browsers ignore them)."""
    scheme = _SCHEME.match(css.squeeze(value))
    return scheme is not None and scheme.group(1) in VALUE_SCHEMES


def url_start(prefix: str) -> bool:
    """Whether the template's own text before the first tag settles the URL's kind: a scheme
    the cleaner keeps (`https://`, `sms:`), or a relative start (`/`, `#`, `?`)."""
    squeezed = css.squeeze(prefix)
    scheme = _SCHEME.match(squeezed)
    if scheme is not None:
        return scheme.group(1) in VALUE_SCHEMES | TEMPLATE_SCHEMES
    head = re.split(r"[/?#]", squeezed, maxsplit=1)
    return len(head) > 1 and ":" not in head[0]


def url_allowed(url: str) -> bool:
    return safe_url(url) or not css.squeeze(url)


_SRCSET_SPLIT = re.compile(r"[\s,]+")


def srcset_allowed(srcset: str) -> bool:
    """Every candidate's URL (the text before its blank, between commas) is http(s) or relative."""
    for candidate in srcset.split(","):
        url = _SRCSET_SPLIT.split(candidate.strip(), maxsplit=1)[0]
        if url and not css.safe_url(url, VALUE_SCHEMES):
            return False
    return True


def srcset_value(value: str) -> str:
    return value.replace("%", "%25").replace(",", "%2C").translate(_SRCSET_BLANKS) if value else value


_SRCSET_BLANKS = str.maketrans({c: f"%{ord(c):02X}" for c in "\t\n\f\r "})

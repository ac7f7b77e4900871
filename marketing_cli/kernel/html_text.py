"""The plain-text part of an email, made from its HTML: blocks on their own lines, links as
`text (url)`, hidden elements (head, style, script, display:none: the preview span) left out.

Pure text in, text out: the message builder (services/delivery/message.py) and the variant's
preview (services/email/variant_html.py) both read HTML this way.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCKS = frozenset({"p", "div", "br", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol",
                     "blockquote", "hr", "section", "article", "header", "footer", "center"})
_SKIP = frozenset({"style", "script", "head", "title"})
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n\s*\n(\s*\n)+")


_VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr", "source"})


class _TextParser(HTMLParser):
    """Collects the visible text; skips head, style, script and elements styled display:none
    (the hidden preview span belongs to the HTML part only)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.hidden: list[bool] = []
        self.links: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag in _VOID:
            self.handle_startendtag(tag, attrs)
            return
        hidden = tag in _SKIP or "display:none" in (attributes.get("style") or "").replace(" ", "").lower()
        self.hidden.append(hidden)
        self.skip += hidden
        if tag in _BLOCKS:
            self.out.append("\n")
        if tag == "a":
            self.links.append(attributes.get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if self.hidden:
            self.skip -= self.hidden.pop()
        if tag in _BLOCKS:
            self.out.append("\n")
        if tag == "a" and self.links:
            href = self.links.pop()
            if href and href.startswith(("http://", "https://", "{{")) and not self.skip:
                if not "".join(self.out[-3:]).rstrip().endswith(href):
                    self.out.append(f" ({href})")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "hr"):
            self.out.append("\n")
        elif tag == "img" and not self.skip:
            alt = dict(attrs).get("alt")
            if alt:
                self.out.append(alt)

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data)


def html_to_text(html: str) -> str:
    """Readable plain text from email HTML: blocks on their own lines, links as `text (url)`."""
    parser = _TextParser()
    parser.feed(html or "")
    parser.close()
    lines = [_SPACES.sub(" ", line).strip() for line in "".join(parser.out).split("\n")]
    text = "\n".join(lines).strip()
    return _BLANK_LINES.sub("\n\n", text) + "\n"

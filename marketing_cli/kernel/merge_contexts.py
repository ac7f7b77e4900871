"""A merge tag's value written for the context its tag sits in (kernel/merge.py compiles a
template into these parts; docs/security.md says why: a value is contact data).

- A value is escaped for its place: HTML-escaped in text and attributes (and `-` inside a
  comment, so `-->` cannot end it); an unquoted attribute holding a tag is written quoted
  (a value cannot break out with a blank or `>`); in CSS every character that could end a
  string, a URL, a declaration, a block or the element is a CSS hex escape (`\\3b `), which
  CSS reads back as the same character; in a `srcset` blanks and commas are
  percent-encoded (a value cannot add a candidate).
- Then the assembled value is judged, after every tag in it is rendered, as a browser would
  read it (entities decoded): a URL attribute and each `srcset` candidate by
  kernel/merge_urls.py; a CSS declaration, selector or at-rule prelude holding a tag must
  not hold what the cleaner refuses (kernel/css.py: `expression(`, `javascript:`, `url()`
  with a scheme other than http(s), `@import`, `behavior`). When it fails, the tags of that
  attribute or declaration render their fallbacks; if that fails too, nothing; if the
  template's own text still fails, the attribute value (or the declaration) is left empty.

A `Values` object holds one recipient's values and escapes them for HTML at most once,
however many templates (subject, HTML) are rendered with it; it judges a URL value at most
once too (a tracked link's base is in every link of the message).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from marketing_cli.kernel import css
from marketing_cli.kernel.merge_urls import safe_url, srcset_allowed, srcset_value, url_allowed


class Values:
    """One recipient's tag values (name without braces -> text), plain and HTML-escaped."""

    __slots__ = ("_html", "_urls", "text")

    def __init__(self, text: Mapping[str, str]) -> None:
        self.text = dict(text)
        self._html: dict[str, str] | None = None
        self._urls: dict[str, bool] = {}

    def safe_url(self, name: str) -> bool:
        """Whether the value is a non-empty `safe_url`, judged once per recipient (a tracked
        link's base is in every link of the message)."""
        judged = self._urls.get(name)
        if judged is None:
            judged = self._urls[name] = safe_url(self.text.get(name) or "")
        return judged

    @property
    def html(self) -> dict[str, str]:
        if self._html is None:
            self._html = {name: escape(value, quote=True) for name, value in self.text.items()}
        return self._html


# --- compiled parts --------------------------------------------------------------------------------
#
# A template is a tuple of parts: str (literal), a tuple (name, fallback, as_written, dash) for a
# tag in text or a comment (the fast path: the value's HTML escape from `Values.html`), or a
# Group: an attribute value or a style sheet holding tags, rendered and judged as a whole.

class GroupTag:
    """A tag inside a group: its name, its fallback and its text as written (decoded from the
    template, as values are), and how its value is written where it stands."""

    __slots__ = ("fallback", "name", "where", "written")

    def __init__(self, name: str, fallback: str, written: str, where: str) -> None:
        self.name, self.fallback, self.written, self.where = name, fallback, written, where


# Group kinds
PLAIN, URL, SRCSET, CSS = "plain", "url", "srcset", "css"


class Unit:
    """What is judged together: a whole attribute value, or one CSS declaration or prelude.
    `segments` are literal text (as CSS or the URL reads it: entities decoded) and GroupTags."""

    __slots__ = ("check", "segments")

    def __init__(self, segments: list[Any], check: bool) -> None:
        self.segments, self.check = segments, check


class Group:
    """An attribute value or a `<style>` element's text that holds tags."""

    __slots__ = ("chunks", "close", "dash", "html", "kind", "open", "quote")

    def __init__(self, kind: str, chunks: list[Any], *, html: bool, dash: bool, quote: str, wrap: bool) -> None:
        self.kind, self.chunks, self.html, self.dash, self.quote = kind, chunks, html, dash, quote
        self.open = self.close = '"' if wrap else ""

    def value(self, tag: GroupTag, values: Values, mode: int) -> str:
        """A tag's text as the CSS or URL reads it. mode 0: the value (its fallback when empty,
        as written when unknown); 1: the fallback; 2: nothing."""
        if mode == 2:
            return ""
        value = values.text.get(tag.name)
        if value is None:
            value = tag.written
        elif mode == 1 or not value:
            value = tag.fallback
        if self.kind == CSS:
            return css.escape_value(value, tag.where, dash=not self.dash)
        if self.kind == SRCSET:
            return srcset_value(value)
        return value

    def judged(self, text: str) -> bool:
        if self.kind == URL:
            return url_allowed(text)
        if self.kind == SRCSET:
            return srcset_allowed(text)
        return not css.refused_fragment(text)

    def unit(self, unit: Unit, values: Values) -> str | None:
        """The unit's text as read (decoded), with the first mode that passes; None: none did."""
        for mode in (0, 1, 2):
            text = "".join(s if s.__class__ is str else self.value(s, values, mode) for s in unit.segments)
            if not unit.check or self.judged(text):
                return text
            if not any(s.__class__ is GroupTag for s in unit.segments):
                break
        return None

    def render(self, values: Values) -> str:
        out = []
        for chunk in self.chunks:
            if chunk.__class__ is str:
                out.append(chunk)
                continue
            text = self.unit(chunk, values)
            if text is None:
                if self.kind != CSS:
                    return self.open + self.close  # the whole value goes
                continue
            out.append(text)
        text = "".join(out)
        if self.html:
            # `>` is always escaped here, so no `-->` can end a comment around the tag
            text = escape(text, quote=False).replace(self.quote, "&quot;" if self.quote == '"' else "&#x27;")
        return self.open + text + self.close


def attribute_text(text: str, quote: str) -> str:
    """Decoded attribute text written back for the attribute (`&`, `<`, `>` and its quote escaped)."""
    return escape(text, quote=False).replace(quote, "&quot;" if quote == '"' else "&#x27;")


class UrlStart:
    """A URL attribute that a tag begins (`{{unsubscribe_url}}`, a tracked link's
    `{{__click_base}}/3`): the Group rule, with the judgement of the value cached per recipient."""

    __slots__ = ("fallback", "name", "rest", "rest_html", "written")

    def __init__(self, name: str, fallback: str, written: str, rest: str, rest_html: str) -> None:
        self.name, self.fallback, self.written, self.rest, self.rest_html = name, fallback, written, rest, rest_html

    def render(self, values: Values) -> str:
        """The slow path (`Template.render` writes a safe value itself)."""
        value = values.text.get(self.name)
        for text in ((self.written if value is None else value or self.fallback), self.fallback, ""):
            if url_allowed(text + self.rest):
                return escape(text, quote=True) + self.rest_html
        return ""

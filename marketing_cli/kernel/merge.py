"""The one merge-tag language of every channel: compile a template once, render it per recipient.

Syntax (docs/campaigns.md):

    {{contact.<merge_tag>}}        a contact field's value (field default when the contact has none)
    {{workspace.name}}             workspace values
    {{unsubscribe_url}} ...        action URLs (per recipient; the caller supplies them)
    {{preview_text}} {{server_time}} {{current_date}}   system values
    {{contact.first_name|there}}   fallback: written when the value is empty

Spaces inside the braces are allowed (`{{ contact.city | Paris }}`). A tag whose value is
empty (and that has no fallback) renders as nothing. A tag the workspace does not define
is left as written (escaped like a value), so a mistake shows in a test email, and
`services/contacts/merge_tags.find_unknown_tags` reports it when HTML is set. What a
workspace defines (its fields, and the `Renderer` that reads them) lives there; this
module knows no database.

Plain text and subjects (and SMS) are rendered as they are. HTML is rendered by context,
because a value is contact data, written by anyone who signs up (docs/security.md):
`compile_template(html, html=True)` reads the template ONCE with a tokenizer of HTML
(kernel/markup.py) and knows for each tag whether it sits in text, in a comment, in an
attribute value (double-quoted, single-quoted or unquoted), in a URL attribute, in a
`srcset`, in CSS (a `style` attribute or a `<style>` element: inside a string, a
`url(...)`, a comment or elsewhere, read by kernel/css.py), or where no value can go
(`<script>` and the other raw-text elements, a tag's or an attribute's name). Where no
value can go, a tag renders as a run of `x` as long as itself (what the tokenizer read
there), never as its value. The rest of the language lives beside this module:

    kernel/merge_contexts.py   a recipient's `Values`, and each value escaped for its
                               context and judged with what surrounds it (the parts this
                               module compiles attribute values and style sheets into)
    kernel/merge_urls.py       safe URLs: which attributes hold one, what may start one
    kernel/merge_fallbacks.py  `check_fallbacks`: a fallback refused (400) when HTML is
                               saved if it would not stand where it is written

Speed: `compile_template` splits the text ONCE into literal and tag parts; `render` then
only joins strings with dict lookups (no regular expression per recipient for tags in
text). A `Values` object holds one recipient's values and escapes them for HTML at most
once, however many templates (subject, HTML) are rendered with it. Tag names are matched
against the workspace's own definitions and looked up in dicts: they never reach SQL.
"""

from __future__ import annotations

import re
from html import escape, unescape
from typing import Any

from marketing_cli.kernel import css, markup
from marketing_cli.kernel.merge_contexts import (
    CSS,
    PLAIN,
    SRCSET,
    URL,
    Group,
    GroupTag,
    Unit,
    UrlStart,
    Values,
    attribute_text,
)
from marketing_cli.kernel.merge_urls import SRCSET_ATTRIBUTES, URL_ATTRIBUTES, url_start

WORKSPACE_TAGS = (("{{workspace.name}}", "Workspace name"),)
ACTION_TAGS = (
    ("{{unsubscribe_url}}", "Unsubscribe link"),
    ("{{view_online_url}}", "View online link"),
    ("{{preferences_url}}", "Manage preferences link"),
)
SYSTEM_TAGS = (
    ("{{preview_text}}", "Preview text"),
    ("{{server_time}}", "Server time (UTC)"),
    ("{{current_date}}", "Current date (UTC)"),
)

# {{ name }} or {{ name | fallback }}; a fallback holds no braces.
TAG = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\|([^{}]*))?\}\}")

STATIC_NAMES = tuple(tag.strip("{}") for tag, _ in (*WORKSPACE_TAGS, *ACTION_TAGS, *SYSTEM_TAGS))
ACTION_NAMES = tuple(tag.strip("{}") for tag, _ in ACTION_TAGS)


class Template:
    """A text split into literal parts (str), tags in text ((name, fallback, as_written, dash))
    and groups (attribute values and style sheets that hold tags)."""

    __slots__ = ("html", "names", "parts", "tags")

    def __init__(self, text: str, *, html: bool) -> None:
        self.html = html
        matches = list(TAG.finditer(text))
        self.names = tuple(dict.fromkeys(m.group(1) for m in matches))
        # (match, context) of every tag, for check_fallbacks (kernel/merge_fallbacks.py)
        self.tags: list[tuple[re.Match[str], Any]] = []
        if not html:
            self.parts = tuple(_plain_parts(text, matches))
        else:
            self.parts = tuple(_html_parts(text, matches, self.tags))

    def render(self, values: Values) -> str:
        source = values.html if self.html else values.text
        urls = values._urls
        out = []
        for part in self.parts:
            kind = part.__class__
            if kind is str:
                out.append(part)
            elif kind is UrlStart:  # inline: every tracked link of a message is one
                name = part.name
                judged = urls.get(name)
                if judged is None:
                    judged = values.safe_url(name)
                out.append(source[name] + part.rest_html if judged else part.render(values))
            elif kind is tuple:
                name, fallback, written, dash = part
                value = source.get(name)
                if value is None:
                    out.append(written)  # not a tag of this workspace: left as written
                elif not value:
                    out.append(fallback)
                elif dash:
                    out.append(value.replace("-", "&#45;"))
                else:
                    out.append(value)
            else:
                out.append(part.render(values))
        return "".join(out)


def _plain_parts(text: str, matches: list[re.Match[str]]) -> list[Any]:
    parts: list[Any] = []
    position = 0
    for match in matches:
        if match.start() > position:
            parts.append(text[position:match.start()])
        fallback = match.group(2)
        parts.append((match.group(1), "" if fallback is None else fallback.strip(), match.group(0), False))
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    return parts


def _fallback(match: re.Match[str], decode: bool) -> str:
    fallback = (match.group(2) or "").strip()
    return unescape(fallback) if decode else fallback


def _html_parts(text: str, matches: list[re.Match[str]], tags: list[tuple[re.Match[str], Any]]) -> list[Any]:
    regions = markup.regions(text, [m.span() for m in matches])
    parts: list[Any] = []
    position = 0
    m = 0
    for region in regions:
        inside = []
        while m < len(matches) and matches[m].start() < region.end:
            inside.append(matches[m])
            m += 1
        if not inside:
            continue
        if region.start > position:
            parts.append(text[position:region.start])
        parts.extend(_region_parts(text, region, inside, tags))
        position = region.end
    if position < len(text):
        parts.append(text[position:])
    return _joined(parts)


def _joined(parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        if part.__class__ is str and out and out[-1].__class__ is str:
            out[-1] += part
        elif part != "":
            out.append(part)
    return out


def _region_parts(text: str, region: markup.Region, inside: list[re.Match[str]],
                  tags: list[tuple[re.Match[str], Any]]) -> list[Any]:
    kind = region.kind
    if kind in (markup.TEXT, markup.COMMENT):
        dash = region.in_comment or kind == markup.COMMENT
        parts: list[Any] = []
        at = region.start
        for match in inside:
            parts.append(text[at:match.start()])
            fallback = escape(_fallback(match, True), quote=True)
            written = escape(match.group(0), quote=True)
            if dash:
                fallback, written = fallback.replace("-", "&#45;"), written.replace("-", "&#45;")
            parts.append((match.group(1), fallback, written, dash))
            tags.append((match, region))
            at = match.end()
        parts.append(text[at:region.end])
        return parts
    if kind == markup.REFUSED:
        for match in inside:
            tags.append((match, region))
        return [markup.masked(text[region.start:region.end],
                              [(mt.start() - region.start, mt.end() - region.start) for mt in inside])]
    return _group(text, region, inside, tags)


def _group(text: str, region: markup.Region, inside: list[re.Match[str]],
           tags: list[tuple[re.Match[str], Any]]) -> list[Any]:
    """An attribute value or a style sheet: its text as read (entities decoded in an attribute),
    cut into units, each tag placed (in CSS: string, url, comment or elsewhere)."""
    attribute = region.kind == markup.ATTRIBUTE
    decode = (lambda s: unescape(s)) if attribute else (lambda s: s)
    pieces: list[Any] = []
    at = region.start
    for match in inside:
        pieces.append(decode(text[at:match.start()]))
        pieces.append(match)
        at = match.end()
    pieces.append(decode(text[at:region.end]))
    name = region.attribute
    if not attribute or name == "style":
        kind = CSS
    elif name in SRCSET_ATTRIBUTES:
        kind = SRCSET
    elif name in URL_ATTRIBUTES:
        kind = URL
    else:
        kind = PLAIN
    quote = region.quote or '"'
    wrap = '"' if attribute and not region.quote else ""
    group_args = {"html": attribute, "dash": region.in_comment, "quote": quote, "wrap": bool(wrap)}
    for match in inside:
        tags.append((match, (region, kind)))
    if kind == CSS:
        tags[-len(inside):] = []
        return [Group(kind, _css_chunks(pieces, inside, region, attribute, tags), **group_args)]
    check = kind == SRCSET or (kind == URL and not url_start(pieces[0]))
    if not check:  # nothing to judge: literal text and tags, each escaped, as in text
        return [wrap, *(attribute_text(p, quote) if p.__class__ is str else
                        (p.group(1), escape(_fallback(p, True), quote=True), escape(unescape(p.group(0)), quote=True),
                         False) for p in pieces), wrap]
    if kind == URL and pieces[0] == "" and len(pieces) == 3:  # `{{x}}` or `{{x}}/rest`: the common link
        p = pieces[1]
        return [wrap, UrlStart(p.group(1), _fallback(p, True), unescape(p.group(0)), pieces[2],
                               attribute_text(pieces[2], quote)), wrap]
    segments = [p if p.__class__ is str else GroupTag(p.group(1), _fallback(p, True), unescape(p.group(0)), "")
                for p in pieces]
    return [Group(kind, [Unit([s for s in segments if s != ""], True)], **group_args)]


def _css_chunks(pieces: list[Any], inside: list[re.Match[str]], region: markup.Region, attribute: bool,
                tags: list[tuple[re.Match[str], Any]]) -> list[Any]:
    """The CSS text cut into literal stretches and units (declarations, preludes) holding tags."""
    flat, offsets = [], []
    for piece in pieces:
        if piece.__class__ is str:
            flat.append(piece)
        else:
            offsets.append(sum(map(len, flat)))
            flat.append("x")
    css_text = "".join(flat)
    placed = css.placements(css_text, offsets)
    tag_at = {}
    for match, offset, (where, _, _) in zip(inside, offsets, placed):
        written = unescape(match.group(0)) if attribute else match.group(0)
        tag_at[offset] = GroupTag(match.group(1), _fallback(match, attribute), written, where)
        tags.append((match, (region, CSS, where)))
    spans = sorted({(start, end) for _, start, end in placed})
    chunks: list[Any] = []
    at = 0
    for start, end in spans:
        start = max(start, at)
        chunks.append(css_text[at:start])
        segments: list[Any] = []
        literal = start
        for offset in offsets:
            if start <= offset < end:
                segments.append(css_text[literal:offset])
                segments.append(tag_at[offset])
                literal = offset + 1
        segments.append(css_text[literal:end])
        chunks.append(Unit([s for s in segments if s != ""], True))
        at = end
    chunks.append(css_text[at:])
    return [c for c in chunks if c != ""]


def compile_template(text: str, *, html: bool = False) -> Template:
    return Template(text or "", html=html)


def format_value(value: Any) -> str:
    """A stored field value as text: lists joined with ", ", booleans true/false, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


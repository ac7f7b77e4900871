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

- `compile_template(html, html=True)` reads the template ONCE with a tokenizer of HTML
  (kernel/markup.py) and knows for each tag whether it sits in text, in a comment, in an
  attribute value (double-quoted, single-quoted or unquoted), in a URL attribute, in a
  `srcset`, in CSS (a `style` attribute or a `<style>` element: inside a string, a
  `url(...)`, a comment or elsewhere, read by kernel/css.py), or where no value can go
  (`<script>` and the other raw-text elements, a tag's or an attribute's name).
- A value is escaped for its place: HTML-escaped in text and attributes (and `-` inside a
  comment, so `-->` cannot end it); an unquoted attribute holding a tag is written quoted
  (a value cannot break out with a blank or `>`); in CSS every character that could end a
  string, a URL, a declaration, a block or the element is a CSS hex escape (`\\3b `), which
  CSS reads back as the same character; in a `srcset` blanks and commas are
  percent-encoded (a value cannot add a candidate). Where no value can go, a tag renders as
  a run of `x` as long as itself (what the tokenizer read there), never as its value.
- Then the assembled value is judged, after every tag in it is rendered, as a browser would
  read it (entities decoded): a URL attribute must be empty or http(s), mailto or tel (a
  URL the template's own text begins, such as `/p/{{...}}` or `sms:{{...}}`, was judged by
  the cleaner and stands); each `srcset` candidate likewise (relative URLs allowed); a CSS
  declaration, selector or at-rule prelude holding a tag must not hold what the cleaner
  refuses (kernel/css.py: `expression(`, `javascript:`, `url()` with a scheme other than
  http(s), `@import`, `behavior`). When it fails, the tags of that attribute or
  declaration render their fallbacks; if that fails too, nothing; if the template's own
  text still fails, the attribute value (or the declaration) is left empty.
- A fallback is rendered exactly like a value (decoded from the template first:
  `{{contact.x|Tom &amp; Jerry}}` is `Tom & Jerry`). `check_fallbacks` refuses, when HTML
  is saved, a fallback that would not stand where it is written (400).

Speed: `compile_template` splits the text ONCE into literal and tag parts; `render` then
only joins strings with dict lookups (no regular expression per recipient for tags in
text). A `Values` object holds one recipient's values and escapes them for HTML at most
once, however many templates (subject, HTML) are rendered with it. Tag names are matched
against the workspace's own definitions and looked up in dicts: they never reach SQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from html import escape, unescape
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import css, markup

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

# Attributes whose value is one URL; `srcset` (a list of candidates) and `style` (CSS) apart.
URL_ATTRIBUTES = frozenset({
    "href", "src", "action", "formaction", "background", "poster", "cite", "longdesc", "lowsrc",
    "dynsrc", "data", "codebase", "xlink:href", "usemap", "profile", "manifest", "o:href", "ping",
    "icon", "archive", "classid", "itemtype",
})
SRCSET_ATTRIBUTES = frozenset({"srcset", "imagesrcset"})
VALUE_SCHEMES = frozenset({"http", "https", "mailto", "tel"})  # what a value may start a URL with
TEMPLATE_SCHEMES = frozenset({"sms", "cid"})  # the cleaner keeps these when the template writes them

FALLBACK_REFUSED = "The fallback of {tag} cannot stand where it is written: {reason}."


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


_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")


def safe_url(value: str) -> bool:
    """Whether a value may start a URL attribute: http(s), mailto or tel (case, blanks and
    control characters ignored, as browsers ignore them)."""
    scheme = _SCHEME.match(css.squeeze(value))
    return scheme is not None and scheme.group(1) in VALUE_SCHEMES


def _url_start(prefix: str) -> bool:
    """Whether the template's own text before the first tag settles the URL's kind: a scheme
    the cleaner keeps (`https://`, `sms:`), or a relative start (`/`, `#`, `?`)."""
    squeezed = css.squeeze(prefix)
    scheme = _SCHEME.match(squeezed)
    if scheme is not None:
        return scheme.group(1) in VALUE_SCHEMES | TEMPLATE_SCHEMES
    head = re.split(r"[/?#]", squeezed, maxsplit=1)
    return len(head) > 1 and ":" not in head[0]


def _url_allowed(url: str) -> bool:
    return safe_url(url) or not css.squeeze(url)


_SRCSET_SPLIT = re.compile(r"[\s,]+")


def _srcset_allowed(srcset: str) -> bool:
    """Every candidate's URL (the text before its blank, between commas) is http(s) or relative."""
    for candidate in srcset.split(","):
        url = _SRCSET_SPLIT.split(candidate.strip(), maxsplit=1)[0]
        if url and not css.safe_url(url, VALUE_SCHEMES):
            return False
    return True


def _srcset_value(value: str) -> str:
    return value.replace("%", "%25").replace(",", "%2C").translate(_SRCSET_BLANKS) if value else value


_SRCSET_BLANKS = str.maketrans({c: f"%{ord(c):02X}" for c in "\t\n\f\r "})


# --- compiled parts --------------------------------------------------------------------------------
#
# A template is a tuple of parts: str (literal), a tuple (name, fallback, as_written, dash) for a
# tag in text or a comment (the fast path: the value's HTML escape from `Values.html`), or a
# _Group: an attribute value or a style sheet holding tags, rendered and judged as a whole.

class _Tag:
    """A tag inside a group: its name, its fallback and its text as written (decoded from the
    template, as values are), and how its value is written where it stands."""

    __slots__ = ("fallback", "name", "where", "written")

    def __init__(self, name: str, fallback: str, written: str, where: str) -> None:
        self.name, self.fallback, self.written, self.where = name, fallback, written, where


# Group kinds
_PLAIN, _URL, _SRCSET, _CSS = "plain", "url", "srcset", "css"


class _Unit:
    """What is judged together: a whole attribute value, or one CSS declaration or prelude.
    `segments` are literal text (as CSS or the URL reads it: entities decoded) and _Tags."""

    __slots__ = ("check", "segments")

    def __init__(self, segments: list[Any], check: bool) -> None:
        self.segments, self.check = segments, check


class _Group:
    """An attribute value or a `<style>` element's text that holds tags."""

    __slots__ = ("chunks", "close", "dash", "html", "kind", "open", "quote")

    def __init__(self, kind: str, chunks: list[Any], *, html: bool, dash: bool, quote: str, wrap: bool) -> None:
        self.kind, self.chunks, self.html, self.dash, self.quote = kind, chunks, html, dash, quote
        self.open = self.close = '"' if wrap else ""

    def value(self, tag: _Tag, values: Values, mode: int) -> str:
        """A tag's text as the CSS or URL reads it. mode 0: the value (its fallback when empty,
        as written when unknown); 1: the fallback; 2: nothing."""
        if mode == 2:
            return ""
        value = values.text.get(tag.name)
        if value is None:
            value = tag.written
        elif mode == 1 or not value:
            value = tag.fallback
        if self.kind == _CSS:
            return css.escape_value(value, tag.where, dash=not self.dash)
        if self.kind == _SRCSET:
            return _srcset_value(value)
        return value

    def judged(self, text: str) -> bool:
        if self.kind == _URL:
            return _url_allowed(text)
        if self.kind == _SRCSET:
            return _srcset_allowed(text)
        return not css.refused_fragment(text)

    def unit(self, unit: _Unit, values: Values) -> str | None:
        """The unit's text as read (decoded), with the first mode that passes; None: none did."""
        for mode in (0, 1, 2):
            text = "".join(s if s.__class__ is str else self.value(s, values, mode) for s in unit.segments)
            if not unit.check or self.judged(text):
                return text
            if not any(s.__class__ is _Tag for s in unit.segments):
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
                if self.kind != _CSS:
                    return self.open + self.close  # the whole value goes
                continue
            out.append(text)
        text = "".join(out)
        if self.html:
            # `>` is always escaped here, so no `-->` can end a comment around the tag
            text = escape(text, quote=False).replace(self.quote, "&quot;" if self.quote == '"' else "&#x27;")
        return self.open + text + self.close


class Template:
    """A text split into literal parts (str), tags in text ((name, fallback, as_written, dash))
    and groups (attribute values and style sheets that hold tags)."""

    __slots__ = ("html", "names", "parts", "tags")

    def __init__(self, text: str, *, html: bool) -> None:
        self.html = html
        matches = list(TAG.finditer(text))
        self.names = tuple(dict.fromkeys(m.group(1) for m in matches))
        # (match, context) of every tag, for check_fallbacks
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
            elif kind is _UrlStart:  # inline: every tracked link of a message is one
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
        kind = _CSS
    elif name in SRCSET_ATTRIBUTES:
        kind = _SRCSET
    elif name in URL_ATTRIBUTES:
        kind = _URL
    else:
        kind = _PLAIN
    quote = region.quote or '"'
    wrap = '"' if attribute and not region.quote else ""
    group_args = {"html": attribute, "dash": region.in_comment, "quote": quote, "wrap": bool(wrap)}
    for match in inside:
        tags.append((match, (region, kind)))
    if kind == _CSS:
        tags[-len(inside):] = []
        return [_Group(kind, _css_chunks(pieces, inside, region, attribute, tags), **group_args)]
    check = kind == _SRCSET or (kind == _URL and not _url_start(pieces[0]))
    if not check:  # nothing to judge: literal text and tags, each escaped, as in text
        return [wrap, *(_attribute_text(p, quote) if p.__class__ is str else
                        (p.group(1), escape(_fallback(p, True), quote=True), escape(unescape(p.group(0)), quote=True),
                         False) for p in pieces), wrap]
    if kind == _URL and pieces[0] == "" and len(pieces) == 3:  # `{{x}}` or `{{x}}/rest`: the common link
        p = pieces[1]
        return [wrap, _UrlStart(p.group(1), _fallback(p, True), unescape(p.group(0)), pieces[2],
                                _attribute_text(pieces[2], quote)), wrap]
    segments = [p if p.__class__ is str else _Tag(p.group(1), _fallback(p, True), unescape(p.group(0)), "")
                for p in pieces]
    return [_Group(kind, [_Unit([s for s in segments if s != ""], True)], **group_args)]


def _attribute_text(text: str, quote: str) -> str:
    """Decoded attribute text written back for the attribute (`&`, `<`, `>` and its quote escaped)."""
    return escape(text, quote=False).replace(quote, "&quot;" if quote == '"' else "&#x27;")


class _UrlStart:
    """A URL attribute that a tag begins (`{{unsubscribe_url}}`, a tracked link's
    `{{__click_base}}/3`): the _Group rule, with the judgement of the value cached per recipient."""

    __slots__ = ("fallback", "name", "rest", "rest_html", "written")

    def __init__(self, name: str, fallback: str, written: str, rest: str, rest_html: str) -> None:
        self.name, self.fallback, self.written, self.rest, self.rest_html = name, fallback, written, rest, rest_html

    def render(self, values: Values) -> str:
        """The slow path (`Template.render` writes a safe value itself)."""
        value = values.text.get(self.name)
        for text in ((self.written if value is None else value or self.fallback), self.fallback, ""):
            if _url_allowed(text + self.rest):
                return escape(text, quote=True) + self.rest_html
        return ""


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
        tag_at[offset] = _Tag(match.group(1), _fallback(match, attribute), written, where)
        tags.append((match, (region, _CSS, where)))
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
        chunks.append(_Unit([s for s in segments if s != ""], True))
        at = end
    chunks.append(css_text[at:])
    return [c for c in chunks if c != ""]


def compile_template(text: str, *, html: bool = False) -> Template:
    return Template(text or "", html=html)


# --- fallbacks checked when HTML is saved --------------------------------------------------------

_UNQUOTED_BREAKERS = frozenset("\t\n\f\r \"'<>=`")


def fallback_problem(match: re.Match[str], context: Any) -> str | None:
    """Why a tag's fallback, as written, would not stand where it is; None when it would."""
    source = (match.group(2) or "").strip()
    if not source:
        return None
    if isinstance(context, markup.Region):
        if context.kind == markup.REFUSED:
            return None  # no value goes there at all (a script, a tag's name): the cleaner removes it
        if "<" in source or ">" in source:
            return "it holds markup (< or >); write &lt; and &gt; for the characters"
        return None
    region, kind = context[0], context[1]
    attribute = region.kind == markup.ATTRIBUTE
    if attribute and region.quote and region.quote in source:
        return f"it holds the {region.quote} that ends the attribute value"
    if attribute and not region.quote and _UNQUOTED_BREAKERS & set(source):
        return "it holds a blank or a character that ends an unquoted attribute value"
    value = unescape(source) if attribute else source
    if kind == _URL:
        if not _url_allowed(value):
            return f"{region.attribute} takes only an http(s), mailto or tel URL"
    elif kind == _SRCSET:
        if not _srcset_allowed(_srcset_value(value)):
            return f"{region.attribute} takes only http(s) or relative URLs"
    elif kind == _CSS:
        where = context[2]
        if css.escape_value(value, where) != value:
            return "CSS there cannot hold quotes, brackets, ;, :, \\, <, > or & from a value"
        if css.refused_fragment(value):
            return "it is CSS the cleaner refuses"
    return None


def check_fallbacks(html: str) -> None:
    """400 for the first fallback of the HTML that would not stand where it is written."""
    template = compile_template(html, html=True)
    for match, context in template.tags:
        reason = fallback_problem(match, context)
        if reason is not None:
            tag = "{{" + match.group(1) + "}}"
            raise MktError(400, FALLBACK_REFUSED.format(tag=tag, reason=reason))


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


def render_all(templates: Iterable[Template], values: Values) -> list[str]:
    return [t.render(values) for t in templates]

"""Cleaning email HTML: every active part removed, the layout kept as written.

`clean_html(html)` is what a campaign variant's HTML goes through before it is stored;
`inject_preview_span(html)` adds the hidden `{{preview_text}}` span at the start of the body.
docs/templates.md lists what is removed and what is kept; in short:

- removed: `<script>` (with its content), `<iframe>`, `<object>`, `<embed>`, `<applet>`,
  `<frame>`, `<noscript>` and `<template>` with their content; `<form>`, `<input>`,
  `<button>`, `<select>`, `<textarea>` tags (their text stays); every `on*` attribute;
  any URL attribute (`href`, `src`, `action`, `formaction`, `background`, ...) whose scheme
  is not http, https, mailto, tel, sms or cid, read the way a browser reads it (entities
  decoded, case folded, whitespace and control characters removed); in `<style>` elements
  and `style` attributes alike, the CSS that can run code or fetch a style sheet
  (`expression(`, `javascript:`, `url()` with a scheme other than http(s), `@import`,
  `behavior`, `-moz-binding`: kernel/css.py, which reads escapes and comments first); every
  ordinary HTML comment.
- kept: the document shell (doctype, `<html>` with its `lang` / `xmlns:*`, `<head>` with
  `<meta>`, `<title>`, `<style>` and stylesheet `<link>`s, `<body>` with its presentational
  attributes), every other CSS rule and declaration byte for byte (media queries included), `class`, `style`, `id`,
  `role`, `aria-*`, `data-*`, the table attributes (border, cellpadding, cellspacing, width,
  height, align, valign, bgcolor, background ...), every http(s) link and image, all text,
  `{{merge tags}}`, and Outlook conditional comments.

The body and the head are each cleaned by nh3 (the html5ever parser of ammonia), which
drops `<html>`, `<head>` and `<body>` from a fragment; the shell is rebuilt around them here
with its attributes cleaned by the same rules.

Outlook conditional comments (`<!--[if mso]> ... <![endif]-->`) are comments to every
other client but markup to Outlook, and they usually hold half of a table (the "ghost
table" around a fluid layout) or VML (bulletproof buttons). A tree sanitiser would close
or drop those halves, so their inside is cleaned token by token instead
(`_clean_conditional`): the same tags as the body plus `<style>`, `<xml>` and VML/Office
elements (`v:*`, `o:*`, `w:*`), the same attribute rules, scripts and frames dropped with
their content. The downlevel-revealed markers `<!--[if !mso]><!-->` and `<!--<![endif]-->`
are kept as they are (the markup between them is ordinary markup, cleaned as such). The old
`<![if ...]>` form, which HTML parsers read as a bogus comment, is dropped: its content then
shows in every client.
"""

from __future__ import annotations

import html as html_lib
import re
from html.parser import HTMLParser

import nh3

from marketing_cli.kernel.css import clean_declarations, clean_style_sheet, safe_url, squeeze

# Tags whose element and content both go.
REMOVED_WITH_CONTENT = frozenset({
    "script", "iframe", "object", "embed", "applet", "frame", "frameset", "noscript", "noembed",
    "noframes", "template", "svg", "math",
})

TAGS = frozenset(nh3.ALLOWED_TAGS) | {
    "style", "meta", "title", "link", "font", "center", "big", "tfoot", "section", "main",
    "address", "picture", "source",
}

# Attributes allowed on every tag; the ones below that name URLs are checked by _safe_url.
GENERIC_ATTRIBUTES = frozenset({
    "class", "style", "id", "dir", "lang", "title", "role", "align", "valign", "width", "height",
    "bgcolor", "background", "border", "color", "face", "size", "nowrap", "xml:lang",
})
TAG_ATTRIBUTES: dict[str, set[str]] = {
    "a": {"href", "target", "name", "rel", "hreflang", "type"},
    "img": {"src", "alt", "hspace", "vspace", "usemap", "srcset", "sizes", "loading"},
    "table": {"cellpadding", "cellspacing", "summary", "frame", "rules"},
    "td": {"colspan", "rowspan", "headers", "scope", "abbr", "axis", "char", "charoff"},
    "th": {"colspan", "rowspan", "headers", "scope", "abbr", "axis", "char", "charoff"},
    "col": {"span", "char", "charoff"}, "colgroup": {"span", "char", "charoff"},
    "ol": {"start", "type", "reversed"}, "ul": {"type"}, "li": {"value", "type"},
    "meta": {"charset", "name", "content", "http-equiv", "property"},
    "link": {"rel", "href", "type", "media"},
    "style": {"type", "media"},
    "area": {"href", "alt", "shape", "coords", "target"}, "map": {"name"},
    "source": {"srcset", "media", "type", "sizes"},
    "blockquote": {"cite"}, "q": {"cite"}, "del": {"cite", "datetime"}, "ins": {"cite", "datetime"},
    "time": {"datetime"}, "data": {"value"}, "bdo": {"dir"}, "hr": {"noshade", "size"},
}
HTML_ATTRIBUTES = frozenset({"lang", "dir", "xmlns", "xmlns:v", "xmlns:o", "xmlns:w", "xmlns:m", "xml:lang"})
BODY_ATTRIBUTES = GENERIC_ATTRIBUTES | {
    "text", "link", "vlink", "alink", "leftmargin", "topmargin", "marginwidth", "marginheight", "yahoo",
}
ATTRIBUTE_PREFIXES = frozenset({"aria-", "data-"})

URL_ATTRIBUTES = frozenset({
    "href", "src", "action", "formaction", "background", "poster", "cite", "longdesc", "lowsrc",
    "dynsrc", "data", "codebase", "xlink:href", "usemap", "profile", "manifest", "srcset", "o:href",
})
URL_SCHEMES = frozenset({"http", "https", "mailto", "tel", "sms", "cid"})

PREVIEW_SPAN = (
    '<span class="mkt-preview-text" style="display:none !important;visibility:hidden;mso-hide:all;'
    'font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;color:transparent">'
    "{{preview_text}}</span>"
)


def _safe_url(value: str) -> bool:
    """True for a URL a browser would not run: http(s), mailto, tel, sms, cid, or relative
    (`#top`, `/x`, `{{unsubscribe_url}}`), read as kernel/css.safe_url reads it (the parser has
    already decoded entities)."""
    return safe_url(value, URL_SCHEMES)


def _safe_srcset(value: str) -> bool:
    return all(_safe_url(candidate.strip().split(" ")[0]) for candidate in value.split(",") if candidate.strip())


def _filter_attribute(tag: str, attribute: str, value: str) -> str | None:
    name = attribute.lower()
    if name.startswith("on"):
        return None
    if name in ("srcset",):
        return value if _safe_srcset(value) else None
    if name in URL_ATTRIBUTES:
        return value if _safe_url(value) else None
    if name == "style":
        return _clean_style_attribute(value)
    if name == "http-equiv" and squeeze(value) == "refresh":
        return None
    return value


def _clean_style_attribute(value: str) -> str | None:
    """The declarations kernel/css keeps; no attribute when the cleaning left none."""
    cleaned = clean_declarations(value)
    if cleaned != value and not cleaned.strip(" \t\r\n\f;"):
        return None
    return cleaned


def _cleaner(tags: frozenset[str] | set[str], attributes: dict[str, set[str]]) -> nh3.Cleaner:
    return nh3.Cleaner(
        tags=set(tags),
        clean_content_tags=set(REMOVED_WITH_CONTENT),
        attributes=attributes,
        attribute_filter=_filter_attribute,
        generic_attribute_prefixes=set(ATTRIBUTE_PREFIXES),
        url_schemes=set(URL_SCHEMES),
        strip_comments=False,
        link_rel=None,
    )


_CONTENT = _cleaner(TAGS, {"*": set(GENERIC_ATTRIBUTES), **{t: set(a) for t, a in TAG_ATTRIBUTES.items()}})
_HTML_TAG = _cleaner({"div"}, {"div": set(HTML_ATTRIBUTES)})
_BODY_TAG = _cleaner({"div"}, {"div": set(BODY_ATTRIBUTES)})


# --- comments and style sheets -----------------------------------------------------------

# In nh3's output, text and attribute values have `<` and `>` escaped, so every `<` opens a
# tag or a comment; only <style> holds raw text (where `<!--` is CSS, not a comment), and it
# ends at the first `</style` (the parser ended the element there).
_OUTPUT_TOKEN = re.compile(r"<!--(.*?)-->|(<style\b[^>]*>)(.*?)(</style\s*>)|<[^>]*>", re.S | re.I)
_CONDITION = r"\[if\s+[!\w\s()&|]+\]"
_DOWNLEVEL_HIDDEN = re.compile(r"(" + _CONDITION + r">)(.*)(<!\[endif\])", re.S | re.I)
_REVEALED_OPEN = re.compile(_CONDITION + r"><!(?:--)?", re.I)
_REVEALED_CLOSE = re.compile(r"<!\[endif\]", re.I)


def _clean_output(cleaned: str) -> str:
    """nh3's output with its comments cleaned (conditional ones kept, cleaned inside) and the
    CSS of its `<style>` elements cleaned."""
    if "<!--" not in cleaned and "<style" not in cleaned:
        return cleaned

    def replace(match: re.Match[str]) -> str:
        if match.group(2) is not None:
            return match.group(2) + clean_style_sheet(match.group(3)) + match.group(4)
        data = match.group(1)
        if data is None:
            return match.group(0)
        if _REVEALED_OPEN.fullmatch(data) or _REVEALED_CLOSE.fullmatch(data):
            return match.group(0)
        hidden = _DOWNLEVEL_HIDDEN.fullmatch(data)
        if hidden is None:
            return ""
        inner = _clean_conditional(hidden.group(2))
        if "-->" in inner or "--!>" in inner:
            return ""
        return f"<!--{hidden.group(1)}{inner}{hidden.group(3)}-->"

    return _OUTPUT_TOKEN.sub(replace, cleaned)


_OFFICE_TAG = re.compile(r"[vow]:[a-z]+", re.I)
_CONDITIONAL_TAGS = TAGS | {"xml"}
_ATTRIBUTE_NAME = re.compile(r"[a-z_][a-z0-9_.:\-]*")
_RAW_NAME = re.compile(r"</?\s*([^\s/>]+)")


class _ConditionalCleaner(HTMLParser):
    """Token-level cleaning of the inside of a conditional comment (it may hold half a table)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.skipping: list[str] = []
        self.names: dict[str, str] = {}  # the name as written (`o:PixelsPerInch`), for end tags
        self.css: list[str] = []  # a <style> element's text, which may come in several pieces

    def flush_css(self) -> None:
        if self.css:
            self.out.append(clean_style_sheet("".join(self.css)))
            self.css = []

    def _allowed(self, tag: str) -> bool:
        return tag in _CONDITIONAL_TAGS or _OFFICE_TAG.fullmatch(tag) is not None

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], closing: str) -> None:
        if self.skipping or tag in REMOVED_WITH_CONTENT:
            if tag in REMOVED_WITH_CONTENT and not closing:
                self.skipping.append(tag)
            return
        if not self._allowed(tag):
            return
        raw = self.get_starttag_text() or ""
        found = _RAW_NAME.match(raw)
        name = found.group(1) if found and found.group(1).lower() == tag else tag
        parts = [name]
        for attribute, value in attrs:
            if not _ATTRIBUTE_NAME.fullmatch(attribute):
                continue
            if value is None:
                if not attribute.startswith("on"):
                    parts.append(attribute)
                continue
            kept = _filter_attribute(tag, attribute, value)
            if kept is not None:
                parts.append(f'{attribute}="{html_lib.escape(kept, quote=True)}"')
        self.names[tag] = name
        self.out.append("<" + " ".join(parts) + closing + ">")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, "/")

    def handle_endtag(self, tag: str) -> None:
        self.flush_css()
        if self.skipping:
            if tag == self.skipping[-1]:
                self.skipping.pop()
            return
        if self._allowed(tag):
            self.out.append(f"</{self.names.get(tag, tag)}>")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.cdata_elem == "style":
            self.css.append(data)
        else:
            self.out.append(data.replace("<", "&lt;").replace(">", "&gt;"))

    def handle_entityref(self, name: str) -> None:
        if not self.skipping:
            self.out.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        if not self.skipping:
            self.out.append(f"&#{name};")


def _clean_conditional(inner: str) -> str:
    parser = _ConditionalCleaner()
    parser.feed(inner)
    parser.close()
    parser.flush_css()
    return "".join(parser.out)


# --- the document shell ------------------------------------------------------------------

_TAG_BODY = r"((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>"
_DOCTYPE = re.compile(r"\s*(<!doctype[^<>]*>)", re.I)
_HTML_OPEN = re.compile(r"<html\b" + _TAG_BODY, re.I)
_BODY_CLOSE = re.compile(r"</body\s*>", re.I)
# What can hide a `<body` that is not the body: comments and raw-text elements.
_BODY_SCAN = re.compile(r"<!--.*?(?:-->|\Z)|<(script|style|title|textarea|xmp)\b.*?(?:</\1\s*>|\Z)|<body\b" + _TAG_BODY,
                        re.I | re.S)
_SHELL_TAGS = re.compile(r"<!--.*?(?:-->|\Z)|<(script|style|title|textarea|xmp)\b.*?(?:</\1\s*>|\Z)"
                         r"|</?(?:html|head|body)\b" + _TAG_BODY, re.I | re.S)
_DIV_ATTRIBUTES = re.compile(r"<div((?:\s[^>]*)?)>")


def _clean_attributes(raw: str, cleaner: nh3.Cleaner) -> str:
    """The attributes of a shell tag (`<html ...>`, `<body ...>`) cleaned by the same rules:
    nh3 reads them on a stand-in `<div>` (it drops html and body from a fragment)."""
    cleaned = cleaner.clean(f"<div {raw}></div>")
    found = _DIV_ATTRIBUTES.match(cleaned)
    return found.group(1) if found else ""


def _body_open(html: str) -> re.Match[str] | None:
    """The `<body ...>` tag, not a `<body` written in a comment, a style sheet or a script."""
    for match in _BODY_SCAN.finditer(html):
        if match.group(0)[:5].lower() == "<body":
            return match
    return None


def _drop_shell_tag(match: re.Match[str]) -> str:
    return match.group(0) if match.group(0).startswith("<!--") or match.group(1) else ""


def clean_html(html: str) -> str:
    """The HTML with every active part removed and everything else kept (module docstring)."""
    body_open = _body_open(html)
    if body_open is None:
        return _clean_output(_CONTENT.clean(html))
    doctype = _DOCTYPE.match(html)
    prelude = html[doctype.end() if doctype else 0:body_open.start()]
    html_open = _HTML_OPEN.search(prelude)
    closes = [m.start() for m in _BODY_CLOSE.finditer(html, body_open.end())]
    body = html[body_open.end():closes[-1] if closes else len(html)]
    head = _clean_output(_CONTENT.clean(_SHELL_TAGS.sub(_drop_shell_tag, prelude))).strip()
    html_attributes = _clean_attributes(html_open.group(1), _HTML_TAG) if html_open else ""
    body_attributes = _clean_attributes(body_open.group(2), _BODY_TAG)
    return (
        (doctype.group(1) + "\n" if doctype else "")
        + f"<html{html_attributes}>\n<head>\n{head}\n</head>\n"
        + f"<body{body_attributes}>{_clean_output(_CONTENT.clean(body))}</body>\n</html>\n"
    )


def inject_preview_span(html: str) -> str:
    """The HTML with the hidden `{{preview_text}}` span right after `<body ...>` (or at the start
    when there is no body). Idempotent: HTML that already starts its body with it is returned
    as it is."""
    body_open = _body_open(html)
    at = body_open.end() if body_open else 0
    if html.startswith(PREVIEW_SPAN, at):
        return html
    return html[:at] + PREVIEW_SPAN + html[at:]

"""The one merge-tag language of every channel: compile a template once, render it per recipient.

Syntax (docs/campaigns.md):

    {{contact.<merge_tag>}}        a contact field's value (field default when the contact has none)
    {{workspace.name}}             workspace values
    {{unsubscribe_url}} ...        action URLs (per recipient; the caller supplies them)
    {{preview_text}} {{server_time}} {{current_date}}   system values
    {{contact.first_name|there}}   fallback: written when the value is empty

Spaces inside the braces are allowed (`{{ contact.city | Paris }}`). A tag whose value is
empty (and that has no fallback) renders as nothing. A tag the workspace does not define
is left exactly as written, so a mistake shows in a test email, and
`services/contacts/merge_tags.find_unknown_tags` reports it when HTML is set. What a
workspace defines (its fields, and the `Renderer` that reads them) lives there; this
module knows no database.

Values inserted into HTML are HTML-escaped; values inserted into plain text or a subject
are not. A fallback is part of the template's own source, so it is written as is. A tag
that begins a URL attribute (`href="{{contact.website}}"`, src, action, background...)
renders its value only when it is an http(s), mailto or tel URL (or a URL of ours, such
as `{{unsubscribe_url}}`): a contact's value can never put a `javascript:` link into a
message; anything else renders as the fallback.

Speed: `compile_template` splits the text ONCE into literal and tag parts; `render` then
only joins strings with dict lookups (no regular expression per recipient). A `Values`
object holds one recipient's values and escapes them for HTML at most once, however many
templates (subject, HTML) are rendered with it. Tag names are matched against the
workspace's own definitions and looked up in dicts: they never reach SQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

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


class Values:
    """One recipient's tag values (name without braces -> text), plain and HTML-escaped."""

    __slots__ = ("text", "_html")

    def __init__(self, text: Mapping[str, str]) -> None:
        self.text = dict(text)
        self._html: dict[str, str] | None = None

    @property
    def html(self) -> dict[str, str]:
        if self._html is None:
            self._html = {name: escape(value, quote=True) for name, value in self.text.items()}
        return self._html


_URL_ATTRIBUTE = re.compile(r"""\b(?:href|src|action|formaction|background|poster|cite|srcset)\s*=\s*["']?\s*$""",
                            re.IGNORECASE)
_SAFE_SCHEMES = ("http://", "https://", "mailto:", "tel:")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")


def safe_url(value: str) -> bool:
    """Whether a value may start a URL attribute: http(s), mailto or tel (case, blanks and
    control characters ignored, as browsers ignore them)."""
    return _INVISIBLE.sub("", value).lower().startswith(_SAFE_SCHEMES)


class Template:
    """A text split into literal parts (str) and tag parts ((name, fallback, as_written, url))."""

    __slots__ = ("parts", "html", "names")

    def __init__(self, text: str, *, html: bool) -> None:
        self.html = html
        parts: list[Any] = []
        names: dict[str, None] = {}
        position = 0
        for match in TAG.finditer(text):
            if match.start() > position:
                parts.append(text[position:match.start()])
            name, fallback = match.group(1), match.group(2)
            url = html and _URL_ATTRIBUTE.search(text, max(0, match.start() - 40), match.start()) is not None
            parts.append((name, "" if fallback is None else fallback.strip(), match.group(0), url))
            names.setdefault(name, None)
            position = match.end()
        if position < len(text):
            parts.append(text[position:])
        self.parts = tuple(parts)
        self.names = tuple(names)

    def render(self, values: Values) -> str:
        source = values.html if self.html else values.text
        out = []
        for part in self.parts:
            if part.__class__ is str:
                out.append(part)
                continue
            name, fallback, written, url = part
            value = source.get(name)
            if value is None:
                out.append(written)  # not a tag of this workspace: left as written
            elif url and value and not safe_url(values.text[name]):
                out.append(fallback)  # a value that would make the link active content
            else:
                out.append(value or fallback)
        return "".join(out)


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


def render_all(templates: Iterable[Template], values: Values) -> list[str]:
    return [t.render(values) for t in templates]

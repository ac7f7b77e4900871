"""Merge-tag fallbacks checked when HTML is saved (kernel/merge.py renders them).

A fallback (`{{contact.first_name|there}}`) is rendered exactly like a value (decoded from
the template first: `{{contact.x|Tom &amp; Jerry}}` is `Tom & Jerry`), so what rendering
would quietly drop at send time is refused when the HTML is saved instead: `check_fallbacks`
answers 400 for a fallback that would not stand where it is written (markup in text, the
quote that ends its attribute value, a URL or a srcset candidate that is not allowed there,
CSS a value cannot hold or the cleaner refuses).
"""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import css, markup
from marketing_cli.kernel.merge import compile_template
from marketing_cli.kernel.merge_contexts import CSS, SRCSET, URL
from marketing_cli.kernel.merge_urls import srcset_allowed, srcset_value, url_allowed

FALLBACK_REFUSED = "The fallback of {tag} cannot stand where it is written: {reason}."

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
    if kind == URL:
        if not url_allowed(value):
            return f"{region.attribute} takes only an http(s), mailto or tel URL"
    elif kind == SRCSET:
        if not srcset_allowed(srcset_value(value)):
            return f"{region.attribute} takes only http(s) or relative URLs"
    elif kind == CSS:
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

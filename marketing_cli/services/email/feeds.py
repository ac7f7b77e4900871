"""Feed campaigns: an RSS or Atom feed fetched, parsed and rendered into a campaign's HTML.

Fetching follows the template-URL rules (services/email/template_url.py over
kernel/outbound.py: http(s) only, public addresses only unless MKT_ALLOW_PRIVATE_URLS=1,
30 s in all and 5 MiB, every redirect checked again). Reading is feedparser's (RSS
0.9x/1.0/2.0, Atom 0.3/1.0) within the bounds of services/email/feed_xml.py: the charset,
well-formed XML without entities, size, depth, attributes and elements capped, and
feedparser run in a child process under a CPU-time and a memory bound.

Which items are new (`new_items`): an item whose guid (its `id`/`guid`, else its link,
else a digest of its title and summary) was not in a copy already sent, and whose date
(published, else updated) is not older than the newest date already sent; an item
without a date counts by its guid alone. A series made with a feed remembers the items
the feed held then, so the first occurrence sends only what is published afterwards.

The template language (docs/templates.md "Feed campaigns"):

    {{#feed.items}} ... {{/feed.items}}   repeated once per new item, newest first
    {{item.title}} {{item.url}} {{item.summary}} {{item.author}} {{item.date}}
                                          text, HTML-escaped (the summary without its tags)
    {{item.summary_html}} {{item.content_html}}
                                          the item's HTML, cleaned like variant HTML (html_clean)
    {{feed.title}} {{feed.url}} {{feed.item_count}} {{feed.latest_title}}
                                          anywhere, subject and preview text included

Nothing from a feed can become a merge tag or an active part: braces in item text are
written as character references (so `{{unsubscribe_url}}` in a post title stays text),
an item URL that is not http(s) renders empty, and item HTML goes through html_clean.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from marketing_cli.kernel import clock
from marketing_cli.services.email import feed_xml, template_url
from marketing_cli.services.email.feed_xml import NOT_A_FEED  # noqa: F401 - the message callers name

FEED_ACCEPT = "application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.5"
MAX_ITEMS = 50  # items rendered into one copy (the newest)

NO_BLOCK = ("A feed campaign's HTML needs a {{#feed.items}} ... {{/feed.items}} block for the new items "
            "(docs/templates.md).")

BLOCK = re.compile(r"\{\{\s*#\s*feed\.items\s*\}\}(.*?)\{\{\s*/\s*feed\.items\s*\}\}", re.DOTALL)
ITEM_TAG = re.compile(r"\{\{\s*item\.([a-z_]+)\s*\}\}")
FEED_TAG = re.compile(r"\{\{\s*feed\.([a-z_]+)\s*\}\}")


@dataclass
class Item:
    guid: str
    title: str = ""
    url: str = ""
    summary_html: str = ""
    content_html: str = ""
    author: str = ""
    published: datetime | None = None


@dataclass
class Feed:
    title: str = ""
    url: str = ""
    items: list[Item] = field(default_factory=list)


# --- fetching and parsing ---------------------------------------------------------------

def fetch_feed(url: str) -> Feed:
    """The feed at `url`; MktError(400) with the template-URL messages, or feed_xml's."""
    page = template_url.fetch(url, accept=FEED_ACCEPT)
    return parse_feed(page.body, page.charset)


def parse_feed(data: bytes | str, charset: str | None = None) -> Feed:
    """A feed's bytes (and the charset its answer declared) read within feed_xml's bounds."""
    read = feed_xml.read(data, charset)
    return Feed(title=read["title"], url=read["url"], items=[
        Item(guid=i["guid"], title=i["title"], url=i["url"], summary_html=i["summary_html"],
             content_html=i["content_html"], author=i["author"],
             published=datetime.fromtimestamp(i["published"], timezone.utc) if i["published"] is not None else None)
        for i in read["items"]])


# --- which items are new ------------------------------------------------------------------

def new_items(feed: Feed, seen: set[str], cutoff: datetime | None) -> list[Item]:
    """The items not sent yet (module docstring), newest first, at most MAX_ITEMS."""
    fresh = [i for i in feed.items if i.guid not in seen and (cutoff is None or i.published is None
                                                                 or i.published >= cutoff)]
    fresh.sort(key=lambda i: i.published or datetime.max.replace(tzinfo=timezone.utc), reverse=True)
    return fresh[:MAX_ITEMS]


def remember(items: list[Item], seen: list[str], cutoff: datetime | None, keep: int) -> tuple[list[str], str | None]:
    """The guids and the cutoff after sending `items` (the newest `keep` guids are kept)."""
    guids = [g for g in seen if g not in {i.guid for i in items}] + [i.guid for i in reversed(items)]
    dates = [i.published for i in items if i.published is not None] + ([cutoff] if cutoff else [])
    return guids[-keep:], clock.format_ts(max(dates)) if dates else None


# --- rendering ------------------------------------------------------------------------------

def uses_feed(text: str) -> bool:
    return bool(BLOCK.search(text) or ITEM_TAG.search(text) or FEED_TAG.search(text))


def has_block(text: str) -> bool:
    return bool(BLOCK.search(text))


def _inert(text: str) -> str:
    """No merge tag can come out of feed text: braces as character references."""
    return text.replace("{", "&#123;").replace("}", "&#125;")


def _plain(text: str) -> str:
    """For a subject or preview text (not HTML): no `{{` survives."""
    return text.replace("{", "(").replace("}", ")")


def _item_values(item: Item) -> dict[str, str]:
    from marketing_cli.services.email.html_clean import clean_html

    def cleaned(fragment: str) -> str:
        return _inert(clean_html(fragment)) if fragment.strip() else ""

    summary_text = feed_xml.text(item.summary_html)
    return {
        "title": _inert(html.escape(item.title)),
        "url": _inert(html.escape(item.url)),
        "summary": _inert(html.escape(summary_text)),
        "author": _inert(html.escape(item.author)),
        "date": item.published.strftime("%Y-%m-%d") if item.published else "",
        "summary_html": cleaned(item.summary_html),
        "content_html": cleaned(item.content_html),
    }


def render_html(template: str, feed: Feed, items: list[Item]) -> str:
    """The HTML with the block repeated per item and the feed tags filled in."""
    values = [_item_values(i) for i in items]

    def block(match: re.Match[str]) -> str:
        body = match.group(1)
        return "".join(ITEM_TAG.sub(lambda m, v=v: v.get(m.group(1), m.group(0)), body) for v in values)

    rendered = BLOCK.sub(block, template)
    return FEED_TAG.sub(lambda m: _feed_values(feed, items, html_mode=True).get(m.group(1), m.group(0)), rendered)


def render_text(template: str, feed: Feed, items: list[Item]) -> str:
    """A subject or preview text with the feed tags filled in (plain text)."""
    values = _feed_values(feed, items, html_mode=False)
    return FEED_TAG.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _feed_values(feed: Feed, items: list[Item], *, html_mode: bool) -> dict[str, str]:
    raw = {"title": feed.title, "url": feed.url, "item_count": str(len(items)),
           "latest_title": items[0].title if items else ""}
    if html_mode:
        return {k: _inert(html.escape(v)) for k, v in raw.items()}
    return {k: _plain(v) for k, v in raw.items()}

"""The documented limits on what one request may ask for (docs/reliability.md, "Data paths").

Each limit is checked while the input is validated, before any SQL is built, and past it
the answer is a 400 whose message names the limit. They keep every query the services
build inside SQLite's own bounds (an expression tree at most 1,000 deep, at most 32,766
bound parameters), so no input reaches SQLite's "Expression tree is too large" or
"too many SQL variables" (a 500), and they bound the work one request can cause.
"""

from __future__ import annotations

from marketing_cli.errors import MktError

SEARCH_CONDITIONS = 100  # members of `fields` in one contact search
SEARCH_TAGS = 100  # tag ids in one search's `tags`
CONDITION_VALUES = 100  # options in one multi-select search condition
SEGMENT_FILTERS = 50  # filters of one segment
FILTER_VALUES = 1_000  # values of one segment filter (in / not_in lists, tag ids, options)
SEGMENT_VALUES = 1_000  # values of all the filters of one segment together
AUDIENCE_ENTRIES = 10  # Audience objects in one audience list
AUDIENCE_IDS = 100  # ids in one include/exclude list of an Audience object
AUDIENCE_SEGMENTS = 10  # segments (included and excluded) used by one audience in all
IMPORT_TAG_IDS = 100  # --tag / tag= ids given to every imported contact
TAG_LIST = 100_000  # emails or contact ids in one bulk tag or untag (POST /v1/tags/{id}/contacts)
CONSENT_TEXT = 1_000  # characters of the wording a consent was collected with (consent_text, --consent-text)


def check_count(count: int, limit: int, message: str) -> None:
    """MktError(400, message) when `count` is over `limit` (the message names the limit)."""
    if count > limit:
        raise MktError(400, message)

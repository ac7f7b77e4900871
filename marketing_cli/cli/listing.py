"""`Listing`: the table every command prints, fitted to the terminal without cutting what matters.

A person copies ids from one command into the next, so an id is never cut, folded or dropped.
When the table is wider than the terminal, it gives way in this order:

1. timestamps lose seconds and zone: `2026-11-25T14:12:32.123Z` becomes `2026-11-25 14:12`
   (a time already short with its zone named, `2026-11-25 15:12 CET`, stays as it is; a cell
   may hold several lines, such as a time in UTC over the same time in the terminal's zone);
2. headers take their abbreviation (`ABBREVIATIONS`, listed in docs/cli.md);
3. text columns narrow and fold their values onto more lines (never below their header);
4. columns are hidden, those named in `drop` first, then the rightmost (the key column and id
   columns never), and a note under the table names them; `--wide` shows every column at
   full width instead.

rich is imported only when the table is rendered: `--json` and `-q` never need it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from marketing_cli.kernel.ids import HEX24_PATTERN

# Shorter headers, used only when the full table does not fit (docs/cli.md lists them).

# Set by output.emit while it prints: True when the command offers `--wide` (it passed `wide`).
# A table printed by a command without it names a wider terminal instead: a hint that the
# command then refuses (`No such option: --wide`) misleads.
WIDE_OFFERED: ContextVar[bool] = ContextVar("mkt_wide_offered", default=False)

ABBREVIATIONS = {
    "conversion tracking": "conv. tr.",
    "records verified": "records",
    "domain verified": "verified",
    "display name": "name",
    "balance after": "balance",
    "preview text": "preview",
    "scheduled_at": "scheduled",
    "created_at": "created",
    "suppressed": "suppr.",
    "immutable": "immut.",
    "required": "req.",
    "definition": "def.",
    "attempts": "tries",
    "last error": "error",
    "segments": "segs",
    "category": "cat.",
    "delivered": "deliv.",
    "unsubscribed": "unsub.",
    "complained": "compl.",
}

_DATE = re.compile(r"^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d)(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?$")
# A time already short, with its zone named (cli/times.py: `2026-12-01 10:00 CET`), kept as it is.
_CLOCK = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d [A-Za-z0-9+:-]{1,8}$")
_HEX_ID = re.compile(HEX24_PATTERN)
SHORT_DATE_WIDTH = 16  # 2026-11-25 14:12
MIN_TEXT_WIDTH = 8
WHOLE_WORD_WIDTH = 16  # a text column narrows to this, or to its header if longer


def short_date(text: str) -> str:
    """`2026-11-25T14:12:32.123Z` -> `2026-11-25 14:12` (UTC as stored), line by line; other text unchanged."""
    if "\n" in text:
        return "\n".join(short_date(line) for line in text.split("\n"))
    match = _DATE.match(text)
    return f"{match.group(1)} {match.group(2)}" if match else text


def _is_date(text: str) -> bool:
    """A timestamp, or lines of them (a time in UTC over the same time in the terminal's zone)."""
    return all(_DATE.match(line) or _CLOCK.match(line) for line in text.split("\n"))


def _width(text: str) -> int:
    from rich.cells import cell_len

    return max(cell_len(line) for line in text.split("\n"))


class Listing:
    """Rows under headers; rendered by rich to fit `options.max_width` (or all of it when `wide`)."""

    def __init__(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None, *,
                 key: int = 0, droppable: bool = True, hint: str = "--wide", drop: Sequence[str] = ()) -> None:
        self.headers = list(columns)
        self.rows = [["" if v is None else str(v) for v in row] for row in rows]
        self.title = title
        self.key = key
        self.droppable = droppable
        self.hint = hint  # what shows the hidden columns: `--wide` where the command offers it (WIDE_OFFERED)
        self.drop = [self.headers.index(h) for h in drop]  # hidden first, in this order
        self.wide = False
        n = len(self.headers)
        cells = [[row[i] for row in self.rows if row[i] != ""] for i in range(n)]
        self.is_id = [h == "id" or h.endswith(" id") or (bool(c) and all(_HEX_ID.fullmatch(v) for v in c))
                      for h, c in zip(self.headers, cells)]
        self.is_date = [bool(c) and all(_is_date(v) for v in c) for c in cells]
        self.spaced = [any(" " in v for v in c) for c in cells]

    def key_values(self) -> list[str]:
        """The key column's values (`-q`)."""
        return [row[self.key] for row in self.rows]

    # --- widths ---------------------------------------------------------------------------

    def _cells(self, i: int, short: bool) -> list[str]:
        return [short_date(row[i]) if short and self.is_date[i] else row[i] for row in self.rows]

    def _header(self, i: int, abbreviate: bool) -> str:
        return ABBREVIATIONS.get(self.headers[i], self.headers[i]) if abbreviate else self.headers[i]

    def _natural(self, i: int, short: bool, abbreviate: bool) -> int:
        return max([_width(self._header(i, abbreviate)), *(_width(c) for c in self._cells(i, short))])

    def _minimum(self, i: int, short: bool, abbreviate: bool) -> int:
        from rich.cells import cell_len

        natural = self._natural(i, short, abbreviate)
        if self.is_id[i] or self.is_date[i] or (natural <= WHOLE_WORD_WIDTH and not self.spaced[i]):
            return natural  # ids, dates and short one-word values (a status, a type, a count) stay whole
        return min(natural, max(MIN_TEXT_WIDTH, cell_len(self._header(i, abbreviate))))

    @staticmethod
    def _frame(count: int) -> int:
        return 3 * count + 1  # a border before each column and after the last, a space either side

    def full_width(self) -> int:
        """The width of the table with every column whole (`--wide`)."""
        n = len(self.headers)
        return sum(self._natural(i, False, False) for i in range(n)) + self._frame(n)

    def fit(self, width: int) -> tuple[list[int], list[int], bool, bool]:
        """(shown column indexes, their widths, short dates?, abbreviated headers?) for `width`."""
        shown = list(range(len(self.headers)))
        for short, abbreviate in ((False, False), (True, False), (True, True)):
            natural = [self._natural(i, short, abbreviate) for i in shown]
            if self.wide or sum(natural) + self._frame(len(shown)) <= width:
                return shown, natural, short, abbreviate
        order = [*self.drop, *(i for i in reversed(shown) if i not in self.drop)]
        droppable = [i for i in order if self.droppable and i != self.key and not self.is_id[i]]
        while sum(self._minimum(i, True, True) for i in shown) + self._frame(len(shown)) > width and droppable:
            shown.remove(droppable.pop(0))
        return shown, self._share(shown, width - self._frame(len(shown))), True, True

    def _share(self, shown: list[int], room: int) -> list[int]:
        """Minimum widths, then the room left shared out: the narrowest needs are met first."""
        widths = {i: self._minimum(i, True, True) for i in shown}
        needs = {i: self._natural(i, True, True) - widths[i] for i in shown}
        left = room - sum(widths.values())
        waiting = sorted((i for i in shown if needs[i] > 0), key=lambda i: needs[i])
        while waiting and left > 0:
            share = max(left // len(waiting), 1)
            i = waiting.pop(0)
            given = min(needs[i], share, left)
            widths[i] += given
            left -= given
        return [widths[i] for i in shown]

    # --- rich -----------------------------------------------------------------------------

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        shown, widths, _, _ = self.fit(options.max_width)
        width = min(sum(widths) + self._frame(len(shown)), options.max_width)
        return Measurement(width, width)

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.table import Table
        from rich.text import Text

        shown, widths, short, abbreviate = self.fit(options.max_width)
        t = Table(title=self.title, show_lines=False, header_style="bold")
        for i, width in zip(shown, widths):
            whole = self.is_id[i] or self.is_date[i] or self.wide
            t.add_column(self._header(i, abbreviate), width=width, no_wrap=whole, overflow="fold")
        for row in self.rows:
            t.add_row(*(short_date(row[i]) if short and self.is_date[i] else row[i] for i in shown))
        yield t
        hidden = [self.headers[i] for i in range(len(self.headers)) if i not in shown]
        if hidden:
            hint = self.hint if self.hint != "--wide" or WIDE_OFFERED.get() else "a wider terminal"
            yield Text(f"Hidden to fit the terminal: {', '.join(hidden)} ({hint} shows every column).",
                       style="dim")

"""A timeline drawn in the terminal: columns of block characters, one per hour; and what the
email and SMS commands share around it (`render_timeline`, `write_report`, `--html`).

`TimelineChart(timeline, series)` is a rich renderable over a timeline object (the API's
`data` of GET /v1/campaigns/:id/timeline or /v1/sms-campaigns/:id/timeline). Its width is
fixed by the 72 hours of the hourly part, so a send that is still running draws its hours
from the left and the chart grows one column per hour (`mkt campaigns watch`). Each series
is a band ROWS lines high of eighth blocks (ROWS * 8 levels, scaled to the series' own
maximum, which the band's label names); an hour with any event draws at least the lowest
block, so a lone open is never invisible. Below 72 + the label's width (an 80-column
terminal has room), two or more hours share a column (their sum).

When the console is not a terminal (a pipe, a file, CI), the chart is plain text instead:
one line per hour that saw an event, its UTC start and the counts, which greps and diffs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # rich is imported when something is drawn: `--json` never needs it
    from rich.console import Console, ConsoleOptions
    from rich.text import Text

from marketing_cli.kernel.timeline import HOURS

HtmlOption = Annotated[Path, typer.Option("--html", metavar="FILE", dir_okay=False,
                                          help="Write the report to FILE (`-`: standard output).")]
BLOCKS = " ▁▂▃▄▅▆▇█"
ROWS = 3
LABEL = 8  # "clicks " and the like, then the columns


class TimelineChart:
    def __init__(self, timeline: dict[str, Any], series: Sequence[tuple[str, str]],
                 title: str = "per hour since the send started (UTC)", *, plain: bool = True) -> None:
        self.hours = timeline["hours"]
        self.series = series  # (member of a bucket, label)
        self.title = title
        self.plain = plain  # False: nothing at all when not on a terminal (output scripts read)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        from rich.text import Text

        if not console.is_terminal and not self.plain:
            return
        if not self.hours:
            yield Text("No timeline yet: the send has not started.")
            return
        if not console.is_terminal:
            yield from self._plain()
            return
        per_column = max(1, math.ceil(HOURS / max(1, options.max_width - LABEL)))
        yield Text(f"{self.title}, {per_column} hour{'s' if per_column > 1 else ''} per column", style="bold")
        for key, label in self.series:
            values = [b[key] for b in self.hours]
            columns = [sum(values[i:i + per_column]) for i in range(0, len(values), per_column)]
            yield from _band(label, columns)
        yield Text(_axis(math.ceil(HOURS / per_column), per_column), style="dim")

    def _plain(self) -> Iterator[Text]:
        from rich.text import Text

        yield Text(self.title)
        for bucket in self.hours:
            counts = [f"{label} {bucket[key]}" for key, label in self.series]
            if any(bucket[key] for key, _ in self.series):
                yield Text(f"{bucket['start']}  " + "  ".join(counts))


def _band(label: str, columns: list[int]) -> Iterator[Text]:
    """ROWS lines of blocks; the top line carries the label, the next the band's maximum."""
    from rich.text import Text

    top = max(columns) if columns else 0
    levels = [0 if not v or not top else max(1, round(v * ROWS * 8 / top)) for v in columns]
    for row in range(ROWS - 1, -1, -1):
        cells = "".join(BLOCKS[min(8, max(0, level - row * 8))] for level in levels)
        name = f"{label[:LABEL - 1]:<{LABEL}}" if row == ROWS - 1 else (f"{_short(top):>{LABEL - 1}} "
                                                                          if row == ROWS - 2 else " " * LABEL)
        yield Text(name, style="bold" if row == ROWS - 1 else "dim").append(cells, style="cyan")


def _short(n: int) -> str:
    """The band's maximum in at most LABEL - 1 characters ('max 12', '1.2k')."""
    text = f"{n:,}" if n < 10_000 else f"{n / 1000:.0f}k"
    return f"max {text}" if len(text) <= LABEL - 5 else text


def _axis(columns: int, per_column: int) -> str:
    """'0h' under the first column, then a mark every 24 hours."""
    line = [" "] * columns
    for hour in range(0, HOURS, 24):
        mark = f"{hour}h"
        at = hour // per_column
        line[at:at + len(mark)] = mark
    return " " * LABEL + "".join(line)[:columns]


def write_report(data: dict[str, Any], path: Path) -> None:
    """The page of marketing_cli/reports/html.py to `path` (or stdout for `-`), and a line saying where."""
    import sys

    from marketing_cli.reports import html

    page = html.render(data)
    if str(path) == "-":
        sys.stdout.write(page)
        return
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        from marketing_cli.errors import MktError

        raise MktError(400, f"Could not write {path}: {exc.strerror}.") from None
    typer.echo(f"Wrote the report of {data['campaign']['id']} to {path} ({len(page.encode()):,} bytes).")


def render_timeline(data: dict[str, Any], series: Sequence[tuple[str, str]]) -> Any:
    """The chart of the hourly part, then the totals of every series."""
    from rich.console import Group
    from rich.text import Text

    from marketing_cli.cli.output import pairs

    if not data["hours"]:
        return Text(f"{data['status']}: the send has not started, so there is no timeline yet.")
    return Group(Text(f"Send started {data['started_at']} ({data['status']}); "
                      f"{len(data['hours'])} hourly and {len(data['days'])} daily buckets."),
                 TimelineChart(data, series), pairs({k: v for k, v in data["totals"].items()}, title="Totals"))

"""How an import reads the dates of DATE columns (`--date-format`, `--day-first` / `--month-first`).

A cell is first read as everywhere else (values.py: `YYYY-MM-DD` or an RFC 3339
timestamp). Otherwise:

- with a date format (`%d.%m.%Y`, strptime directives), the cell must match it;
- with a day-first or month-first choice, python-dateutil reads the cell with that
  preference (`05/06/1987` is 5 June day first, May 6 month first; a date that can be read
  only one way, `17/01/1987`, is read that way);
- with neither, a cell both readings agree on (`17.01.1987`, `01/17/1987`, `Jan 17 1987`)
  is read; one they disagree on (`05/06/1987`) is refused, naming the options.

Every reading must give a whole date: a day, a month and a year (dateutil fills missing
parts from a default; a cell read differently with two defaults lacks one and is refused).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from marketing_cli.errors import MktError

BOTH = ("Give either a date format (--date-format / date_format=) or --day-first / --month-first "
        "(day_first=true|false), not both.")
BAD_FORMAT = ("The date format {fmt!r} (--date-format / date_format=) must read a day, a month and a year, "
              "for example %d.%m.%Y or %m/%d/%Y.")
AMBIGUOUS = ("Field '{tag}': '{text}' is {first} read day first and {second} read month first: choose with "
             "--day-first or --month-first (API: day_first=true|false), or give --date-format.")
NOT_FORMAT = "Field '{tag}' must be a date in the format {fmt} (--date-format), or YYYY-MM-DD."
NOT_DATE = ("Field '{tag}' must be a date: YYYY-MM-DD, an RFC 3339 timestamp, or a day, month and year "
            "such as 17.01.1987 (--date-format / --day-first / --month-first say how to read others).")
MAX_FORMAT = 64
_SAMPLE = datetime(1987, 1, 17)
_DEFAULTS = (datetime(2000, 1, 1), datetime(2001, 2, 2))


def check_date_options(date_format: str | None, day_first: bool | None) -> None:
    """MktError(400) for a format that does not read a whole date, or for both options at once."""
    if date_format is not None and day_first is not None:
        raise MktError(400, BOTH)
    if date_format is not None:
        try:
            ok = len(date_format) <= MAX_FORMAT and \
                datetime.strptime(_SAMPLE.strftime(date_format), date_format).date() == _SAMPLE.date()
        except (ValueError, TypeError, re.error):  # re.error: a directive given twice
            ok = False
        if not ok:
            raise MktError(400, BAD_FORMAT.format(fmt=date_format))


def _whole(text: str, day_first: bool) -> date | None:
    from dateutil import parser

    try:
        a, b = (parser.parse(text, default=d, dayfirst=day_first) for d in _DEFAULTS)
    except (ValueError, OverflowError, TypeError, parser.ParserError):
        return None
    return a.date() if a.date() == b.date() else None


def date_reader(tag: str, strict: Callable[[str], Any], date_format: str | None,
                day_first: bool | None) -> Callable[[str], Any]:
    """CSV text -> 'YYYY-MM-DD' (None: no value), ValueError naming field `tag` when unreadable.

    `strict` is values.py's check (ISO dates and RFC 3339 timestamps), tried first.
    """

    def read(raw: str) -> Any:
        try:
            return strict(raw)
        except ValueError:
            pass
        text = raw.strip()
        if date_format is not None:
            try:
                return datetime.strptime(text, date_format).date().isoformat()
            except ValueError:
                raise ValueError(NOT_FORMAT.format(tag=tag, fmt=date_format)) from None
        if day_first is not None:
            found = _whole(text, day_first)
            if found is None:
                raise ValueError(NOT_DATE.format(tag=tag))
            return found.isoformat()
        first, second = _whole(text, True), _whole(text, False)
        if first is None or second is None:
            raise ValueError(NOT_DATE.format(tag=tag))
        if first != second:
            raise ValueError(AMBIGUOUS.format(tag=tag, text=text, first=first.isoformat(), second=second.isoformat()))
        return first.isoformat()

    return read

"""Behaviour kept as data: a table shipped beside its module, which the operator replaces with a
copy of their own named in an environment variable (the SMS quiet hours, the SMS revocation
phrases). The file in effect is read again when it changes (its modification time and size), so
an edit needs no restart; a file that cannot be read or parsed raises, so nothing runs on a table
nobody can read.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from marketing_cli.errors import MktError

T = TypeVar("T")


@lru_cache(maxsize=16)
def _load(parse: Callable[[str, str], Any], what: str, env: str, path: str, built_in: str,
          stamp: tuple[float, int]) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MktError(500, f"{env}: cannot read the {what} {path} ({exc}).") from None
    return parse(text, "built-in" if Path(path) == Path(built_in) else path)


class DataTable(Generic[T]):
    """`parse(text, origin)` reads the file into a T (origin: "built-in" or the operator's path);
    `what` names it in errors ("quiet-hours table")."""

    def __init__(self, env: str, built_in: Path, parse: Callable[[str, str], T], what: str) -> None:
        self.env, self.built_in, self.parse, self.what = env, built_in, parse, what

    def path(self) -> str:
        return os.environ.get(self.env, "").strip() or str(self.built_in)

    def current(self) -> T:
        """The table in effect: the operator's copy, or the built-in one."""
        return self._read(self.path())

    def shipped(self) -> T:
        """The built-in table, whatever the operator's copy holds."""
        return self._read(str(self.built_in))

    def text(self) -> str:
        """The file in effect, once it reads as a table (the copy an operator edits)."""
        path = self.path()
        self._read(path)  # refuses an unreadable or broken file first
        return Path(path).read_text(encoding="utf-8")

    def _read(self, path: str) -> T:
        try:
            st = os.stat(path)
        except OSError as exc:
            raise MktError(500, f"{self.env}: cannot read the {self.what} {path} ({exc.strerror}).") from None
        return _load(self.parse, self.what, self.env, path, str(self.built_in), (st.st_mtime, st.st_size))


def csv_rows(text: str) -> Iterator[tuple[int, list[str]]]:
    """The rows of a rules file as (line number, cells stripped): blank lines and `#` comment
    lines left out, so that an operator's copy may explain itself and an error names its line."""
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        yield n, [c.strip() for c in next(csv.reader(io.StringIO(line)))]

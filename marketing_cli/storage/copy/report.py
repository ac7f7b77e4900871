"""What the copy tells: its progress as it goes (`Progress`, which the CLI draws as rich bars), and the
problems the check found, as a CSV of every row (`--report`), a summary for the result, and the error that
stops a copy when a problem has no `--fix`.
"""

from __future__ import annotations

import csv
from collections import Counter
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage.copy.fixes import Problem


class Progress:
    """What the copy tells its face as it goes (the CLI draws rich bars; the default says nothing)."""

    def phase(self, text: str, total: int) -> None: ...

    def table(self, name: str, total: int, done: int) -> None: ...

    def advance(self, rows: int) -> None: ...


def write_report(path: str, problems: list[Problem]) -> None:
    """Every problem found and every row touched, one a line: table, row_id, column, problem, action."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["table", "row_id", "column", "problem", "action"])
        for p in problems:
            writer.writerow([p.table, p.row_id.encode("utf-8", "replace").decode("utf-8"), p.column, p.problem,
                             p.action])


def summary(problems: list[Problem]) -> list[dict[str, Any]]:
    """The problems counted by table, column, kind and action (the result's `problems`)."""
    counted = Counter((p.table, p.column, p.problem.split(" from ")[0], p.action) for p in problems)
    return [{"table": t, "column": c, "problem": pr, "action": a, "rows": n}
            for (t, c, pr, a), n in sorted(counted.items())]


def stopped(problems: list[Problem], report: str | None) -> MktError:
    """The error of a copy that a problem without a --fix stops (nothing was written)."""
    stops = [p for p in problems if p.action == "stopped"]
    shown = "; ".join(f"{p.table} {p.row_id} {p.column}: {p.problem}".replace("  ", " ") for p in stops[:5])
    more = f" (and {len(stops) - 5} more)" if len(stops) > 5 else ""
    where = f"every one is in {report}" if report else "add --report FILE.csv for the list"
    return MktError(422, f"The source has {len(stops)} value(s) the target would refuse or change: "
                         f"{shown}{more}. Nothing was copied; {where}, and choose what to do with "
                         "--fix (nul=strip|replace, utf8=replace, type=null|convert, case=keep|keep-first).")

"""Stage 1, the check: every row of the selection is read once, in the source's snapshot, before anything
is written. What the target would refuse or change is a `Problem` (fixes.py holds the rules); the same
pass counts and checksums the rows as they will be written (verify.py), which the load's resume and
the publish's verification compare with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from marketing_cli.storage.copy.fixes import CASE_BLIND, Fixer, Problem, row_id
from marketing_cli.storage.copy.report import Progress
from marketing_cli.storage.copy.tables import Table, where_sql
from marketing_cli.storage.copy.verify import hexsum, row_digest


@dataclass
class Plan:
    """What the check pass found: per table the number of rows to write and their checksum, the problems, and the
    instance-wide rows themselves."""

    tables: list[Table]
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, tuple[int, str]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    instance_rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)


def _case_variants(source: Any, table: Table, column: str, fixer: Fixer, problems: list[Problem]) -> None:
    """Contacts whose email differs only in case from another of the same workspace (the lowest id is first)."""
    position, ws = table.columns.index(column), table.columns.index("workspace_id")
    first: dict[tuple[Any, str], tuple[Any, ...]] = {}
    keep_first = fixer.fixes.get("case") == "keep-first"
    action = {"keep": "kept as it is", "keep-first": "dropped"}.get(fixer.fixes.get("case", ""), "stopped")
    for row in source.rows(table):
        value = row[position]
        if not isinstance(value, str):
            continue
        folded = (row[ws], value.casefold())
        key = table.key_of(row)
        if folded not in first:
            first[folded] = key
            continue
        why = f"{column} differs only in case from {table.name} {row_id(first[folded])}"
        if keep_first:
            fixer.case_dropped[key] = why
        else:
            problems.append(Problem(table.name, row_id(key), column, why, action))


def check(source: Any, tables: list[Table], fixer: Fixer, progress: Progress) -> Plan:
    """Read every row of the selection once: its problems (with what --fix does), and each table's count and
    checksum as the load will write it; the instance-wide rows are kept (the publish merges them)."""
    plan = Plan(tables)
    fixer.referenced = {(parent, parent_column) for t in tables for _, parent, parent_column in t.fks}
    for table in tables:
        if table.name in CASE_BLIND and not table.instance:
            _case_variants(source, table, CASE_BLIND[table.name], fixer, plan.problems)
    totals = {t.name: source.scalar(f'SELECT count(*) FROM "{t.name}"{where_sql(t, None, "?")}') for t in tables}
    progress.phase("Checking", sum(totals.values()))
    for table in tables:
        progress.table(table.name, totals[table.name], 0)
        total, count, kept = 0, 0, []
        for row in source.rows(table):
            fixed = fixer.fix(table, row, plan.problems)
            progress.advance(1)
            if fixed is None:
                continue
            total += row_digest(fixed)
            count += 1
            if table.instance:
                kept.append(fixed)
        plan.counts[table.name] = count
        plan.sums[table.name] = (count, hexsum(total))
        if table.instance:
            plan.instance_rows[table.name] = kept
    return plan


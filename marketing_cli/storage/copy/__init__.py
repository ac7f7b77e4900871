"""`mkt db copy`: move workspaces between the engines (docs/cli.md, docs/architecture.md "Two engines").

SQLite file -> PostgreSQL URL (moving over), PostgreSQL -> a new SQLite file (a local copy for
debugging); either engine on either side works. `copy` below runs the stages in order, all in
the source's one read snapshot; each stage is a module of this package:

    tables.py    What is copied, in which order: the tables, columns, keys and foreign keys
                 read from the source's schema (sqlite-utils on a SQLite file, the catalogs on
                 PostgreSQL), parents first, each with the WHERE that selects its rows.
    source.py    Reading the source in one snapshot (BEGIN on SQLite, REPEATABLE READ on
                 PostgreSQL), and the workspaces it can give.
        |
    check.py     1. Check: every row of the selection is read once; what the target would
    fixes.py        refuse or change is a `Problem` with the row's key (NUL bytes in text,
                    text that is not UTF-8, a value of the wrong type for its column, emails
                    that differ only in case within a workspace), and fixes.py holds what
                    `--fix` does to each. A problem without a `--fix` stops the copy before
                    anything is written. The same pass counts and checksums the rows as they
                    will be written.
        |
    load.py      2. Load: the workspace rows go, in batches, to a staging area (the schema
                    `mkt_copy_staging` on PostgreSQL, a `FILE.mkt-copy-partial` file on
                    SQLite), each batch committed with its table's progress, so a rerun after
                    a kill goes on from there.
        |
    publish.py   3. Publish, at once: the staged rows become the target's in one transaction
    verify.py       (PostgreSQL) or by a rename (SQLite), the instance-wide rows merged, the
                    identity sequences set past the largest ids, and each table's count and
                    checksum verified against the source's before anything is committed.

    report.py    What the copy tells as it goes (progress) and at the end: the problems as a
                 CSV (`--report`) and a summary, and the error that stops a copy.
    retire.py    Before: whether the source looks live (a job lease, a recent write), which
                 the CLI refuses without --force. After: `--retire-source`, a source that
                 refuses every write and names the database that took over.

What one workspace's copy holds: each table's rows whose `workspace_id` is that workspace,
or, for a table without the column, whose parent (a foreign key, followed up) is in it. The
tables no foreign key ties to a workspace (plans, plan_allowances, addons, sms_rates,
instance_secrets, phone_zone_sets, whose ids are a hash of their zone list, the same on every
database, token_cutovers, mail_domain_lanes: the provider lanes' MX cache) are the instance's:
a target without any workspace takes the source's rows (they replace its seeded ones); a target that already holds workspaces keeps its own and only
gains the rows it lacks. Rows with no workspace at all (a job of the instance) go with `--all`
only. Ids are kept (they are in URLs, webhooks and exports), so a target where one is taken
refuses the copy.

This `__init__` is the face its callers use as `from marketing_cli.storage import copy as dbcopy`
(cli/database.py, tests/platform/test_db_copy.py, bench/bench_db_copy.py): `copy`, `parse_fixes`,
`Progress`, `live_reasons`, `retire`, and the table reading that the tests compare with
(`sqlite_tables`, `ordered`, `scope`).
"""

from __future__ import annotations

from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage import db
from marketing_cli.storage.copy.check import check
from marketing_cli.storage.copy.fixes import FIXES, Fixer, Problem, parse_fixes
from marketing_cli.storage.copy.load import BATCH, fits, load
from marketing_cli.storage.copy.publish import open_target
from marketing_cli.storage.copy.report import Progress, stopped, summary, write_report
from marketing_cli.storage.copy.retire import live_reasons, retire
from marketing_cli.storage.copy.source import open_source, workspaces
from marketing_cli.storage.copy.tables import Table, ordered, postgresql_tables, scope, sqlite_tables

__all__ = ["BATCH", "FIXES", "Problem", "Progress", "Table", "copy", "live_reasons", "ordered", "parse_fixes",
           "postgresql_tables", "retire", "scope", "sqlite_tables"]


def copy(source_target: Any, to: str, *, workspace_ids: list[int] | None, fixes: dict[str, str],
         report: str | None = None, restart: bool = False, batch: int = BATCH,
         progress: Progress | None = None) -> dict[str, Any]:
    """Copy the workspaces (None: all of them) from the database `source_target` to `to`; returns the report."""
    progress = progress or Progress()
    source = open_source(source_target)
    target = None
    try:
        chosen = workspaces(source, workspace_ids)
        if str(db.resolve_db_path(to)) == source.label:
            raise MktError(422, "The target is the source: choose another database.")
        tables = scope(ordered(source.tables), workspace_ids)
        fixer = Fixer(fixes)
        plan = check(source, tables, fixer, progress)
        if report:
            write_report(report, plan.problems)
        result: dict[str, Any] = {
            "source": source.label, "target": str(db.resolve_db_path(to)),
            "workspaces": chosen, "fixes": fixes, "problems": summary(plan.problems),
            "rows_touched": len({(p.table, p.row_id) for p in plan.problems if p.action != "stopped"}),
            "report": report}
        if any(p.action == "stopped" for p in plan.problems):
            raise stopped(plan.problems, report)
        target = open_target(to)
        fits(target, tables, chosen)
        run = f"{source.label} workspaces={'all' if workspace_ids is None else ','.join(map(str, chosen))}" \
              f" fixes={','.join(f'{k}={v}' for k, v in sorted(fixes.items()))}"
        result["resumed"] = target.open_run(run, tables, restart)
        resumed_rows = load(source, target, plan, fixer, batch, progress)
        progress.phase("Publishing", 0)
        result.update(target.publish(tables, plan.instance_rows, plan.sums, chosen))
        result["resumed_rows"] = resumed_rows
        result["tables"] = [{"table": t.name, "rows": plan.counts[t.name], "checksum": plan.sums[t.name][1],
                             "scope": "instance" if t.instance else "workspace"} for t in tables]
        result["rows"] = sum(plan.counts[t.name] for t in tables if not t.instance)
        return result
    finally:
        source.close()
        if target is not None:
            target.close()

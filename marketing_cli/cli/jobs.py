"""`mkt jobs`: the durable job queue (`run` is for cron)."""

from __future__ import annotations

import os
import sqlite3
from typing import Annotated, Optional

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["jobs"], no_args_is_help=True)

# Shared with `mkt serve` (cli/main.py): the worker threads of a runner and one workspace's share of them.
WorkersOption = Annotated[Optional[int], typer.Option(
    min=1, max=64, metavar="N", help="Worker threads that run jobs at once, for every workspace together "
                                     "(default MKT_JOB_WORKERS, else 4).")]
ShareOption = Annotated[Optional[int], typer.Option(
    min=1, max=64, metavar="N", help="At most N of the workers run one workspace's jobs at once; the others stay "
                                     "free for the other workspaces (default MKT_JOB_WORKSPACE_SHARE, else half "
                                     "the workers).")]


@app.command("run")
def jobs_run(
    ctx: typer.Context,
    lease_seconds: Annotated[Optional[int], typer.Option(
        min=1, help="How long a claimed job is held without renewal before another worker may take it over "
                    "(renewed every third of it while this process lives; default MKT_JOB_LEASE_SECONDS, "
                    "else 30).")] = None,
    forever: Annotated[bool, typer.Option(
        "--forever", help="Keep running: look for due jobs every --interval seconds until SIGTERM or Ctrl-C "
                          "(a worker of its own, beside other workers on this or other machines).")] = False,
    interval: Annotated[float, typer.Option(
        min=0.1, max=3600, help="With --forever: seconds between two looks at the queue when it is empty.")] = 1.0,
    workers: WorkersOption = None,
    workspace_share: ShareOption = None,
    processes: Annotated[int, typer.Option(
        min=1, max=64, metavar="N", help="Runner processes, each with its --workers threads and its own connection, "
                                         "sharing the queue and one campaign's send (threads share one core; "
                                         "processes use them all). MKT_SEND_WORKERS, when unset, becomes at least N; "
                                         "the default --workspace-share is divided among the N.")] = 1,
    as_json: JsonOption = False,
) -> None:
    """Run every job that is due once, then exit (for cron), or keep running (--forever). Where mail and SMS go
    is printed on stderr first."""
    from rich.console import Console

    from marketing_cli import jobs, services
    from marketing_cli.cli.mail import transport_lines
    from marketing_cli.jobs.processes import pass_with_siblings, run_processes
    from marketing_cli.kernel import pacing
    from marketing_cli.services.sms import quiet_hours, revocation

    pacing.check_environment()  # a bad MKT_SEND_* / MKT_SMS_* value: exit 1 before any job runs
    jobs.check_environment()  # a bad MKT_JOB_WORKERS / MKT_JOB_WORKSPACE_SHARE: exit 1 here too
    quiet_hours.check_environment()  # an unreadable MKT_SMS_QUIET_HOURS table: exit 1 here, not in every job
    revocation.check_environment()  # an unreadable MKT_SMS_REVOCATION_PHRASES table: exit 1 here too
    from marketing_cli.services.delivery import record

    record.check_environment()  # MKT_SEND_GIVE_UP_HOURS, the lanes, lane rates and reply rules tables
    services.load_job_handlers()
    conn = state(ctx).conn()
    banner = Console(stderr=True, highlight=False)  # stderr: stdout stays the result (--json for cron)
    for line in transport_lines(conn):
        banner.print(line, markup=False, soft_wrap=True)
    lease = lease_seconds or jobs.DEFAULT_LEASE_SECONDS
    workers = workers or jobs.default_workers()
    share = min(workspace_share, workers) if workspace_share else jobs.default_share(workers)
    if processes > 1 and not workspace_share:  # the default share is the command's: split among its processes,
        share = max(1, share // processes)  # so a send's helper goes to another process than the send

    def run(conn: sqlite3.Connection, owner: str | None = None, schedule: bool = True) -> dict[str, int]:
        if forever:
            return jobs.run_forever(conn, owner, lease_seconds=lease, interval=interval, workers=workers, share=share)
        return jobs.run_pass(conn, owner, lease_seconds=lease, workers=workers, share=share, schedule=schedule)

    if processes == 1:
        result = run(conn)
    else:  # (jobs/processes.py) one campaign's send shared by the processes: at least N send jobs
        if not os.environ.get(jobs.WORKERS_ENV, "").strip():
            os.environ[jobs.WORKERS_ENV] = str(max(processes, jobs.send_workers(conn)))
        state(ctx).close()  # no connection crosses the fork: each child opens its own

        def child(owner: str) -> dict[str, int]:
            child_conn = state(ctx).conn()
            try:
                if forever:
                    return run(child_conn, owner)
                return pass_with_siblings(child_conn, owner, lambda first: run(child_conn, owner, first),
                                          min(interval, 0.5))
            finally:
                state(ctx).close()  # (the child ends with os._exit: no clean-up at exit closes it)

        result = run_processes(processes, child)
    emit(result, as_json, lambda r: f"{r['processed']} job(s) processed, {r['failed']} failed.")


@app.command("list")
def jobs_list(
    ctx: typer.Context,
    status: Annotated[Optional[str], typer.Option(help="Only jobs in this state: queued, running, done, failed.")] = None,
    job_type: Annotated[Optional[str], typer.Option("--type", help="Only jobs of this type, e.g. segment.count.")] = None,
    limit: Annotated[int, typer.Option(help="How many of the newest jobs (1-1000).")] = 50,
    as_json: JsonOption = False,
    wide: WideOption = False,
    quiet: QuietOption = False,
) -> None:
    """List the newest jobs in the queue."""
    from marketing_cli import jobs

    emit(jobs.list_jobs(state(ctx).conn(), status=status, job_type=job_type, limit=limit), as_json, lambda rows: table(
        ["id", "type", "workspace", "status", "attempts", "run at", "last error"],
        [(j["id"], j["type"], j["workspace_id"], j["status"], f"{j['attempts']}/{j['max_attempts']}",
          j["run_at"], j["last_error"] or "") for j in rows]), wide=wide, quiet=quiet)

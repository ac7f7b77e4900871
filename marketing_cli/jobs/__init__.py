"""The durable job queue: a `jobs` table in the database itself.

    enqueue  ->  queued  --claim-->  running (leased)  --complete-->  done
                   ^                    |  fail, attempts left: back to queued,
                   |                    |  run_at pushed back (exponential backoff)
                   +--------------------+  fail, no attempts left: failed
                   lease expired (the worker died): claimable again

A claim takes a lease (`lease_owner`, `lease_expires_at`) inside one BEGIN IMMEDIATE
transaction, so two workers (serve's threads and a `mkt jobs run` from cron) never run
the same job at once. A runner (serve's worker, `mkt jobs run`) runs jobs on several threads
(MKT_JOB_WORKERS, 4 by default), each workspace on at most its share of them (half), so one
workspace's slow jobs never hold up another's (pool.py). A worker that dies leaves its lease to expire; the job then runs
again, which is why every handler must be idempotent. `dedupe_key` keeps at most one
queued job per key (a second enqueue returns the queued one).

Handlers register with `@handler("type")` in the service module that owns the work: this
package names no service. The services package lists its modules with handlers
(`marketing_cli.services.JOB_MODULES`) and the faces that run jobs load them
(`services.load_job_handlers()`); modules named in the MKT_JOB_MODULES environment variable
(comma-separated) are loaded here as plugins. A runner claims only jobs of the types it
has a handler for, so a process that lacks one leaves those jobs to a runner that has it.
Schedulers (`@scheduler`) run at the start of a pass (`mkt jobs run`: every time; serve's
worker: at most every SCHEDULE_INTERVAL seconds) and enqueue periodic work (segment
recounts, pruning).

Hardening beyond the diagram:
- `dedupe_key` folds only into a QUEUED twin: a job asked for while its twin is running
  is queued anew, because the running one may have read the data before the change.
- A job whose lease expired after its last allowed attempt is marked failed (its worker
  died every time) instead of being reclaimed forever.
- MktError with a 4xx status is a permanent failure (the input is wrong; running it again
  cannot help): it fails at once, with the message recorded. Anything else is retried
  with exponential backoff (5 s, 10 s, 20 s ... capped at an hour) up to max_attempts.
- A lease is held by a live process: while a handler runs, a thread of the worker renews
  the lease every third of its length (leases.py), however long one step of the handler
  takes, so no job runs twice while its worker lives; a killed worker's job is claimable
  again within one lease (DEFAULT_LEASE_SECONDS). `heartbeat(conn)` tells a handler that
  lost its lease to stop; the lease is checked on complete/fail, so a worker that lost it
  never overwrites the new owner's result.
- Finished jobs are pruned: done after 7 days, failed after 30.
- A job that fails for good (no attempts left, a permanent error, or a worker that died on
  the last attempt) calls its type's `@gave_up` hook in the same transaction that marks it
  failed, so the work it stood for (a campaign in QUEUED or SENDING) never waits forever
  for a job that will not run again. A hook that raises is logged; the job stays failed.

The package's modules, each imported through this face (`from marketing_cli import jobs`;
`jobs.enqueue(...)`, `@jobs.handler(...)`), so a test's monkeypatch of `jobs.heartbeat` reaches
every service that calls it:

    registry.py   handlers, gave-up hooks and schedulers, registered by service modules
    queue.py      the jobs table: enqueue, claim, complete, fail, renew, list, prune
    context.py    the job a thread runs (Run, current_run, heartbeat) and send_workers
    runner.py     run_job, run_due, run_pass, run_forever and serve's Worker thread
    pool.py       a runner's worker threads and its dispatcher, fair across workspaces
    leases.py     the thread that renews a lease while its work runs (jobs and the import lock)
    processes.py  `mkt jobs run --processes N`: N forked runners from one command (all the cores)
"""

from __future__ import annotations

from marketing_cli.jobs.context import HELPERS_FROM, WORKERS_ENV, Run, current_run, heartbeat, send_workers
from marketing_cli.jobs.pool import JOB_WORKERS_ENV, SHARE_ENV, check_environment, default_share, default_workers
from marketing_cli.jobs.queue import (
    DEFAULT_LEASE_SECONDS,
    KEEP_DONE,
    KEEP_FAILED,
    LEASE_ENV,
    MAX_BACKOFF_SECONDS,
    SCHEDULE_INTERVAL,
    STATUSES,
    backoff_seconds,
    claim,
    complete,
    drop_queued,
    enqueue,
    fail,
    job_view,
    list_jobs,
    new_owner,
    prune_jobs,
    renew_lease,
)
from marketing_cli.jobs.registry import (
    GaveUp,
    Handler,
    _gave_up,
    _handlers,
    gave_up,
    handler,
    load_handlers,
    load_modules,
    scheduler,
)
from marketing_cli.jobs.runner import Worker, run_due, run_forever, run_job, run_pass, run_schedulers

__all__ = [
    "DEFAULT_LEASE_SECONDS", "HELPERS_FROM", "JOB_WORKERS_ENV", "KEEP_DONE", "KEEP_FAILED", "LEASE_ENV",
    "MAX_BACKOFF_SECONDS", "SCHEDULE_INTERVAL", "SHARE_ENV", "STATUSES", "WORKERS_ENV", "GaveUp", "Handler", "Run",
    "Worker", "_gave_up", "_handlers", "backoff_seconds", "check_environment", "claim", "complete", "current_run",
    "default_share", "default_workers", "drop_queued", "enqueue", "fail", "gave_up", "handler", "heartbeat",
    "job_view", "list_jobs", "load_handlers", "load_modules", "new_owner", "prune_jobs", "renew_lease", "run_due",
    "run_forever", "run_job", "run_pass", "run_schedulers", "scheduler", "send_workers",
]

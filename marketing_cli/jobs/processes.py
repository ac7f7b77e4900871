"""`mkt jobs run --processes N`: N runner processes from one command, so a machine's cores all
send (the worker threads of one process share its interpreter lock: one core at most).

    totals = run_processes(n, body)     # body(owner) -> {"processed": p, "failed": f}, in each child

The parent forks N children (POSIX fork: each child starts with the command's checks done and
its handlers loaded, and opens its own database connection in `body`; the parent holds none
across the fork), waits for them and adds up their totals. Each child is an ordinary runner
with an owner of its own: the children share the queue, and one campaign's send, through the
claim protocol every worker uses (leases on jobs, claim tokens on messages; CONTRACT section 7's
crash window is that of any worker: a child that dies leaves its leases to expire). SIGTERM
and SIGINT reaching the parent are passed on to every child (with --forever each finishes the
jobs it runs, then exits); the parent exits once all have. A child that fails (an exception,
a signal that killed it) makes the command fail after the others ended.

Without --forever a pass of one process ends once nothing is due and nothing runs in it; with
several, a child that finds nothing due while a sibling runs a job would end at once, and the
helpers that sibling's send then queues (MKT_SEND_WORKERS) would wait for the next pass. So a
child's pass (`pass_with_siblings`) looks again every `interval` seconds while any sibling
holds a live lease, and ends when none does: the command ends when the queue is idle for all.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable

from marketing_cli.errors import MktError
from marketing_cli.jobs.queue import new_owner
from marketing_cli.jobs.registry import load_handlers
from marketing_cli.kernel import clock

SIBLING_POLL = 0.1  # seconds: how often an idle child looks for its siblings' work (a send's helper)


def run_processes(count: int, body: Callable[[str], dict[str, int]]) -> dict[str, int]:
    """Run `body` in `count` forked children at once, each given its lease owner (the
    siblings' owners share a prefix: `sibling_prefix`); the sum of their results."""
    prefix = new_owner()
    children: dict[int, int] = {}  # pid -> the read end of its result pipe
    for number in range(count):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(lambda: body(f"{prefix}/p{number:02d}"), write)
        os.close(write)
        children[pid] = read

    def forward(signum: int, _frame: object) -> None:
        for pid in children:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGINT)}
    totals = {"processed": 0, "failed": 0}
    failures: list[str] = []
    try:
        for pid, read in children.items():
            with os.fdopen(read, "rb") as pipe:
                answer = pipe.read()  # (until the child exits: it writes once, at its end)
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            try:
                result = json.loads(answer) if answer else None
            except ValueError:
                result = None
            if code != 0 or not isinstance(result, dict) or "error" in result:
                reason = (result or {}).get("error") if isinstance(result, dict) else None
                failures.append(reason or (f"killed by signal {-code}" if code < 0 else f"exit status {code}"))
                continue
            for key in totals:
                totals[key] += int(result.get(key, 0))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if failures:
        raise MktError(500, f"{len(failures)} of {count} runner processes failed: {failures[0]}")
    return totals


def sibling_prefix(owner: str) -> str:
    """What the lease owners of a child's siblings (and its own) begin with."""
    return owner.rpartition("/p")[0] + "/p"


def siblings_busy(conn: sqlite3.Connection, owner: str) -> bool:
    """True while a job of this command's processes holds a live lease."""
    prefix = sibling_prefix(owner)
    return conn.execute(
        "SELECT 1 FROM jobs WHERE status = 'running' AND lease_expires_at >= ? AND substr(lease_owner, 1, ?) = ?"
        " LIMIT 1", (clock.format_ts(clock.utcnow()), len(prefix), prefix)).fetchone() is not None


def due_jobs(conn: sqlite3.Connection) -> bool:
    """True when a job this process has a handler for is queued and due (as queue.claim reads it)."""
    return conn.execute(
        "SELECT 1 FROM jobs WHERE status = 'queued' AND run_at <= ? AND type IN (SELECT value FROM json_each(?))"
        " LIMIT 1", (clock.format_ts(clock.utcnow()), json.dumps(sorted(load_handlers())))).fetchone() is not None


def pass_with_siblings(conn: sqlite3.Connection, owner: str, run_pass: Callable[[bool], dict[str, int]],
                       interval: float) -> dict[str, int]:
    """A child's pass without --forever: `run_pass(schedule)` again every `interval` seconds
    (SIBLING_POLL at most) while a sibling holds a live lease (it may queue work for this one:
    a send's helpers); the schedulers run in the first pass only.

    Nor does a child end while a job is due: between a sibling's job and the job it queued
    (the audience freeze, then its send) no lease is held for a moment, and a child that
    looked then would end and leave the send's helper to nobody. A due job that a pass does
    not take (twice in a row, with no sibling busy) ends it all the same."""
    totals = {"processed": 0, "failed": 0}
    first = True
    idle = 0  # passes in a row that took nothing while only a due job kept the child
    while True:
        result, first = run_pass(first), False
        for key, value in result.items():
            totals[key] = totals.get(key, 0) + value
        if not siblings_busy(conn, owner):
            idle = idle + 1 if not result.get("processed") and not result.get("failed") else 0
            if idle >= 2 or not due_jobs(conn):
                return totals
        time.sleep(min(interval, SIBLING_POLL))


def _child(body: Callable[[], dict[str, int]], write: int) -> None:
    """A child's whole life: the default signal dispositions (run_forever sets its own), `body`,
    its result on the pipe, and an exit that runs none of the parent's clean-up."""
    code = 0
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        answer: dict[str, object] = dict(body())
    except BaseException as exc:  # noqa: BLE001 - said to the parent, which fails the command
        message = exc.message if isinstance(exc, MktError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, (MktError, KeyboardInterrupt)):
            traceback.print_exc(file=sys.stderr)
        answer, code = {"error": message}, 1
    try:
        os.write(write, json.dumps(answer).encode("utf-8"))
        os.close(write)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)

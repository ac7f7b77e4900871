"""`mkt serve`: uvicorn over create_app, with the job worker in the app's lifespan."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from rich.console import Console

from marketing_cli.storage.db import connect

console = Console(stderr=True, highlight=False)


def _log_config() -> dict:
    """uvicorn's logging, with a UTC timestamp at the start of every line."""
    import copy
    import time

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["default"]["fmt"] = "%(asctime)s %(levelprefix)s %(message)s"
    config["formatters"]["access"]["fmt"] = (
        '%(asctime)s %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
    )
    for formatter in ("default", "access"):
        config["formatters"][formatter]["datefmt"] = "%Y-%m-%dT%H:%M:%SZ"
    # No log line carries an API key or a token (query strings included), whichever logger wrote it.
    config.setdefault("filters", {})["redact"] = {"()": "marketing_cli.api.limits.RedactSecrets"}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("redact")
    logging.Formatter.converter = time.gmtime  # UTC, as everywhere in mkt
    return config


def uvicorn_settings(*, max_connections: int, header_timeout: float,
                     shutdown_timeout: float | None = None) -> dict:
    """uvicorn's settings: one access line per request, the limits of api/limits.py, a graceful stop."""
    from marketing_cli.api import limits

    protocol = type("HttpProtocol", (limits.GuardedHttpToolsProtocol,), {"header_timeout": header_timeout})
    return {"log_level": "info", "access_log": True, "lifespan": "on", "log_config": _log_config(),
            "http": protocol, "limit_concurrency": max_connections, "backlog": limits.BACKLOG,
            "timeout_keep_alive": limits.KEEP_ALIVE_TIMEOUT, "timeout_graceful_shutdown": shutdown_timeout or limits.GRACEFUL_SHUTDOWN}


def raise_open_file_limit() -> int:
    """Raise this process's open-file soft limit to its hard limit (each connection holds one); returns it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def curl_line(base_url: str) -> str:
    """The request the banner suggests, on one line that fits 80 columns for the default address."""
    return f'curl -H "Authorization: Bearer $MKT_KEY" {base_url}/v1/workspace'


def banner_lines(db_path: Path, base_url: str, bootstrap: bool) -> list[str]:
    """What serve says before it listens: on a database without a workspace (and `bootstrap`),
    the one it makes, with its key once, as a line to paste (`export MKT_KEY=...`); otherwise
    which workspaces it serves. Lines, never a box: a box would cut the lines to paste."""
    from marketing_cli.services.account import workspaces

    conn = connect(db_path)
    try:
        created = workspaces.create_first_start_workspace(conn) if bootstrap else None
        rows = workspaces.list_workspaces(conn)
    finally:
        conn.close()
    if created is not None:
        ws = created["workspace"]
        return [f"mkt: first start. Workspace {ws['name']} (id {ws['id']}) created in {db_path};",
                "`mkt init --name NAME` names it. Its API key, shown once (copy it now):",
                "",
                f"  export MKT_KEY={created['api_key']}",
                f"  {curl_line(base_url)}",
                ""]
    if not rows:
        return [f"mkt: {db_path} holds no workspace yet: create one with `mkt init --name NAME`."]
    served = ", ".join(f"{w['name']} (id {w['id']})" for w in rows[:3]) + (", ..." if len(rows) > 3 else "")
    return [f"mkt: workspaces {served}. With the key `mkt init` printed (or a new one from `mkt keys create`):",
            "",
            "  export MKT_KEY='<your key>'",
            f"  {curl_line(base_url)}",
            ""]


def _banner(db_path: Path, base_url: str, bootstrap: bool) -> None:
    for line in banner_lines(db_path, base_url, bootstrap):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def run_server(db_path: Path, *, host: str, port: int, smtp_url: str | None, outbox: str | None,
               worker_interval: float, bootstrap: bool, max_connections: int, header_timeout: float,
               body_timeout: float, shutdown_timeout: float, lease_seconds: int = 30, workers: int | None = None,
               workspace_share: int | None = None) -> None:
    import uvicorn

    from marketing_cli.api.app import create_app
    from marketing_cli.storage.serving import check_servable

    check_servable(db_path)  # read-only or retired: one line and exit 1, before anything is logged
    if smtp_url:
        os.environ["MKT_SMTP_URL"] = smtp_url
    if outbox:
        os.environ["MKT_OUTBOX"] = outbox
    _banner(db_path, f"http://{host}:{port}", bootstrap)
    from marketing_cli.api.limits import RedactSecrets

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactSecrets())
    # Leave room for the database, the worker and the log beside the connections.
    max_connections = min(max_connections, raise_open_file_limit() - 64)
    app = create_app(db_path, worker=True, worker_interval=worker_interval, lease_seconds=lease_seconds,
                     body_timeout=body_timeout, workers=workers, workspace_share=workspace_share)
    console.print(f"mkt serving {db_path} on http://{host}:{port}/v1 (Ctrl+C to stop)")
    console.print(f"dashboard: http://{host}:{port}/ (sign in with an API key)")
    print_transports(db_path)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal it caught
    # with the previous handlers restored: these make that a clean exit with status 0.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_cleanly)
    _freeze_startup_objects()
    uvicorn.run(app, host=host, port=port, **uvicorn_settings(
        max_connections=max_connections, header_timeout=header_timeout, shutdown_timeout=shutdown_timeout))
    console.print("mkt serve stopped.")


def print_transports(db_path: Path) -> None:
    """Where mail and SMS go from this process (cli/mail.py), one line each, on stderr."""
    from marketing_cli.cli.mail import transport_lines

    conn = connect(db_path)
    try:
        for line in transport_lines(conn):
            console.print(line, markup=False)
    finally:
        conn.close()


def _freeze_startup_objects() -> None:
    """Keep the objects of start-up (modules, routes, the CLI: about 46,000) out of the garbage
    collector's full passes. Under load a full pass came about every ten seconds and held the event
    loop for 40-90 ms each time, visible in the 99th percentile of every request."""
    import gc

    gc.collect()
    gc.freeze()


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)

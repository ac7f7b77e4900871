"""The root `mkt` app: global options, `init`, `serve`, and one sub-app per resource.

Heavy modules (Starlette, uvicorn, phonenumbers, email-validator) are imported inside
the commands that need them, so `mkt --help` starts about as fast as a bare typer app.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from marketing_cli import __version__
from marketing_cli.cli.jobs import ShareOption, WorkersOption
from marketing_cli.cli.output import JsonOption, MktGroup, emit
from marketing_cli.cli.registry import SUBCOMMANDS
from marketing_cli.cli.state import state


class RootGroup(MktGroup):
    lazy = {name: (f"marketing_cli.cli.{module}", text) for module, name, text in SUBCOMMANDS}


app = typer.Typer(
    cls=RootGroup,
    name="mkt",
    help="Self-hosted email and SMS marketing: contacts, segments, campaigns and the /v1 HTTP API.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _flags_without_type() -> None:
    """Help shows no `<bool>` beside a flag (`--version`, `--help`, `--json`): a flag takes no value.

    typer 0.29 labels every option with its Python type in rich help, flags included.
    """
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_type()



def _version(value: bool) -> None:
    if value:
        typer.echo(f"mkt {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[Optional[str], typer.Option("--db", envvar="MKT_DB", metavar="PATH",
                                              help="SQLite database file (default: workspace.db in the user data dir), "
                                                   "or a postgresql:// URL.")] = None,
    workspace: Annotated[Optional[int], typer.Option("--workspace", envvar="MKT_WORKSPACE", metavar="ID",
                                                     help="Workspace to act on; optional when the database holds one.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Show the version and exit.")] = False,
) -> None:
    """Self-hosted email and SMS marketing: contacts, segments, campaigns and the /v1 HTTP API."""
    s = state(ctx)
    s.db_option = db
    s.workspace_option = workspace
    ctx.call_on_close(s.close)  # the command's connection ends with it (a PostgreSQL session too)


@app.command("init")
def init(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Workspace name (2-50 characters).")],
    as_json: JsonOption = False,
) -> None:
    """Create the database if missing, a workspace and its first API key (names serve's first-start workspace)."""
    from marketing_cli.services.account import workspaces
    from marketing_cli.storage.db import create_database_file, remove_created

    s = state(ctx)
    created = create_database_file(s.db_path)
    try:
        adopted = workspaces.first_start_workspace(s.conn())
        result = workspaces.init_workspace(s.conn(), name)
    except BaseException:
        # A failed init leaves no trace: the file it created goes (with its -wal and -shm, and
        # the folders made for it); an existing database is untouched (the write was rolled back).
        s.close()
        remove_created(created)
        raise

    emit(result, as_json, lambda value: init_report(s, value, adopted=adopted is not None, created=bool(created)))


def init_report(s: object, value: dict, *, adopted: bool, created: bool) -> object:
    """What `mkt init` made and where everything is: the database, the workspace, the key
    (once), the workspaces beside it and how commands pick one, the next steps."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    from marketing_cli.cli.state import remembered_workspace, settings_path
    from marketing_cli.services.account import workspaces

    ws = value["workspace"]
    db_path = s.db_path  # type: ignore[attr-defined]
    others = [w for w in workspaces.list_workspaces(s.conn()) if w["id"] != ws["id"]]  # type: ignore[attr-defined]
    how = ("named: it is the workspace `mkt serve` made on its first start (the key serve printed still works)"
           if adopted else "created")
    lines = [f"Workspace {ws['name']} (id {ws['id']}) {how}.",
             f"Database: {db_path}" + (" (created)" if created else "")]
    if others:
        default = remembered_workspace(db_path)
        lines.append(f"This database holds {len(others) + 1} workspaces. Commands without --workspace act on "
                     + (f"workspace {default} (`mkt workspace use`, in {settings_path()})." if default else
                        f"none of them until you run `mkt workspace use {ws['id']}` (or add --workspace ID)."))
    lines.append("Next: `mkt workspace show`; `mkt serve` serves the API with this key.")
    return Group(Text("\n".join(lines)),
                 Panel(value["api_key"], title="API key: copy it now, it is not shown again", expand=False))


@app.command("serve")
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    smtp_url: Annotated[Optional[str], typer.Option("--smtp-url", envvar="MKT_SMTP_URL",
                                                    help="Send mail through this SMTP server (smtp://HOST:PORT).")] = None,
    outbox: Annotated[Optional[str], typer.Option("--outbox", envvar="MKT_OUTBOX",
                                                  help="Folder for .eml files when no SMTP server is set.")] = None,
    geoip: Annotated[Optional[str], typer.Option("--geoip", envvar="MKT_GEOIP", metavar="PATH",
                                                 help="A MaxMind .mmdb country database for click countries.")] = None,
    worker_interval: Annotated[float, typer.Option(help="Seconds between two looks at the job queue when it is "
                                                        "empty.")] = 1.0,
    workers: WorkersOption = None,
    workspace_share: ShareOption = None,
    lease_seconds: Annotated[int, typer.Option(
        min=1, help="How long a job claimed by the worker is held without renewal before another worker may "
                    "take it over (renewed every third of it while this process lives).")] = 30,
    bootstrap: Annotated[bool, typer.Option(help="Create a first workspace and key when the database has none.")] = True,
    max_connections: Annotated[int, typer.Option(min=1, metavar="N",
                                                 help="Open connections before requests get 503.")] = 4096,
    header_timeout: Annotated[float, typer.Option(min=0.1, metavar="SECONDS",
                                                  help="Time a client has to send its request headers.")] = 10.0,
    body_timeout: Annotated[float, typer.Option(min=0.1, metavar="SECONDS",
                                                help="Time a client has to send a JSON body (imports: 10x).")] = 30.0,
    shutdown_timeout: Annotated[float, typer.Option(min=0.1, metavar="SECONDS",
                                                    help="Time in-flight requests get to finish on SIGTERM.")] = 5.0,
) -> None:
    """Serve the /v1 HTTP API (and run the background job worker) until SIGINT or SIGTERM."""
    import os

    from marketing_cli import jobs
    from marketing_cli.cli.serve import run_server
    from marketing_cli.kernel import pacing
    from marketing_cli.services.sms import quiet_hours, revocation

    pacing.check_environment()  # a bad MKT_SEND_* / MKT_SMS_* value: exit 1 before serving
    jobs.check_environment()  # a bad MKT_JOB_WORKERS / MKT_JOB_WORKSPACE_SHARE: exit 1 here too
    quiet_hours.check_environment()  # an unreadable MKT_SMS_QUIET_HOURS table: exit 1 here, not in every job
    revocation.check_environment()  # an unreadable MKT_SMS_REVOCATION_PHRASES table: exit 1 here too
    from marketing_cli.services.delivery import record

    record.check_environment()  # MKT_SEND_GIVE_UP_HOURS, the lanes, lane rates and reply rules tables
    if geoip:
        os.environ["MKT_GEOIP"] = geoip
    run_server(state(ctx).db_path, host=host, port=port, smtp_url=smtp_url, outbox=outbox,
               worker_interval=worker_interval, lease_seconds=lease_seconds, bootstrap=bootstrap,
               max_connections=max_connections, header_timeout=header_timeout, body_timeout=body_timeout,
               shutdown_timeout=shutdown_timeout, workers=workers, workspace_share=workspace_share)


def run() -> None:
    app(prog_name="mkt")

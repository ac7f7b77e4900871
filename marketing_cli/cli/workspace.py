"""`mkt workspace`: read and change the workspace (the twin of GET/PATCH /v1/workspace)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, pairs, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.services.account import workspaces

app = typer.Typer(help=HELP["workspace"], no_args_is_help=True)


def render_workspace(ws: dict[str, Any], settings: dict[str, Any] | None = None) -> Any:
    shown = {
        "id": ws["id"],
        "name": ws["name"],
        "conversion tracking": ws["conversion_tracking"],
        "interaction tracking": ws["interaction_tracking"],
        "approved": ws["is_approved"],
        "suspended": ws["is_suspended"],
        "time zone": ws.get("timezone", "UTC"),
        "created": ws["created_at"],
    }
    if settings:
        shown.update({
            "SMS markup": settings["sms_markup"],
            "contacts without email": "allowed" if settings["allow_contacts_without_email"] else "not allowed",
            "SMS sender ID": settings["sms_sender_id"] or "(none)",
            "tracking URL": settings["tracking_url"],
        })
    return pairs(shown, title="Workspace")


def render_billing(billing: dict[str, Any]) -> Any:
    from rich.console import Group

    sub = billing["subscription"]
    parts: list[Any] = []
    if sub is None:
        parts.append("No active subscription.")
    else:
        parts.append(pairs({
            "plan": f"{sub['plan_name']} (id {sub['plan_id']})",
            "status": sub["status"],
            "period start": sub["current_period_start"],
            "next invoice": f"${sub['next_invoice_total']:.2f}",
        }, title="Subscription"))
        if sub["addons"]:
            parts.append(table(["add-on", "price", "quantity"],
                               [(a["name"], f"${a['price']:.2f}", a["quantity"]) for a in sub["addons"]]))
    parts.append(table(["resource", "used", "allowed"],
                       [(r["name"], r["used"], r["allowed"]) for r in billing["resources"]], title="Usage"))
    return Group(*parts)


@app.command("show")
def workspace_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the workspace, its billing and usage (GET /v1/workspace)."""
    s = state(ctx)
    workspace_id = s.workspace_id()
    info = workspaces.get_workspace_info(s.conn(), workspace_id)
    if as_json:
        emit(info, True)
        return
    from rich.console import Group

    settings = workspaces.get_operator_settings(s.conn(), workspace_id)
    emit(info, False, lambda v: Group(render_workspace(v["workspace"], settings), render_billing(v["billing"])))


@app.command("list")
def workspace_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
                   quiet: QuietOption = False) -> None:
    """List the workspaces in the database (the default one, `mkt workspace use`, marked)."""
    from marketing_cli.cli.state import remembered_workspace

    s = state(ctx)
    default = remembered_workspace(s.db_path)
    emit(workspaces.list_workspaces(s.conn()), as_json, lambda rows: table(
        ["id", "name", "default", "created"],
        [(w["id"], w["name"], "yes" if w["id"] == default else "", w["created_at"]) for w in rows]),
         wide=wide, quiet=quiet)


@app.command("use")
def workspace_use(
    ctx: typer.Context,
    workspace_id: Annotated[Optional[int], typer.Argument(
        metavar="ID", help="The workspace later commands act on (see `mkt workspace list`).")] = None,
    forget: Annotated[bool, typer.Option("--forget", help="Forget the default workspace of this database.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Remember the workspace that commands without --workspace act on, for this database."""
    from marketing_cli.cli.output import usage_error
    from marketing_cli.cli.state import remember_workspace

    s = state(ctx)
    if forget == (workspace_id is not None):
        raise usage_error("Give a workspace ID, or --forget.")
    if forget:
        path = remember_workspace(s.db_path, None)
        emit(None, as_json, lambda _: f"No default workspace for {s.db_path} any more (settings: {path}).")
        return
    ws = workspaces.get_workspace_info(s.conn(), workspace_id)["workspace"]  # 404 when it does not exist
    path = remember_workspace(s.db_path, ws["id"])
    emit(ws, as_json, lambda w: f"Commands on {s.db_path} now act on workspace {w['id']} ({w['name']}) unless "
                                f"given --workspace (remembered in {path}).")


@app.command("update")
def workspace_update(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Option(help="New name (2-50 characters).")] = None,
    conversion_tracking: Annotated[Optional[bool], typer.Option(
        "--conversion-tracking/--no-conversion-tracking", help="Track conversions (plan must include it).")] = None,
    interaction_tracking: Annotated[Optional[bool], typer.Option(
        "--interaction-tracking/--no-interaction-tracking", help="Track opens and clicks.")] = None,
    sms_markup: Annotated[Optional[str], typer.Option(
        "--sms-markup", metavar="FACTOR", help="Multiply list SMS prices by FACTOR for this workspace (operator).")] = None,
    allow_contacts_without_email: Annotated[Optional[bool], typer.Option(
        "--allow-contacts-without-email/--require-email",
        help="Whether contacts may have a phone number and no email address (operator).")] = None,
    tracking_url: Annotated[Optional[str], typer.Option(
        "--tracking-url", metavar="URL",
        help="Base URL of tracking, unsubscribe and webhook links (operator; default MKT_PUBLIC_URL, "
             "else http://127.0.0.1:8000).")] = None,
    timezone: Annotated[Optional[str], typer.Option(
        "--timezone", metavar="ZONE",
        help="The workspace's time zone, an IANA name such as Europe/Paris (default UTC): times typed without "
             "an offset are read in it, and contacts whose zone is unknown get it.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Change workspace settings; options left out keep their values."""
    s = state(ctx)
    changes = {k: v for k, v in {"name": name, "conversion_tracking": conversion_tracking,
                                  "interaction_tracking": interaction_tracking,
                                  "timezone": timezone}.items() if v is not None}
    workspace_id = s.workspace_id()
    result = workspaces.update_operator_settings(
        s.conn(), workspace_id, sms_markup=sms_markup,
        allow_contacts_without_email=allow_contacts_without_email, tracking_url=tracking_url, changes=changes)
    emit(result, as_json, lambda ws: render_workspace(ws, workspaces.get_operator_settings(s.conn(), workspace_id)))


@app.command("breakers")
def workspace_breakers(
    ctx: typer.Context,
    complaints: Annotated[Optional[str], typer.Option(
        "--complaints", metavar="PCT", help="Pause a campaign when complaints reach PCT % of its last deliveries "
                                            "(default 0.3).")] = None,
    unknown_users: Annotated[Optional[str], typer.Option(
        "--unknown-users", metavar="PCT", help="Pause it when unknown users reach PCT % (default 5).")] = None,
    blocks: Annotated[Optional[str], typer.Option(
        "--blocks", metavar="PCT", help="Pause it when blocks (policy, reputation, authentication) reach PCT % "
                                        "(default 10).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show or change the circuit breakers' thresholds (operator only: no endpoint changes them;
    docs/deliverability.md "Circuit breakers")."""
    from marketing_cli.services.delivery import breakers

    s = state(ctx)
    emit(breakers.configure(s.conn(), s.workspace_id(), complaints=complaints, unknown_users=unknown_users,
                            blocks=blocks), as_json,
         lambda v: pairs({"complaints": f"{v['complaints']}%", "unknown users": f"{v['unknown_users']}%",
                          "blocks": f"{v['blocks']}%",
                          "window": f"the last {v['window']:,} deliveries, at least {v['min_deliveries']:,}"},
                         title="Circuit breakers"))

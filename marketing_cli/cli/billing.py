"""`mkt billing`: plans, allowances and add-ons (operator only)."""

from __future__ import annotations

from typing import Annotated

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.cli.workspace import render_billing
from marketing_cli.errors import MktError
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.services.account import billing

app = typer.Typer(help=HELP["billing"], no_args_is_help=True)
plan_app = typer.Typer(help="The workspace's plan.", no_args_is_help=True)
allowance_app = typer.Typer(help="Override what the plan allows.", no_args_is_help=True)
addon_app = typer.Typer(help="Add-ons of the subscription.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")
app.add_typer(allowance_app, name="allowance")
app.add_typer(addon_app, name="addon")


@app.command("show")
def billing_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the subscription and live usage against allowances."""
    s = state(ctx)
    emit(billing.get_billing(s.conn(), s.workspace_id()), as_json, render_billing)


@plan_app.command("list")
def plan_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
              quiet: QuietOption = False) -> None:
    """List the plan catalog with each plan's allowances."""
    plans = billing.list_plans(state(ctx).conn())
    emit(plans, as_json, lambda rows: table(
        ["id", "plan", "price", "conversion tracking", *billing.RESOURCES],
        [(p["id"], p["name"], f"${p['price']:.2f}", p["conversion_tracking"],
          *(p["allowances"][r] for r in billing.RESOURCES)) for p in rows]), wide=wide, quiet=quiet)


@plan_app.command("set")
def plan_set(
    ctx: typer.Context,
    plan: Annotated[str, typer.Argument(metavar="PLAN", help="A plan of the catalog (free, pro).")],
    as_json: JsonOption = False,
) -> None:
    """Move the workspace to PLAN."""
    s = state(ctx)
    emit(billing.set_plan(s.conn(), s.workspace_id(), plan), as_json, render_billing)


@allowance_app.command("set")
def allowance_set(
    ctx: typer.Context,
    resource: Annotated[str, typer.Argument(metavar="RESOURCE", help=f"One of: {', '.join(billing.RESOURCES)}.")],
    allowed: Annotated[str, typer.Argument(metavar="N", help="The new allowance, or 'plan' to drop the override.")],
    as_json: JsonOption = False,
) -> None:
    """Override one allowance of the workspace's plan."""
    if allowed.lower() == "plan":
        value = None
    elif parse_digits(allowed) is not None:
        value = parse_digits(allowed)
    else:
        raise MktError(400, f"'{allowed}' is not an allowance: give a whole number of 0 or more, or 'plan'.")
    s = state(ctx)
    emit(billing.set_allowance(s.conn(), s.workspace_id(), resource, value), as_json, render_billing)


@addon_app.command("list")
def addon_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
               quiet: QuietOption = False) -> None:
    """List the add-on catalog."""
    emit(billing.list_addons(state(ctx).conn()), as_json, lambda rows: table(
        ["id", "add-on", "price", "raises"],
        [(a["id"], a["name"], f"${a['price']:.2f}", f"{a['resource']} +{a['amount']}" if a["resource"] else "")
         for a in rows]), wide=wide, quiet=quiet)


@addon_app.command("set")
def addon_set(
    ctx: typer.Context,
    addon: Annotated[str, typer.Argument(metavar="ADDON", help="An add-on of the catalog.")],
    quantity: Annotated[int, typer.Argument(metavar="QUANTITY", help="Units to carry (0 removes the add-on).")],
    as_json: JsonOption = False,
) -> None:
    """Set how many units of ADDON the subscription carries."""
    s = state(ctx)
    emit(billing.set_addon(s.conn(), s.workspace_id(), addon, quantity), as_json, render_billing)

"""`mkt rates`: the SMS price list (the twin of GET /v1/sms-rates; setting prices is operator only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.services.account import rates

app = typer.Typer(help=HELP["rates"], no_args_is_help=True)


def _render(value: dict) -> object:
    return table(["country", f"price per segment ({value['currency']})"],
                 [(r["country_code"], r["price_per_segment"] or "no rate published") for r in value["rates"]])


@app.command("list")
def rates_list(
    ctx: typer.Context,
    public: Annotated[bool, typer.Option("--public", help="List prices at the default markup, as without a key.")] = False,
    as_json: JsonOption = False,
    wide: WideOption = False,
    quiet: QuietOption = False,
) -> None:
    """Show SMS prices per segment: the workspace's (its markup), or --public list prices."""
    s = state(ctx)
    emit(rates.list_rates(s.conn(), None if public else s.workspace_id()), as_json, _render, wide=wide, quiet=quiet)


@app.command("set")
def rates_set(
    ctx: typer.Context,
    country: Annotated[str, typer.Argument(metavar="COUNTRY", help="ISO 3166-1 alpha-2 code, e.g. US.")],
    price: Annotated[str, typer.Argument(metavar="PRICE", help="Base USD per segment (at most 5 decimals), or 'none'.")],
    as_json: JsonOption = False,
) -> None:
    """Set the base (list) price per segment for COUNTRY; 'none' publishes no rate."""
    emit(rates.set_rate(state(ctx).conn(), country, price), as_json,
         lambda r: f"{r['country_code']}: {r['price_per_segment'] or 'no rate published'}")


@app.command("remove")
def rates_remove(
    ctx: typer.Context,
    country: Annotated[str, typer.Argument(metavar="COUNTRY", help="ISO 3166-1 alpha-2 code.")],
    as_json: JsonOption = False,
) -> None:
    """Take COUNTRY off the list: SMS to it is no longer enabled."""
    emit(rates.remove_rate(state(ctx).conn(), country), as_json, lambda r: f"{r['country_code']} removed.")


@app.command("import")
def rates_import(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(metavar="FILE.csv", help="CSV with columns country_code and price.")],
    as_json: JsonOption = False,
) -> None:
    """Set many base prices from a CSV file, all or nothing."""
    emit(rates.import_rates(state(ctx).conn(), file), as_json, lambda r: f"{r['imported']} rates imported.")

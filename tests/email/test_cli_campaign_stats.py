"""`mkt campaigns stats ID`: registered on a campaigns app the way cli/campaigns.py does it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from marketing_cli.cli import campaign_stats as cli_stats
from marketing_cli.cli.output import MktGroup
from marketing_cli.cli.state import state
from marketing_cli.services.email import stats
from tests import factories


@pytest.fixture
def mkt(db_path: Any) -> Any:
    """A root app like cli/main.py's with a campaigns group that register() filled."""
    root = typer.Typer(cls=MktGroup, no_args_is_help=True)
    campaigns = typer.Typer(no_args_is_help=True)
    cli_stats.register(campaigns)
    root.add_typer(campaigns, name="campaigns")

    @root.callback()
    def main(ctx: typer.Context) -> None:
        """The throwaway root (MKT_DB points at db_path); its connection closes with the command."""
        ctx.call_on_close(state(ctx).close)

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(root, list(args), catch_exceptions=False)

    return invoke


@pytest.fixture
def campaign(conn: Any, workspace: dict) -> dict[str, Any]:
    ws = workspace["id"]
    campaign = factories.email_campaign(conn, ws, "Spring", "AB_TESTING")
    a = factories.email_recipients(conn, ws, campaign, ["a1@gmail.com", "a2@gmail.com", "a3@hotmail.com",
                                                        "a4@yahoo.com"])
    b = factories.email_recipients(conn, ws, campaign, ["b1@gmail.com", "b2@icloud.com"], "B")
    [link] = stats.register_links(conn, campaign["id"], campaign["variants"]["A"], ["https://shop.example/sale"]).values()
    for message in a + b:
        stats.record_delivery(conn, message)
    stats.record_open(conn, a[0])
    stats.record_open(conn, a[1])
    stats.record_open(conn, b[0])
    stats.record_click(conn, a[0], link, "desktop", "Windows", "FR")
    stats.record_click(conn, a[1], link, "mobile", "iOS", "US")
    stats.record_bounce(conn, a[3], "hard")
    return campaign


def test_json_is_the_api_data(mkt: Any, conn: Any, workspace: dict, campaign: dict) -> None:
    result = mkt("campaigns", "stats", campaign["id"], "--json")
    assert result.exit_code == 0, result.output
    from marketing_cli.services.estimates import views

    assert json.loads(result.stdout) == views.email_statistics(conn, workspace["id"], campaign["id"])


def test_people_see_rates_bars_breakdowns_links_and_variants(mkt: Any, campaign: dict) -> None:
    result = mkt("campaigns", "stats", campaign["id"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("Campaign statistics", "Delivered", "6", "Opened", "50.0%", "Clicked", "33.3%", "Bounced", "16.7%",
                 "Clicks by country", "FR", "Clicks by device", "desktop", "Clicks by operating system", "iOS",
                 "Deliveries by provider", "Gmail", "Outlook", "Links", "https://shop.example/sale",
                 "Variants", campaign["variants"]["A"], campaign["variants"]["B"], "2 (50.0%)", "1 (50.0%)"):
        assert text in out, text
    assert "━" in out  # the bars


def test_a_new_campaign_shows_zeros_without_dividing_by_zero(mkt: Any, conn: Any, workspace: dict) -> None:
    fresh = factories.email_campaign(conn, workspace["id"], "Fresh")
    result = mkt("campaigns", "stats", fresh["id"])
    assert result.exit_code == 0, result.output
    assert "Delivered" in result.stdout and "Variants" not in result.stdout and "-" in result.stdout


def test_errors_go_to_stderr_with_exit_1(mkt: Any, workspace: dict) -> None:
    result = mkt("campaigns", "stats", "nope")
    assert result.exit_code == 1
    assert result.stderr.strip() == "We could not find the campaign you are looking for."
    result = mkt("campaigns", "stats", " ")
    assert (result.exit_code, result.stderr.strip()) == (1, "Please provide a campaign ID.")


def test_help_is_the_docstring(mkt: Any) -> None:
    result = mkt("campaigns", "stats", "--help")
    assert result.exit_code == 0 and "Show an email campaign's statistics" in result.stdout

"""Every `list` and `show` command fits an 80-column terminal without cutting an id or a date.

The commands are discovered from the typer app (as test_docs.py does), so a new `list` or
`show` command is checked here too: it must be given its arguments in `ARGS`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from marketing_cli.cli import output
from marketing_cli.cli.listing import Listing
from marketing_cli.cli.main import app
from tests import factories

WIDTH = 80
LONG = "Quarterly newsletter for returning customers, northern region"
_ID = re.compile(r"^[0-9a-f]{24}$")
_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI's consoles built anew at COLUMNS=80 (they read COLUMNS once, when first made)."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    output._consoles.cache_clear()
    yield
    output._consoles.cache_clear()


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    """A workspace with realistic data: 24-hex ids, long names, RFC 3339 dates."""
    from marketing_cli.services.account import billing, keys
    from marketing_cli.services.contacts import fields
    from marketing_cli.services.email import campaigns, variant_html

    ws = workspace["id"]
    billing.set_plan(conn, ws, "pro")
    factories.allow_domains(conn, ws)
    keys.create_key(conn, ws, "Deployment key for the production web shop")
    fields.create_field(conn, ws, {"label": "Preferred store location name", "merge_tag": "preferred_store",
                                   "type": "DROPDOWN_SINGLE",
                                   "definition": "Amsterdam Centraal,Rotterdam Zuid,Utrecht Overvecht"})
    factories.field(conn, ws, "membership_level", label="Loyalty programme tier name")
    vip = factories.tag(conn, ws, "VIP customers from the spring campaign")
    for n in range(3):
        factories.contact(conn, ws, f"customer.number.{n}@a-rather-long-domain-name.example.com", tags=[vip])
    segment = factories.segment(conn, ws, LONG, {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [vip]}]})
    domain = factories.domain(conn, ws, "newsletters.a-rather-long-domain-name.example.com")
    sender = factories.sender(conn, ws, domain["id"], local_part="customer-service-team",
                              display_name="The customer service team of the web shop")
    factories.verify(conn, ws, domain["id"])  # the automation below sends from it
    campaign = factories.campaign(conn, ws, LONG, "AB_TESTING")
    campaigns.configure_campaign(conn, ws, campaign["id"], {
        "sender": {"sender_identity_id": sender["id"]},
        "audience": {"type": "SEGMENTS", "include_segment_ids": [segment["id"]]},
        "variants": [{"type": "A", "subject": "Our biggest autumn sale starts today, come and see",
                      "preview_text": "Everything in the store at half price until Sunday evening"},
                     {"type": "B", "subject": "Half price on everything, this week only",
                      "preview_text": "The autumn sale is here"}]})
    variant_html.set_variant_html(conn, ws, campaign["id"], "A", {"html": "<p>Hello</p>"})
    factories.campaign(conn, ws, "Spring", "SINGLE_VARIANT")
    template = factories.code_template(conn, ws, "<p>Hi</p>", name=LONG)
    factories.sms_ready(conn, ws)
    sms = factories.sms_campaign(conn, ws, LONG)
    series = factories.series_row(conn, ws, campaign["id"])
    flow = factories.automation(conn, ws, {"name": LONG, "triggers": [{"type": "manual"}], "steps": [
        factories.email_step("welcome-email-for-new-customers", sender["id"])]})
    found = {"series": series, "campaign": campaign["id"], "domain": domain["id"], "segment": segment["id"],
             "sender": sender["id"], "template": template["id"], "sms": sms["id"], "automation": flow["id"]}
    return {k: str(v) for k, v in found.items()}


def walk(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's path, as test_docs.py walks them (the root loads its groups lazily)."""
    if not hasattr(command, "list_commands"):
        return [path]
    return [found for name in command.list_commands(None) for found in walk(command.get_command(None, name),
                                                                              (*path, name))]


# Arguments of the commands that need them, from the world above.
ARGS = {
    ("automations", "show"): lambda w: [w["automation"]],
    ("campaigns", "show"): lambda w: [w["campaign"]],
    ("campaigns", "series", "show"): lambda w: [w["series"]],
    ("campaigns", "html", "show"): lambda w: [w["campaign"], "A"],
    ("domains", "show"): lambda w: [w["domain"]],
    ("segments", "show"): lambda w: [w["segment"]],
    ("senders", "show"): lambda w: [w["sender"]],
    ("sms", "show"): lambda w: [w["sms"]],
    ("templates", "show"): lambda w: [w["template"]],
}


def list_and_show() -> list[tuple[str, ...]]:
    return [path for path in walk(typer.main.get_command(app)) if path[-1] in ("list", "show")]


def listed() -> list[tuple[str, ...]]:
    return [path for path in list_and_show() if path[-1] == "list"]


def run(runner: Any, db_path: Path, *args: str) -> str:
    result = runner.invoke(app, ["--db", str(db_path), *args], catch_exceptions=False, env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def strings(value: Any) -> Iterator[tuple[str, str]]:
    """(key, text) for every scalar in a JSON value (not inside a job's free-form payload)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "payload":
                continue
            if isinstance(v, (dict, list)):
                yield from strings(v)
            elif v is not None:
                yield k, str(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def shown_ids(path: tuple[str, ...], data: Any) -> set[str]:
    """The ids a person copies from the output: each listed row's `id` and `*_id` members, and
    every 24-hex id in what a `show` command shows (a campaign's variants, a segment's ids)."""
    if path[-1] == "list":
        return {str(v) for row in _rows(data) for k, v in row.items()
                if (k == "id" or k.endswith("_id")) and v is not None and not isinstance(v, (dict, list))}
    found = {v for _, v in strings(data) if _ID.match(v)}
    if isinstance(data, dict) and "id" in data:
        found.add(str(data["id"]))
    return found


def test_discovery_finds_the_commands() -> None:
    found = {" ".join(p) for p in list_and_show()}
    assert {"campaigns list", "fields list", "keys list", "sms show", "workspace show"} <= found
    assert len(listed()) >= 15


@pytest.mark.parametrize("path", list_and_show(), ids=" ".join)
def test_fits_80_columns_and_keeps_ids_and_dates_whole(path: tuple[str, ...], world: dict[str, Any], runner: Any,
                                                         db_path: Path, narrow: None) -> None:
    args = [*path, *ARGS.get(path, lambda w: [])(world)]
    data = json.loads(run(runner, db_path, *args, "--json"))
    human = run(runner, db_path, *args)

    if path == ("campaigns", "html", "show"):  # the stored document as it is, for a file or a pipe
        assert human == data["body_html"] + "\n"
        return
    too_long = [line for line in human.splitlines() if len(line) > WIDTH]
    assert too_long == [], human
    scalars = list(strings(data))
    ids = shown_ids(path, data)
    missing = [i for i in ids if not re.search(rf"(?<![0-9a-f]){re.escape(i)}(?![0-9a-f])", human)]
    assert missing == [], human
    prefixes = {v for k, v in scalars if k == "prefix"}  # `keys list` shows a key's prefix as `mkt_ab12…`
    text = human
    for prefix in prefixes:
        text = text.replace(prefix + "…", "")
    assert not re.search(r"[0-9a-f]{6,}…", text), human  # no id cut short
    assert not re.search(r"\d{4}-\d\d-\d\d[T ]?[\d:]*…", text), human  # no date cut short
    for day in re.finditer(r"\d{4}-\d\d-\d\d", human):  # a timestamp keeps its day and time
        assert re.match(r"T\d\d:\d\d:\d\d| \d\d:\d\d(?![:\d])", human[day.end():]), human


def test_long_headers_and_merge_tags_stay_whole(world: dict[str, Any], runner: Any, db_path: Path,
                                                narrow: None) -> None:
    human = run(runner, db_path, "fields", "list")
    assert "preferred_store" in human and "membership_level" in human
    assert "merge tag" in human
    for header in re.findall(r"┃([^┃\n]+)", human):
        assert "…" not in header


def test_narrow_campaigns_list_says_what_it_hid(world: dict[str, Any], runner: Any, db_path: Path,
                                                narrow: None) -> None:
    human = " ".join(run(runner, db_path, "campaigns", "list").split())  # the note wraps at the width
    assert "Hidden to fit the terminal:" in human and "--wide shows every column" in human


@pytest.mark.parametrize("path", listed(), ids=" ".join)
def test_wide_shows_every_column_whole(path: tuple[str, ...], world: dict[str, Any], runner: Any, db_path: Path,
                                       narrow: None) -> None:
    human = run(runner, db_path, *path, "--wide")
    assert "Hidden to fit the terminal" not in human
    assert "…" not in human.replace("…\n", "").replace("… ", "") or path == ("keys", "list")
    # full timestamps, not the short form (a scheduled time for people names its zone: `... 09:00 UTC`)
    assert not re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d(?! [A-Z])", human)


def test_wide_campaigns_list_exceeds_the_terminal_rather_than_hide(world: dict[str, Any], runner: Any,
                                                                    db_path: Path, narrow: None) -> None:
    human = run(runner, db_path, "campaigns", "list", "--wide")
    header = next(line for line in human.splitlines() if line.startswith("┃"))
    assert all(h in header for h in ("id", "name", "type", "status", "sender", "variants", "created"))
    assert LONG in human
    assert max(len(line) for line in human.splitlines()) > WIDTH


def _rows(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return data
    return next(v for v in data.values() if isinstance(v, list))


@pytest.mark.parametrize("path", listed(), ids=" ".join)
def test_quiet_prints_only_the_ids(path: tuple[str, ...], world: dict[str, Any], runner: Any,
                                   db_path: Path) -> None:
    data = json.loads(run(runner, db_path, *path, "--json"))
    rows = _rows(data)
    expected = [str(r["id"] if "id" in r else next(iter(r.values()))) for r in rows]
    assert run(runner, db_path, *path, "-q") == "".join(e + "\n" for e in expected)
    assert run(runner, db_path, *path, "--quiet") == "".join(e + "\n" for e in expected)


def test_quiet_ids_feed_the_next_command(world: dict[str, Any], runner: Any, db_path: Path) -> None:
    ids = run(runner, db_path, "campaigns", "list", "-q").split()
    assert world["campaign"] in ids and all(_ID.match(i) for i in ids)
    shown = json.loads(run(runner, db_path, "campaigns", "show", ids[-1], "--json"))
    assert shown["id"] == ids[-1]


def test_json_is_unchanged_by_wide_and_quiet(world: dict[str, Any], runner: Any, db_path: Path) -> None:
    plain = run(runner, db_path, "campaigns", "list", "--json")
    assert run(runner, db_path, "campaigns", "list", "--json", "--wide") == plain
    assert run(runner, db_path, "campaigns", "list", "--json", "-q") == plain


def test_listing_fits_by_shortening_dates_first() -> None:
    from rich.console import Console

    listing = Listing(["id", "name", "created"], [("6b06de4b0a1b2c3d4e5f6a7b", "Spring", "2026-11-25T14:12:32.123Z")])
    console = Console(width=60, highlight=False, record=True)
    console.print(listing)
    shown = console.export_text()
    assert "2026-11-25 14:12" in shown and "6b06de4b0a1b2c3d4e5f6a7b" in shown
    console = Console(width=120, highlight=False, record=True)
    console.print(listing)
    assert "2026-11-25T14:12:32.123Z" in console.export_text()


def test_campaign_stats_variants_fit_80_columns(conn: Any, workspace: dict[str, Any], runner: Any, db_path: Path,
                                               narrow: None) -> None:
    from marketing_cli.services.email import stats

    ws = workspace["id"]
    campaign = factories.email_campaign(conn, ws, LONG, "AB_TESTING")
    messages = [*factories.email_recipients(conn, ws, campaign, [f"a{n}@gmail.com" for n in range(12)]),
                *factories.email_recipients(conn, ws, campaign, [f"b{n}@gmail.com" for n in range(11)], "B")]
    for message in messages:
        stats.record_delivery(conn, message)
    stats.record_open(conn, messages[0])
    human = run(runner, db_path, "campaigns", "stats", campaign["id"])
    assert [line for line in human.splitlines() if len(line) > WIDTH] == [], human
    assert campaign["variants"]["A"] in human and campaign["variants"]["B"] in human
    # side by side: a column per variant, a row per number, nothing cut or hidden
    header = next(line for line in human.splitlines() if "A *" in line)
    assert header.split()[1:4] == ["A", "*", "B"]
    for number in ("delivered", "opened", "clicked", "bounced", "unsubscribed", "complained"):
        assert any(line.split()[1:2] == [number] for line in human.splitlines()), number
    assert "…" not in human


def test_every_abbreviation_is_documented() -> None:
    from marketing_cli.cli.listing import ABBREVIATIONS

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text().split())
    missing = [f"`{short}` {full}" for full, short in ABBREVIATIONS.items() if f"`{short}` {full}" not in text]
    assert missing == []


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    root = typer.main.get_command(app)

    def find(command: Any, path: tuple[str, ...]) -> Any:
        for name in path:
            command = command.get_command(None, name)
        return command

    return [(path, find(root, path)) for path in walk(root)]


def test_a_command_offers_wide_exactly_when_it_accepts_it() -> None:
    """The typer app walked: a command whose callback hands `wide` to `emit` has the `--wide`
    option, and one with the option hands it on (else the option does nothing). The tables of
    every other command name a wider terminal (the next test), so no command prints a hint it
    then refuses with `No such option: --wide`."""
    import inspect

    checked = 0
    for path, command in _commands():
        source = inspect.getsource(command.callback)
        passes = "emit(" in source and re.search(r"\bwide=wide\b", source) is not None
        has = any("--wide" in p.opts for p in command.params)
        assert passes == has, (path, "passes wide to emit" if passes else "has --wide")
        checked += has
    assert checked >= 15  # the walk reached the list commands


def test_a_table_names_wide_only_for_a_command_that_offers_it(capsys: pytest.CaptureFixture[str],
                                                              narrow: None) -> None:
    wide_rows = [("64a1f0c2b3d4e5f6a7b8c9d0", LONG, LONG, LONG, "2026-11-28T10:00:00Z")]
    columns = ["id", "name", "description", "notes", "created"]
    output.emit([], False, lambda _: output.table(columns, wide_rows))  # a command without --wide
    without = capsys.readouterr().out
    assert "Hidden to fit the terminal" in without and "a wider terminal shows every column" in without
    assert "--wide" not in without
    output.emit([], False, lambda _: output.table(columns, wide_rows), wide=False)  # with it, not given
    assert "--wide shows every column" in capsys.readouterr().out

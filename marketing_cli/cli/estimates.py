"""How the CLI shows a campaign's `estimate` (services/estimates): the table of groups every
preview prints before scheduling, the one-line summary of `schedule`, `show`, `watch` and
`stats`, and the next release ("next: 10:00 local time in Europe/London at 19:09 UTC, 312
recipients"). Every face reads the same estimate, so these lines agree with the API's numbers.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.cli.output import table

WORDS = {"now": "now", "waiting": "waiting for local time", "held": "held by quiet hours", "skipped": "skipped",
         "over_cap": "over a cap"}


def _time(until: str | None) -> str:
    from marketing_cli.cli.times import when_cell

    return when_cell(until) if until else "-"


def _money(cost: str | None) -> str:
    from marketing_cli.kernel.money import cents

    return "" if cost is None else f"${cents(cost)}"


def estimate_table(est: dict[str, Any], title: str | None = None) -> Any:
    """The groups: state, recipients, when (UTC), why, and the cost where there is one."""
    priced = est["cost"] is not None
    headers = ["state", "recipients", "when", "why"] + (["cost"] if priced else [])
    rows = [(WORDS[g["state"]], f"{g['recipients']:,}", _time(g["until"]) if g["state"] != "skipped" else "never",
             g["reason"] or "", *([_money(g["cost"])] if priced else [])) for g in est["groups"]]
    return table(headers, rows, title=title or summary(est))


def summary(est: dict[str, Any]) -> str:
    """`526 will get the message ($125.41): 312 now, 172 held by quiet hours, 42 waiting for local
    time; 14 skipped.`"""
    totals: dict[str, int] = {}
    for group in est["groups"]:
        totals[group["state"]] = totals.get(group["state"], 0) + group["recipients"]
    cost = f" ({_money(est['cost'])})" if est["cost"] is not None else ""
    head = f"{est['recipients']:,} will get the message{cost}"
    going = [f"{totals[s]:,} {WORDS[s]}" for s in ("now", "waiting", "held", "over_cap") if totals.get(s)]
    text = head + (": " + ", ".join(going) if going and list(totals) != ["now"] else "")
    if totals.get("skipped"):
        text += f"; {totals['skipped']:,} skipped"
    return text + "."


def next_line(est: dict[str, Any]) -> str | None:
    """`next: 10:00 local time in Europe/London at 2026-12-01 19:09 UTC, 312 recipients`, or None."""
    from marketing_cli.services.estimates.groups import next_release

    upcoming = next_release(est)
    if upcoming is None:
        return None
    what = upcoming["reason"] or WORDS[upcoming["state"]]
    count = upcoming["recipients"]
    return f"next: {what} at {_time(upcoming['until'])}, {count:,} recipient{'' if count == 1 else 's'}"


def cell(est: dict[str, Any] | None) -> str:
    """A list's column: `2,240: 1,156 waiting` (the scheduled column beside it has the next
    release), or `-` when nothing is to come."""
    if not est or not est["groups"]:
        return "-"
    later = [f"{sum(g['recipients'] for g in est['groups'] if g['state'] == s):,} {s.replace('_', ' ')}"
             for s in ("waiting", "held", "over_cap") if any(g["state"] == s for g in est["groups"])]
    return f"{est['recipients']:,}" + (": " + ", ".join(later) if later else "")


def estimate_lines(est: dict[str, Any] | None) -> str | None:
    """The summary and the next release on one line each (None: nothing to come)."""
    if not est or not est["groups"]:
        return None
    following = next_line(est)
    return summary(est) + (f"\n{following}" if following else "")

"""`mkt domains`: sending domains and their DNS records (the twin of /v1/domains).

`mark-verified` is the one command without an endpoint twin: an operator's act (CLI only).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["domains"], no_args_is_help=True)

DomainId = Annotated[str, typer.Argument(metavar="ID", help="The domain's id (see `mkt domains list`).")]


def _mark(flag: bool) -> str:
    return "yes" if flag else "no"


def records_table(domain: dict[str, Any]) -> Any:
    """One row per record to publish, with its flags (values follow the table, unwrapped)."""
    from rich.table import Table

    t = Table(title=f"DNS records for {domain['domain_name']}", header_style="bold")
    for column in ("#", "type", "host", "mandatory", "verified"):
        t.add_column(column, overflow="fold")
    for i, record in enumerate(domain["dns_records"], 1):
        t.add_row(str(i), record["type"], record["host"], _mark(record["mandatory"]), _mark(record["verified"]))
    return t


def _line(text: str) -> Any:
    from rich.text import Text

    return Text(text, overflow="fold")


def record_values(domain: dict[str, Any], checks: list[dict[str, Any]] | None) -> list[Any]:
    lines = []
    for i, record in enumerate(domain["dns_records"], 1):
        value = record["value"] if "priority" not in record else f"{record['priority']} {record['value']}"
        lines += [_line(""), _line(f"{i}. {record['type']} {record['host']}"), _line(f"   publish: {value}")]
        if checks is not None:
            check = checks[i - 1]
            if check["error"]:
                lines.append(_line(f"   found:   (lookup failed: {check['error']})"))
            else:
                lines += [_line(f"   found:   {found}") for found in check["found"]] or [_line("   found:   nothing")]
    return lines


def _state(domain: dict[str, Any]) -> str:
    if domain["verified_by"] == "operator":
        return (f"[green]verified by operator[/green] (without DNS; `mkt domains mark-verified {domain['id']} --undo` "
                "takes the mark back)")
    if domain["verified"]:
        return "[green]verified[/green]"
    line = f"[yellow]not verified[/yellow]: publish the mandatory records, then `mkt domains verify {domain['id']}`"
    if domain["reserved_name"]:
        line += f"; for a staging setup, `mkt domains mark-verified {domain['id']}` (operator, without DNS)"
    return line


def reserved_warning(domain: dict[str, Any]) -> str | None:
    """What a person must know about a reserved name (`.test`, `.localhost`, `example.com` ...)."""
    if not domain["reserved_name"]:
        return None
    return (f"[bold yellow]{domain['domain_name']} is a reserved name[/bold yellow]: no one can publish its DNS "
            "records, so mail from it can never be delivered publicly. Use it for a staging setup against a local "
            "SMTP catcher (README: \"Try a real send locally\").")


def render_domain(domain: dict[str, Any], checks: list[dict[str, Any]] | None = None) -> Any:
    from rich.console import Group

    head = f"Domain {domain['id']}: [bold]{domain['domain_name']}[/bold] (code {domain['domain_code']}), {_state(domain)}"
    warning = reserved_warning(domain)
    hint = _line(f"\n(Long values fold at the terminal's edge: `mkt domains show {domain['id']} --json` prints each "
                 "on one line.)")
    return Group(head, *([warning] if warning else []), records_table(domain), *record_values(domain, checks), hint)


def _verified_column(domain: dict[str, Any]) -> str:
    return "by operator" if domain["verified_by"] == "operator" else _mark(domain["verified"])


def render_list(rows: list[dict[str, Any]]) -> Any:
    from marketing_cli.cli.output import table

    return table(["id", "domain", "code", "verified", "records verified"],
                 [(d["id"], d["domain_name"], d["domain_code"], _verified_column(d),
                   f"{sum(r['verified'] for r in d['dns_records'])}/{len(d['dns_records'])}") for d in rows])


@app.command("add")
def domains_add(
    ctx: typer.Context,
    domain: Annotated[str, typer.Argument(metavar="DOMAIN", help="The domain to send from, e.g. example.com.")],
    as_json: JsonOption = False,
) -> None:
    """Add a sending domain: generates its DKIM key and the DNS records to publish."""
    from marketing_cli.services.email import domains

    s = state(ctx)
    emit(domains.add_domain(s.conn(), s.workspace_id(), domain), as_json, render_domain)


@app.command("list")
def domains_list(ctx: typer.Context, as_json: JsonOption = False, wide: WideOption = False,
                 quiet: QuietOption = False) -> None:
    """List the workspace's sending domains (GET /v1/domains)."""
    from marketing_cli.services.email import domains

    s = state(ctx)
    emit(domains.list_domains(s.conn(), s.workspace_id()), as_json, render_list, wide=wide, quiet=quiet)


@app.command("show")
def domains_show(ctx: typer.Context, domain_id: DomainId, as_json: JsonOption = False) -> None:
    """Show a domain and the DNS records to publish (GET /v1/domains/:id)."""
    from marketing_cli.services.email import domains

    s = state(ctx)
    emit(domains.get_domain(s.conn(), s.workspace_id(), domain_id), as_json, render_domain)


@app.command("verify")
def domains_verify(ctx: typer.Context, domain_id: DomainId, as_json: JsonOption = False) -> None:
    """Look the domain's records up in DNS and store what was found (exit 0 also when some are missing)."""
    from marketing_cli.services.email import domains

    s = state(ctx)
    report = domains.verify_domain_report(s.conn(), s.workspace_id(), domain_id)
    emit(report["domain"], as_json, lambda domain: render_domain(domain, report["checks"]))


def render_compliance(rows: list[dict[str, Any]]) -> Any:
    from marketing_cli.cli.output import table

    return table(["rule", "status", "found", "fix"], [(r["rule"], r["status"], r["found"], r["fix"] or "") for r in rows],
                 title="Sender requirements (a fail refuses scheduling)")


@app.command("check")
def domains_check(ctx: typer.Context, domain_id: DomainId, as_json: JsonOption = False) -> None:
    """Check the domain against the mailbox providers' sender rules (GET /v1/domains/:id/compliance)."""
    from marketing_cli.services.delivery import compliance

    s = state(ctx)
    emit(compliance.check_domain(s.conn(), s.workspace_id(), domain_id), as_json, render_compliance)


@app.command("mark-verified")
def domains_mark_verified(
    ctx: typer.Context,
    domain_id: DomainId,
    undo: Annotated[bool, typer.Option(
        "--undo", help="Take the mark back: the domain is verified again only if DNS found its records.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Mark a domain verified without DNS, e.g. a .test staging domain (operator only; logged)."""
    from marketing_cli.services.email import domains

    s = state(ctx)
    emit(domains.mark_domain_verified(s.conn(), s.workspace_id(), domain_id, undo=undo), as_json, render_domain)


warmup_app = typer.Typer(help="Warm a sending domain up: daily caps per provider lane (docs/deliverability.md "
                              "\"Warm-up\").", no_args_is_help=True)
app.add_typer(warmup_app, name="warmup")


def render_warmup(w: dict[str, Any]) -> Any:
    from rich.console import Group

    from marketing_cli.cli.output import table

    if w["status"] == "none":
        return f"{w['domain_name']}: no warm-up (`mkt domains warmup start {w['domain_id']}` starts one)."
    head = {"active": f"day {w['day']} of {w['days']}", "stopped": f"stopped at {w['stopped_at']}",
            "finished": f"finished on {w['ends_on']}"}[w["status"]]
    lines: list[Any] = [f"{w['domain_name']}: warm-up {head} (started {w['started_at']}, schedule {w['origin']})"]
    if w["status"] == "active":
        lines.append(table(["lane", "cap today", "sent today", "left"],
                           [(r["lane"], "no cap" if r["cap"] is None else f"{r['cap']:,}", f"{r['used']:,}",
                             "" if r["left"] is None else f"{r['left']:,}") for r in w["today"]],
                           title="Today (UTC)"))
    return Group(*lines)


@warmup_app.command("start")
def warmup_start(
    ctx: typer.Context,
    domain_id: DomainId,
    schedule: Annotated[str | None, typer.Option(
        "--schedule", metavar="FILE",
        help="A CSV schedule with the header day,lane,cap (day 1 is today, UTC; a lane missing from a day has no "
             "cap that day). Default: the shipped schedule (MKT_WARMUP_SCHEDULE names an operator's copy).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Start (or start again) the domain's warm-up (POST /v1/domains/:id/warmup)."""
    from marketing_cli.services.delivery import warmup

    s = state(ctx)
    plan = warmup.schedule_from_file(schedule) if schedule else None
    emit(warmup.start_warmup(s.conn(), s.workspace_id(), domain_id, plan), as_json, render_warmup)


@warmup_app.command("status")
def warmup_status(ctx: typer.Context, domain_id: DomainId, as_json: JsonOption = False) -> None:
    """Show the domain's warm-up: today's cap per lane and what went out (GET /v1/domains/:id/warmup)."""
    from marketing_cli.services.delivery import warmup

    s = state(ctx)
    emit(warmup.warmup_status(s.conn(), s.workspace_id(), domain_id), as_json, render_warmup)


@warmup_app.command("stop")
def warmup_stop(ctx: typer.Context, domain_id: DomainId, as_json: JsonOption = False) -> None:
    """Stop the domain's warm-up: its caps are lifted (DELETE /v1/domains/:id/warmup)."""
    from marketing_cli.services.delivery import warmup

    s = state(ctx)
    emit(warmup.stop_warmup(s.conn(), s.workspace_id(), domain_id), as_json, render_warmup)


delete_command(app, DomainId, "marketing_cli.services.deletion.sending:remove_domain",
               'Delete domain {id} with its DNS records and its senders?',
               'Delete a sending domain with its DNS records and sender identities (DELETE /v1/domains/:id).')

"""`mkt sms`: SMS campaigns (the twin of /v1/sms-campaigns), quotes, review, the outbox,
and the operator's prepaid balance and sender ID (CLI only: no API key can change them)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli import sms_quiet_hours, sms_replies, sms_stats
from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.local_time import AtOption, LocalTimeOption, MissedOption, YesOption
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, json_option, pairs, table, usage_error
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.errors import MktError
from marketing_cli.kernel.money import cents

app = typer.Typer(help=HELP["sms"], no_args_is_help=True)
balance_app = typer.Typer(help="The prepaid SMS balance (a ledger of top-ups, charges and refunds).",
                          no_args_is_help=True)
sender_app = typer.Typer(help="The workspace's SMS sender ID.", no_args_is_help=True)
app.add_typer(balance_app, name="balance")
app.add_typer(sender_app, name="sender-id")
provider_app = typer.Typer(help="Where the workspace's SMS messages go: the outbox or Twilio (operator only).",
                           no_args_is_help=True)
app.add_typer(provider_app, name="provider")

CampaignId = Annotated[str, typer.Argument(help="The campaign's id (24 hex characters).")]


def _stats_line(s: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in s.items())


def render_campaign(c: dict[str, Any]) -> Any:
    import json

    from marketing_cli.cli.estimates import estimate_lines
    from marketing_cli.cli.times import when_line

    return pairs({
        "id": c["id"], "name": c["name"], "status": c["status"],
        **({"status_detail": c["status_detail"]} if c.get("status_detail") else {}), "message": c["message"],
        "audience": json.dumps(c["audience"]), "scheduled": when_line(c["scheduled_at"], "not scheduled"),
        "statistics": _stats_line(c["statistics"]),
        **({"held by quiet hours": f"{c['quiet_hours']['held']:,} (the first until {c['quiet_hours']['next_release_at']})"}
           if c.get("quiet_hours", {}).get("held") else {}),
        **({"to come": estimate_lines(c["estimate"]) or "nothing"} if c.get("estimate") is not None else {}),
        "created_at": c["created_at"], "updated_at": c["updated_at"],
    }, title=f"SMS campaign {c['id']}")


@app.command("create")
def sms_create(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The campaign's name (1-255 characters).")],
               as_json: JsonOption = False) -> None:
    """Create an SMS campaign in DRAFT (POST /v1/sms-campaigns)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    emit(views.sms_create(s.conn(), s.workspace_id(), {"name": name}), as_json, render_campaign)


@app.command("list")
def sms_list(
    ctx: typer.Context,
    page: Annotated[int, typer.Option(help="Page number, from 1.")] = 1,
    limit: Annotated[int, typer.Option(help="Campaigns per page (1-100).")] = 50,
    status: Annotated[str | None, typer.Option(help="DRAFT, QUEUED, COMPLETED, CANCELLED or ARCHIVED.")] = None,
    as_json: JsonOption = False,
    wide: WideOption = False,
    quiet: QuietOption = False,
) -> None:
    """List SMS campaigns, newest first, with what is still to come (GET /v1/sms-campaigns)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    result = views.sms_campaigns(s.conn(), s.workspace_id(), page=page, limit=limit, status=status)

    def human(r: dict[str, Any]) -> Any:
        p = r["pagination"]
        from marketing_cli.cli.estimates import cell
        from marketing_cli.cli.times import when_cell

        return table(["id", "name", "status", "scheduled", "to come", "sent", "suppressed", "created_at"],
                     [(c["id"], c["name"], c["status"], when_cell(c["scheduled_at"]), cell(c.get("estimate")),
                       c["statistics"]["sent"], c["statistics"]["suppressed"], c["created_at"])
                      for c in r["campaigns"]],
                     title=f"Page {p['current_page']} of {p['total_pages']} ({p['total_count']} campaigns)")

    emit(result, as_json, human, wide=wide, quiet=quiet)


@app.command("show")
def sms_show(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Show an SMS campaign and what will happen to its recipients (GET /v1/sms-campaigns/:id)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    emit(views.sms_campaign(s.conn(), s.workspace_id(), campaign_id), as_json, render_campaign)


@app.command("update")
def sms_update(
    ctx: typer.Context,
    campaign_id: CampaignId,
    name: Annotated[str | None, typer.Option(help="A new name.")] = None,
    message: Annotated[str | None, typer.Option(help="The SMS text; merge tags as in email: {{contact.<merge_tag>}}, {{contact.<merge_tag>|fallback}}, {{workspace.name}} (no link tags).")] = None,
    audience: Annotated[str | None, typer.Option(
        help="Audience JSON (an object or an array of them): inline, - for stdin, or @FILE.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Change a DRAFT campaign's name, message or audience (PATCH /v1/sms-campaigns/:id)."""
    from marketing_cli.services.estimates import views

    body: dict[str, Any] = {}
    if name is not None:
        body["name"] = name
    if message is not None:
        body["message"] = message
    if audience is not None:
        body["audience"] = json_option(audience, "--audience")
    if not body:
        raise usage_error("Give at least one of --name, --message and --audience.")
    s = state(ctx)
    emit(views.sms_update(s.conn(), s.workspace_id(), campaign_id, body), as_json, render_campaign)


def _warn_without_opt_out(s: Any, campaign_id: str) -> None:
    """On stderr, before the campaign is queued: the message has no opt-out wording."""
    from marketing_cli.services.sms import campaigns, review

    try:
        message = campaigns.get_campaign(s.conn(), s.workspace_id(), campaign_id).get("message")
    except MktError:
        return  # the schedule call below answers the error
    warning = review.opt_out_warning(message)
    if warning:
        typer.echo(warning, err=True)


@app.command("schedule")
def sms_schedule(
    ctx: typer.Context,
    campaign_id: CampaignId,
    now: Annotated[bool, typer.Option("--now", help="Send as soon as the job queue runs.")] = False,
    at: AtOption = None,
    local_time: LocalTimeOption = None,
    missed: MissedOption = None,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Queue a DRAFT campaign, now or later (POST /v1/sms-campaigns/:id/schedule)."""
    from marketing_cli.cli.local_time import confirm_zones, schedule_body, understood
    from marketing_cli.services.estimates import views
    from marketing_cli.services.sms import schedule

    if now == (at is not None):
        raise usage_error("Give exactly one of --now and --at TIME.")
    s = state(ctx)
    conn, workspace_id = s.conn(), s.workspace_id()
    body = schedule_body(conn, workspace_id, now, at, local_time, missed)
    if not as_json:
        print_reach(s, campaign_id)
        _warn_without_opt_out(s, campaign_id)
    if local_time is not None:
        confirm_zones(lambda: views.sms_schedule_preview(conn, workspace_id, campaign_id, body), yes)
    emit(schedule.schedule_campaign(conn, workspace_id, campaign_id, body), as_json,
         lambda r: understood(r, views.sms_estimate(conn, workspace_id, r["id"])) + ("" if r.get("scheduled_at") or r.get("local_time") else
                                    " Run `mkt jobs run` (or `mkt serve`) to send it."))


@app.command("cancel")
def sms_cancel(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Cancel a QUEUED campaign; messages never handed to a provider are refunded."""
    from marketing_cli.services.sms import campaigns

    s = state(ctx)
    emit(campaigns.cancel_campaign(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda r: f"Campaign {r['id']} cancelled; refunded ${r['refunded']} for {r['refunded_messages']:,} messages")


def print_reach(s: Any, campaign_id: str) -> None:
    """Before `schedule` queues anything: who will get the message and who will be skipped, why."""
    from marketing_cli.services.sms import reach

    try:
        found = reach.campaign_reach(s.conn(), s.workspace_id(), campaign_id)
    except MktError:
        return  # schedule itself gives the message (not found, no audience ...)
    typer.echo(reach.reach_line(found))


@app.command("reach")
def sms_reach(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Who the campaign reaches now, and who it skips and why (GET /v1/sms-campaigns/:id/reach)."""
    from marketing_cli.services.sms import reach

    s = state(ctx)

    def human(r: dict[str, Any]) -> Any:
        from rich.console import Group
        from rich.text import Text

        rows = [(reach.WHY[why], r["skipped"][why]) for why in reach.REASONS if r["skipped"][why]]
        parts: list[Any] = [Text(reach.reach_line(r))]
        if rows:
            parts.append(table(["skipped because", "contacts"], rows))
        return Group(*parts)

    emit(reach.campaign_reach(s.conn(), s.workspace_id(), campaign_id), as_json, human)


@app.command("unschedule")
def sms_unschedule(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Return a QUEUED campaign to DRAFT before it starts sending (POST /v1/sms-campaigns/:id/unschedule)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    emit(views.sms_unschedule(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda r: f"Campaign {r['id']} is a DRAFT again: change it, then `mkt sms schedule {r['id']}`.")


@app.command("duplicate")
def sms_duplicate(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Copy a campaign as a new DRAFT, "Copy of NAME" (POST /v1/sms-campaigns/:id/duplicate)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    emit(views.sms_duplicate(s.conn(), s.workspace_id(), campaign_id), as_json, render_campaign)


@app.command("archive")
def sms_archive(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Archive a DRAFT, COMPLETED or CANCELLED campaign."""
    from marketing_cli.services.sms import campaigns

    s = state(ctx)
    emit(campaigns.archive_campaign(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda r: f"Campaign {r['id']} archived")


@app.command("quote")
def sms_quote(
    ctx: typer.Context,
    message: Annotated[str, typer.Argument(help="The SMS text.")],
    to: Annotated[str | None, typer.Option("--to", help="A recipient's number, for the price: +14155550100, or as contacts take it "
                                                  "((415) 200-0001 in the phone field's default region).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Encoding, segments and price of a message (POST /v1/sms/quote)."""
    from marketing_cli.services.sms import schedule

    s = state(ctx)
    body: dict[str, Any] = {"message": message}
    if to is not None:
        body["to"] = to
    result = schedule.quote_message(s.conn(), s.workspace_id(), body)

    def human(q: dict[str, Any]) -> Any:
        shown = {"encoding": q["encoding"], "characters": q["characters"], "units": q["units"],
                 "segments": q["segments"]}
        if q["ucs2_characters"]:
            shown["UCS-2 because of"] = " ".join(q["ucs2_characters"])
        if q["to"]:
            shown["to"] = f"{q['to']} ({q['country']})"
            if q["sendable"]:
                shown["price"] = f"${q['price']} ({q['segments']} x ${q['price_per_segment']})"
            else:
                shown["price"] = q["note"]
        return pairs(shown, title="SMS quote")

    emit(result, as_json, human)


@app.command("review")
def sms_review(
    ctx: typer.Context,
    message: Annotated[str, typer.Argument(help="The SMS text.")],
    not_first: Annotated[bool, typer.Option("--not-first", help="Not the first message to its numbers "
                                                                 "(opt-out wording not required).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Run the automated review on a message: score and the rules that fired (no network)."""
    from marketing_cli.services.sms.review import review_message

    def human(r: dict[str, Any]) -> Any:
        verdict = "FLAGGED" if r["flagged"] else "passes"
        return table(["rule", "score", "detail"], [(x["rule"], x["score"], x["detail"]) for x in r["rules"]],
                     title=f"Score {r['score']} (flagged at {r['threshold']}): {verdict}")

    emit(review_message(message, first_message=not not_first), as_json, human)


@app.command("outbox")
def sms_outbox(
    ctx: typer.Context,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign's messages.")] = None,
    limit: Annotated[int, typer.Option(help="How many, newest first (1-1000).")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Messages the outbox provider took (the default SMS provider)."""
    from marketing_cli.services.sms.providers import list_outbox

    s = state(ctx)
    emit(list_outbox(s.conn(), s.workspace_id(), campaign_id=campaign, limit=limit), as_json,
         lambda rows: table(["id", "to", "from", "segments", "body", "created_at"],
                            [(r["id"], r["to"], r["from"], r["segments"], r["body"], r["created_at"]) for r in rows]))


@balance_app.command("add")
def balance_add(
    ctx: typer.Context,
    amount: Annotated[str, typer.Argument(help="USD to credit, e.g. 25 or 25.50.")],
    reason: Annotated[str | None, typer.Option(help="A note for the ledger.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Credit the prepaid SMS balance (operator only; a ledger top-up)."""
    from marketing_cli.services.sms import ledger as sms_ledger

    s = state(ctx)
    emit(sms_ledger.add_balance(s.conn(), s.workspace_id(), amount, reason), as_json,
         lambda r: f"SMS balance: ${cents(r['balance'])}")


@balance_app.command("show")
def balance_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the prepaid SMS balance."""
    from marketing_cli.services.sms import ledger as sms_ledger

    s = state(ctx)
    emit(sms_ledger.show_balance(s.conn(), s.workspace_id()), as_json,
         lambda r: f"SMS balance: ${cents(r['balance'])}")


@balance_app.command("history")
def balance_history(
    ctx: typer.Context,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign's entries.")] = None,
    limit: Annotated[int, typer.Option(help="How many entries, newest first.")] = 100,
    as_json: JsonOption = False,
) -> None:
    """The SMS ledger: top-ups, charges and refunds, with the balance after each."""
    from marketing_cli.services.sms import ledger as sms_ledger

    s = state(ctx)
    emit(sms_ledger.ledger_history(s.conn(), s.workspace_id(), campaign_id=campaign, limit=limit), as_json,
         lambda rows: table(["id", "kind", "amount", "balance after", "campaign", "reason", "created_at"],
                            [(r["id"], r["kind"], cents(r["amount"]), cents(r["balance_after"]),
                              r["campaign_id"], r["reason"],
                              r["created_at"]) for r in rows]))


@sender_app.command("set")
def sender_set(ctx: typer.Context,
               value: Annotated[str, typer.Argument(help="1-11 letters, digits or spaces, or an E.164 number.")],
               as_json: JsonOption = False) -> None:
    """Set the workspace's SMS sender ID (operator only)."""
    from marketing_cli.services.sms import ledger as sms_ledger

    s = state(ctx)
    emit(sms_ledger.set_sender_id(s.conn(), s.workspace_id(), value), as_json,
         lambda r: f"SMS sender ID: {r['sms_sender_id']}")


@sender_app.command("show")
def sender_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the workspace's SMS sender ID."""
    from marketing_cli.services.sms import ledger as sms_ledger

    s = state(ctx)
    emit(sms_ledger.get_sender_id(s.conn(), s.workspace_id()), as_json,
         lambda r: f"SMS sender ID: {r['sms_sender_id'] or '(none)'}")


def _render_provider(r: dict[str, Any]) -> Any:
    if r["provider"] == "outbox":
        return "SMS provider: outbox (messages land in `mkt sms outbox`)"
    return pairs({"provider": r["provider"], "account_sid": r["account_sid"], "base_url": r["base_url"]},
                 title="SMS provider")


@provider_app.command("set")
def provider_set(
    ctx: typer.Context,
    provider: Annotated[str, typer.Argument(help="outbox or twilio.")],
    account_sid: Annotated[str | None, typer.Option("--account-sid", help="The Twilio account SID (AC...).")] = None,
    auth_token: Annotated[str | None, typer.Option("--auth-token", help="The Twilio auth token (never shown).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url",
                                                 help="Twilio's API base URL (default https://api.twilio.com).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Choose the workspace's SMS provider (operator only)."""
    from marketing_cli.services.sms import providers

    s = state(ctx)
    emit(providers.set_provider(s.conn(), s.workspace_id(), provider, account_sid=account_sid,
                                    auth_token=auth_token, base_url=base_url), as_json, _render_provider)


@provider_app.command("show")
def provider_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the workspace's SMS provider, account SID and base URL (never the token)."""
    from marketing_cli.services.sms import providers

    s = state(ctx)
    emit(providers.show_provider(s.conn(), s.workspace_id()), as_json, _render_provider)


@app.command("messages")
def sms_messages_cmd(
    ctx: typer.Context,
    campaign_id: CampaignId,
    status: Annotated[str | None, typer.Option(help="pending, held, sending, sent, delivered, undelivered, failed "
                                                    "or suppressed.")] = None,
    page: Annotated[int, typer.Option(help="Page number, from 1.")] = 1,
    limit: Annotated[int, typer.Option(help="Messages per page (1-100).")] = 50,
    as_json: JsonOption = False,
) -> None:
    """A campaign's messages and their states (GET /v1/sms-campaigns/:id/messages)."""
    from marketing_cli.services.sms import messages as sms_messages

    s = state(ctx)
    result = sms_messages.list_messages(s.conn(), s.workspace_id(), campaign_id, status=status, page=page, limit=limit)
    emit(result, as_json, lambda r: table(
        ["id", "phone", "status", "segments", "price", "provider ref", "error", "held until", "held because"],
        [(m["id"], m["phone"], m["status"], m["segments"], m["price"], m["provider_ref"],
          f"{m['error_code']} {m['error_message'] or ''}".strip() if m["error_code"] else "",
          m["held_until"] or "", m["held_reason"] or "") for m in r["messages"]]))


sms_stats.register(app)
sms_quiet_hours.register(app)
sms_replies.register(app)


delete_command(app, CampaignId, "marketing_cli.services.deletion.campaigns:remove_sms_campaign",
               'Delete SMS campaign {id} and its messages?',
               'Delete an SMS campaign; a completed one once archived (DELETE /v1/sms-campaigns/:id).')

"""`mkt campaigns`: email campaigns (the twin of /v1/campaigns)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.audience import ExcludeSegments, ExcludeTags, IncludeSegments, IncludeTags, audience_object
from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, json_option, pairs, table, usage_error
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["campaigns"], no_args_is_help=True)
html_app = typer.Typer(help="Set and show a variant's HTML.", no_args_is_help=True)
app.add_typer(html_app, name="html")

CampaignId = Annotated[str, typer.Argument(metavar="ID", help="The campaign's id (see `mkt campaigns list`).")]
VariantType = Annotated[str, typer.Argument(metavar="VARIANT", help="A or B.")]


def _address(part: dict[str, Any] | None) -> str:
    if not part:
        return ""
    mail = f"{part['local_part']}@{part['domain_name']}"
    return f"{part['display_name']} <{mail}>" if part.get("display_name") else mail


def _audience(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return ""
    described = []
    for e in entries:
        text = e["type"]
        for key in ("include_tag_ids", "include_segment_ids", "exclude_tag_ids", "exclude_segment_ids"):
            if e.get(key):
                text += f" {key.removesuffix('_ids').replace('_', ' ')} {', '.join(map(str, e[key]))}"
        described.append(text)
    return "; ".join(described)


def _status(c: dict[str, Any]) -> str:
    """A live series' definition is a DRAFT with its next occurrence: say it is scheduled."""
    return "DRAFT (series)" if c["status"] == "DRAFT" and c.get("scheduled_at") else c["status"]


def render_campaign(c: dict[str, Any]) -> Any:
    from rich.console import Group

    head = {"id": c["id"], "name": c["name"], "type": c["type"]}
    if "status" in c:
        head["status"] = _status(c)
    if c.get("status_detail"):
        head["status detail"] = c["status_detail"]
    if "scheduled_at" in c:
        from marketing_cli.cli.times import when_line

        head["scheduled"] = when_line(c["scheduled_at"], "not scheduled")
    head.update({"sender": _address(c["sender_identity"]), "reply-to": _address(c["reply_to"]),
                 "audience": _audience(c["audience"])})
    if c.get("progress"):
        from marketing_cli.cli.campaign_sending import progress_line

        head["progress"] = progress_line(c)
    if c.get("estimate") is not None:
        from marketing_cli.cli.estimates import estimate_lines

        head["to come"] = estimate_lines(c["estimate"]) or "nothing"
    if c.get("held_back"):  # a provider lane's push-back (services/delivery/lane_view.py)
        head["held back"] = "\n".join(item["line"] for item in c["held_back"])
    ab = c.get("ab_test")
    if ab:
        head["A/B test"] = (f"{ab['test_percentage']}% test, winner by {ab['winner_criterion'].lower()} "
                            f"after {ab['wait_minutes']} min")
        if ab.get("winner"):
            rates = ", ".join(f"{k} {v:.1%}" for k, v in ab["rates"].items())
            head["A/B winner"] = f"{ab['winner']} ({rates}; decided {ab['decided_at']})"
    variants = table(["variant", "id", "subject", "preview text", "template", "preview"],
                     [(v["type"], v["id"], v["subject"], v["preview_text"], v["template_type"], v["preview_url"])
                      for v in c["variants"]], hint=f"`mkt campaigns show {c['id']} --json`")
    return Group(pairs(head, title="Campaign"), variants)


@app.command("create")
def campaigns_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Campaign name (1-255 characters).")],
    campaign_type: Annotated[str, typer.Option("--type", help="SINGLE_VARIANT or AB_TESTING.")] = "SINGLE_VARIANT",
    as_json: JsonOption = False,
) -> None:
    """Create an email campaign in DRAFT with its empty variant(s) (POST /v1/campaigns)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    emit(views.email_create(s.conn(), s.workspace_id(), {"name": name, "type": campaign_type}), as_json,
         render_campaign)


@app.command("list")
def campaigns_list(
    ctx: typer.Context,
    page: Annotated[int, typer.Option(help="Page number, from 1.")] = 1,
    limit: Annotated[int, typer.Option(help="Campaigns per page (1-100).")] = 50,
    status: Annotated[Optional[str], typer.Option(help="Only campaigns in this status (DRAFT, QUEUED, ...).")] = None,
    as_json: JsonOption = False,
    wide: WideOption = False,
    quiet: QuietOption = False,
) -> None:
    """List the workspace's email campaigns, newest first (GET /v1/campaigns)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    result = views.email_campaigns(s.conn(), s.workspace_id(), page=page, limit=limit, status=status)
    p = result["pagination"]
    from marketing_cli.cli.estimates import cell
    from marketing_cli.cli.times import when_cell

    emit(result, as_json, lambda r: table(
        ["id", "name", "type", "status", "scheduled", "to come", "sender", "variants", "created"],
        [(c["id"], c["name"], c["type"], _status(c), when_cell(c["scheduled_at"]), cell(c.get("estimate")),
          _address(c["sender_identity"]),
          ", ".join(f"{v['type']}: {v['subject'] or '-'}" for v in c["variants"]), c["created_at"])
         for c in r["campaigns"]],
        title=f"Page {p['current_page']} of {p['total_pages']} ({p['total_count']} campaign(s))",
        drop=("variants", "sender", "type", "to come")),
         wide=wide, quiet=quiet)


@app.command("show")
def campaigns_show(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Show one campaign's configuration, status and what will happen to its recipients (GET /v1/campaigns/:id)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    emit(views.email_campaign(s.conn(), s.workspace_id(), campaign_id), as_json, render_campaign)


@app.command("duplicate")
def campaigns_duplicate(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Copy a campaign as a new DRAFT, "Copy of NAME" (POST /v1/campaigns/:id/duplicate)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    emit(views.email_duplicate(s.conn(), s.workspace_id(), campaign_id), as_json, render_campaign)


def _reply_to(text: str) -> dict[str, str]:
    from email.utils import parseaddr

    name, mail = parseaddr(text)
    if "@" not in mail:
        raise usage_error("--reply-to must look like 'Name <local@domain>' or local@domain.")
    local, domain = mail.rsplit("@", 1)
    return {"display_name": name, "local_part": local, "domain_name": domain}


def _variants(subject_a: str | None, preview_a: str | None, subject_b: str | None,
              preview_b: str | None) -> list[dict[str, Any]] | None:
    variants = []
    for kind, subject, preview in (("A", subject_a, preview_a), ("B", subject_b, preview_b)):
        if subject is None and preview is not None:
            raise usage_error(f"--preview-{kind.lower()} needs --subject-{kind.lower()}.")
        if subject is not None:
            variants.append({"type": kind, "subject": subject, **({"preview_text": preview} if preview is not None
                                                                  else {})})
    return variants or None


@app.command("configure")
def campaigns_configure(
    ctx: typer.Context,
    campaign_id: CampaignId,
    body: Annotated[Optional[str], typer.Option(
        "--body", metavar="FILE|-", help="The API's JSON body from a file (or - for stdin); options override it.")
    ] = None,
    sender_id: Annotated[Optional[int], typer.Option("--sender-id", help="The sender identity's id.")] = None,
    reply_to: Annotated[Optional[str], typer.Option(
        "--reply-to", help="Reply-to address: 'Name <local@domain>' (needs --sender-id).")] = None,
    audience_type: Annotated[Optional[str], typer.Option(
        "--audience-type", help="ENTIRE_AUDIENCE, TAGS or SEGMENTS.")] = None,
    include_tag: IncludeTags = None,
    include_segment: IncludeSegments = None,
    exclude_tag: ExcludeTags = None,
    exclude_segment: ExcludeSegments = None,
    subject_a: Annotated[Optional[str], typer.Option("--subject-a", help="Variant A's subject (3-90).")] = None,
    preview_a: Annotated[Optional[str], typer.Option("--preview-a", help="Variant A's preview text.")] = None,
    subject_b: Annotated[Optional[str], typer.Option("--subject-b", help="Variant B's subject (3-90).")] = None,
    preview_b: Annotated[Optional[str], typer.Option("--preview-b", help="Variant B's preview text.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Configure a DRAFT campaign's sender, audience and variants (PATCH /v1/campaigns/:id/configure)."""
    from marketing_cli.services.email import campaigns

    payload: dict[str, Any] = {}
    if body is not None:
        payload = json_option(body if body == "-" else f"@{body}", "--body", expect=dict)
    if reply_to is not None and sender_id is None:
        raise usage_error("--reply-to needs --sender-id (a given sender replaces the whole sender section).")
    if sender_id is not None:
        payload["sender"] = {"sender_identity_id": sender_id,
                             **({"reply_to": _reply_to(reply_to)} if reply_to is not None else {})}
    if audience_type is not None:
        payload["audience"] = audience_object(ctx, audience_type, include_tag, include_segment, exclude_tag,
                                              exclude_segment)
    elif include_tag or include_segment or exclude_tag or exclude_segment:
        raise usage_error("The include/exclude options need --audience-type.")
    variants = _variants(subject_a, preview_a, subject_b, preview_b)
    if variants is not None:
        payload["variants"] = variants
    s = state(ctx)
    emit(campaigns.configure_campaign(s.conn(), s.workspace_id(), campaign_id, payload), as_json, render_campaign)


def _read_html(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise usage_error(f"Cannot read {source}: {reason}.") from None


@html_app.command("set")
def campaigns_html_set(
    ctx: typer.Context,
    campaign_id: CampaignId,
    variant: VariantType,
    source: Annotated[Optional[str], typer.Argument(metavar="FILE|-", help="The HTML file, or - for stdin.")] = None,
    template_id: Annotated[Optional[int], typer.Option(
        "--template", metavar="TID", help="Take the HTML of this template instead of a file.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Set a variant's HTML, cleaned (POST /v1/campaigns/:id/variants/:type/html)."""
    from marketing_cli.services.email import variant_html

    if (source is None) == (template_id is None):
        raise usage_error("Give the HTML as FILE (or -) or --template TID, one of the two.")
    payload = {"html": _read_html(source)} if source is not None else {"template_id": template_id}
    s = state(ctx)

    def human(r: dict[str, Any]) -> str:
        lines = [f"Variant {r['type']} ({r['id']}): {len(r['body_html'])} characters of cleaned HTML stored."]
        lines += [f"warning: {w}" for w in r["warnings"]]
        return "\n".join(lines)

    emit(variant_html.set_variant_html(s.conn(), s.workspace_id(), campaign_id, variant, payload), as_json, human)


@html_app.command("show")
def campaigns_html_show(ctx: typer.Context, campaign_id: CampaignId, variant: VariantType,
                        as_json: JsonOption = False) -> None:
    """Print a variant's stored HTML (GET /v1/campaigns/:id/variants/:type/html)."""
    from marketing_cli.services.email import variant_html

    s = state(ctx)
    result = variant_html.get_variant_html(s.conn(), s.workspace_id(), campaign_id, variant)
    if as_json:
        emit(result, True)
        return
    sys.stdout.write((result["body_html"] or "") + ("\n" if result["body_html"] else ""))


@app.command("test")
def campaigns_test(
    ctx: typer.Context,
    campaign_id: CampaignId,
    variant: Annotated[str, typer.Option("--variant", help="A or B.")],
    to: Annotated[str, typer.Option("--to", metavar="ADDR", help="The address to send the test email to.")],
    smtp_url: Annotated[Optional[str], typer.Option(
        "--smtp-url", envvar="MKT_SMTP_URL", help="smtp://[user:pass@]host:port[?starttls=1] or smtps://...; "
                                                 "without it, the workspace's transport (`mkt mail transport show`).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Send a test email of one variant (POST /v1/campaigns/:id/test)."""
    from marketing_cli.services.delivery import test_emails
    from marketing_cli.services.delivery.transport import parse_smtp_url

    if smtp_url:
        try:
            parse_smtp_url(smtp_url)
        except ValueError as exc:
            raise usage_error(f"--smtp-url: {exc}") from None
    s = state(ctx)
    emit(test_emails.send_test_email(s.conn(), s.workspace_id(), campaign_id,
                                     {"variant_type": variant, "recipient": to}, smtp_url=smtp_url),
         as_json, lambda message: message)


# Commands whose code lives beside their own views (one module each).
from marketing_cli.cli import campaign_sending, campaign_series, campaign_stats  # noqa: E402

campaign_sending.register(app)
campaign_stats.register(app)
campaign_series.register(app)

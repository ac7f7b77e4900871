"""`mkt automations`: flows that react to the event log (the twin of /v1/automations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.output import (
    JsonOption,
    QuietOption,
    WideOption,
    emit,
    json_option,
    pairs,
    table,
    usage_error,
)
from marketing_cli.cli.references import contact_id
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state
from marketing_cli.errors import MktError

app = typer.Typer(help=HELP["automations"], no_args_is_help=True)

AutomationId = Annotated[str, typer.Argument(metavar="ID", help="The automation's id (see `mkt automations list`).")]
FileOption = Annotated[Path, typer.Option("--file", "-f", metavar="PATH",
                                          help="The flow document: a JSON file, or YAML (.yaml/.yml) "
                                               "(docs/automations.md).")]


YAML_MAX_BYTES = 1024 * 1024  # a flow is at most 256 KB as JSON; YAML's indentation and comments get room


def _yaml_loader() -> Any:
    """PyYAML's safe loader (no Python objects, ever) reading YAML the way JSON means it: only
    true/false are booleans (YAML 1.1 also reads yes/no/on/off so, and a split's `yes:` and
    `no:` pointers would become booleans) and timestamps stay strings (as in a JSON flow).

    Bounded while the document is composed, before any value is built: an alias (`*name`,
    `<<: *name`) is refused, since each one repeats a whole subtree (a 700-byte file of nested
    aliases ran 60 s to 5.6 GB), and a collection deeper than the flow format's MAX_DEPTH is
    refused at its start (600 levels were a RecursionError traceback)."""
    import re

    import yaml

    from marketing_cli.services.automations.format import MAX_DEPTH

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise yaml.composer.ComposerError(None, None, f"an alias (*{event.anchor}) repeats a value: "
                                                  "aliases are not read, write the value out", event.start_mark)
            nests = isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent))
            if nests and self.depth >= MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"objects and arrays nest more than {MAX_DEPTH} levels "
                                                  "deep", event.start_mark)
            self.depth += nests
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= nests

    dropped = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")
    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag not in dropped]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                 list("tTfF"))
    return Loader


def _string_keys(value: Any, option: str) -> Any:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise usage_error(f"{option}: the key {key!r} is not a string (quote it).")
        return {k: _string_keys(v, option) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v, option) for v in value]
    return value


def read_yaml(path: Path, option: str) -> Any:
    """A YAML file as the JSON value it spells; a parse error, an alias, nesting past the flow
    format's depth or a file over YAML_MAX_BYTES is a usage error (exit 2) naming the line."""
    import yaml

    from marketing_cli.kernel.inputs import check_unicode

    try:
        with path.open("rb") as handle:
            raw = handle.read(YAML_MAX_BYTES + 1)
    except OSError as exc:
        raise usage_error(f"{option}: cannot read {path}: {exc.strerror}.") from None
    if len(raw) > YAML_MAX_BYTES:
        raise usage_error(f"{option}: {path} is larger than {YAML_MAX_BYTES // 1024 // 1024} MiB.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise usage_error(f"{option}: {path} is not UTF-8 text.") from None
    try:
        value = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise usage_error(f"{option}: {path} is not valid YAML{where}: {exc.problem or exc.context}.") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise usage_error(f"{option}: {path} is not valid YAML: {exc}.") from None
    value = _string_keys(value, option)
    check_unicode(value, "body")
    return value


def _document(path: Path, option: str = "--file") -> Any:
    if path.suffix.lower() in (".yaml", ".yml"):
        return read_yaml(path, option)
    return json_option(f"@{path}", option)


def render_automation(a: dict[str, Any]) -> Any:
    shown = {"id": a["id"], "name": a["name"], "status": a["status"], "version": a["current_version"],
             "reentry": a["reentry"], "triggers": ", ".join(a["triggers"]), "updated": a["updated_at"]}
    if "enrollments" in a:
        shown["steps"] = ", ".join(f"{s['id']} ({s['type']})" for s in a["flow"].get("steps", []))
        shown["versions"] = ", ".join(str(v["version"]) for v in a["versions"]) or "none published"
        shown["contacts"] = ", ".join(f"{k} {v}" for k, v in a["enrollments"].items())
        shown["webhook secret"] = a["webhook_secret"]
    return pairs(shown, title="Automation")


@app.command("create")
def automations_create(ctx: typer.Context, file: FileOption, as_json: JsonOption = False) -> None:
    """Create an automation from a flow file (POST /v1/automations); it starts as a DRAFT."""
    from marketing_cli.services.automations import flows

    s = state(ctx)
    emit(flows.create_automation(s.conn(), s.workspace_id(), _document(file)), as_json, render_automation)


@app.command("update")
def automations_update(ctx: typer.Context, automation_id: AutomationId, file: FileOption,
                       as_json: JsonOption = False) -> None:
    """Replace an automation's draft (PUT /v1/automations/:id); publish to make it live."""
    from marketing_cli.services.automations import flows

    s = state(ctx)
    emit(flows.update_automation(s.conn(), s.workspace_id(), automation_id, _document(file)), as_json,
         render_automation)


@app.command("list")
def automations_list(ctx: typer.Context, status: Annotated[str | None, typer.Option(
        "--status", help="Only DRAFT, ACTIVE, PAUSED or ARCHIVED automations.")] = None,
                     as_json: JsonOption = False, wide: WideOption = False, quiet: QuietOption = False) -> None:
    """List the workspace's automations (GET /v1/automations)."""
    from marketing_cli.services.automations import flows

    s = state(ctx)
    emit(flows.list_automations(s.conn(), s.workspace_id(), status), as_json, lambda rows: table(
        ["id", "name", "status", "version", "triggers", "updated"],
        [(str(r["id"]), r["name"], r["status"], r["current_version"] or "-", ", ".join(r["triggers"]),
          r["updated_at"]) for r in rows]), wide=wide, quiet=quiet)


@app.command("show")
def automations_show(ctx: typer.Context, automation_id: AutomationId, as_json: JsonOption = False) -> None:
    """Show an automation: draft, versions, contacts in it (GET /v1/automations/:id)."""
    from marketing_cli.services.automations import flows

    s = state(ctx)
    emit(flows.get_automation(s.conn(), s.workspace_id(), automation_id), as_json, render_automation)


@app.command("version")
def automations_version(ctx: typer.Context, automation_id: AutomationId,
                        version: Annotated[int, typer.Argument(help="The version number.")],
                        as_json: JsonOption = False) -> None:
    """Show one published version (GET /v1/automations/:id/versions/:version)."""
    from marketing_cli.services.automations import flows

    s = state(ctx)
    emit(flows.get_version(s.conn(), s.workspace_id(), automation_id, version), as_json)


def _lifecycle(name: str, doc: str) -> None:
    def command(ctx: typer.Context, automation_id: AutomationId, as_json: JsonOption = False) -> None:
        from marketing_cli.services.automations import flows

        s = state(ctx)
        emit(getattr(flows, f"{name}_automation")(s.conn(), s.workspace_id(), automation_id), as_json,
             render_automation)

    command.__doc__ = doc
    command.__name__ = f"automations_{name}"
    app.command(name)(command)


_lifecycle("publish", "Validate the draft and publish it as the next version (POST /v1/automations/:id/publish).")
_lifecycle("pause", "Pause: no new entries, contacts held where they are (POST /v1/automations/:id/pause).")
_lifecycle("resume", "Resume a paused automation (POST /v1/automations/:id/resume).")
_lifecycle("archive", "Archive an automation for good; contacts in it exit (POST /v1/automations/:id/archive).")


def render_enrollment(e: dict[str, Any]) -> Any:
    return pairs({k: e[k] for k in ("id", "contact_id", "version", "status", "step_id", "next_run_at",
                                    "exit_reason")}, title="Enrollment")


@app.command("enroll")
def automations_enroll(ctx: typer.Context, automation_id: AutomationId,
                       contact: Annotated[str, typer.Option("--contact", metavar="CONTACT",
                                                            help="The contact to add: id, email or phone.")],
                       entry_key: Annotated[str | None, typer.Option(
                           "--entry-key", help="An idempotency key: the same key enrolls once.")] = None,
                       as_json: JsonOption = False) -> None:
    """Add a contact by hand (POST /v1/automations/:id/enrollments; needs a manual trigger)."""
    from marketing_cli.services.automations import triggers

    s = state(ctx)
    body = {"contact_id": contact_id(s, contact), **({"entry_key": entry_key} if entry_key is not None else {})}
    emit(triggers.enroll_contact(s.conn(), s.workspace_id(), automation_id, body), as_json, render_enrollment)



@app.command("simulate")
def automations_simulate(ctx: typer.Context, automation_id: AutomationId,
                         contact: Annotated[str, typer.Option("--contact", metavar="CONTACT", help="The contact "
                                                              "to walk the flow for: id, email or phone.")],
                         events: Annotated[Path | None, typer.Option(
                             "--events", metavar="PATH", help="A JSON (or YAML) list of events the contact would"
                             " cause: [{\"name\": \"purchase\", \"properties\": {...}, \"at\": \"...\"}].")]
                         = None,
                         until: Annotated[str | None, typer.Option(
                             "--until", metavar="DATE", help="Stop at this date (YYYY-MM-DD) or time (RFC 3339);"
                             " default a year from now.")] = None,
                         as_json: JsonOption = False) -> None:
    """Walk the flow for one contact on a simulated clock: each step with its UTC and local time.
    Sends nothing, writes nothing (POST /v1/automations/:id/simulate)."""
    from marketing_cli.services.automations import simulate

    s = state(ctx)
    body: dict[str, Any] = {"contact_id": contact_id(s, contact)}
    if events is not None:
        body["events"] = _document(events, "--events")
    if until is not None:
        body["until"] = until

    def human(r: dict[str, Any]) -> Any:
        title = (f"{r['contact_id']} in {r['zone']} ({r['zone_source']}): {r['end']}"
                 + (f" ({r['exit_reason']})" if r["exit_reason"] else "")
                 + (f"; would send {', '.join(f'{n} {c}' for c, n in r['messages'].items())}" if r["messages"] else "")
                 + (f"; SMS cost {r['sms_cost']} USD" if r["sms_cost"] else ""))
        return table(["UTC", "local", "step", "type", "outcome", "detail"],
                     [(x["at"], x["local"], x["step_id"] or "-", x["type"] or "-", x["outcome"],
                       " ".join(str(part) for part in (x["detail"], x.get("subject") and f"subject: {x['subject']}",
                                                        x.get("price") and f"price {x['price']} USD") if part) or "-")
                      for x in r["steps"]], title)

    emit(simulate.simulate(s.conn(), s.workspace_id(), automation_id, body), as_json, human)


@app.command("test")
def automations_test(ctx: typer.Context, automation_id: AutomationId,
                     to: Annotated[str, typer.Option(
                         "--to", metavar="ADDRESS", help="An email address (the email steps) or a phone number"
                         " in E.164 form, +15551234567 (the SMS steps).")],
                     sms_to: Annotated[str | None, typer.Option(
                         "--sms-to", metavar="PHONE", help="A phone number for the SMS steps, beside an email"
                         " address in --to.")] = None,
                     contact: Annotated[str | None, typer.Option(
                         "--contact", metavar="CONTACT", help="Render merge tags for this contact, by id, email or"
                         " phone (default: the contact with the test address, else the fields' defaults).")] = None,
                     smtp_url: Annotated[str | None, typer.Option(
                         "--smtp-url", envvar="MKT_SMTP_URL", help="smtp://[user:pass@]host:port or smtps://...;"
                         " without it, the workspace's transport (`mkt mail transport show`).")] = None,
                     as_json: JsonOption = False) -> None:
    """Send each message of the flow once to a test address (POST /v1/automations/:id/test)."""
    from marketing_cli.services.automations import simulate
    from marketing_cli.services.delivery.transport import parse_smtp_url

    if smtp_url:
        try:
            parse_smtp_url(smtp_url)
        except ValueError as exc:
            raise usage_error(f"--smtp-url: {exc}") from None
    body: dict[str, Any] = {"to": to}
    if sms_to is not None:
        body["sms_to"] = sms_to
    s = state(ctx)
    if contact is not None:
        body["contact_id"] = contact_id(s, contact)
    emit(simulate.send_tests(s.conn(), s.workspace_id(), automation_id, body, smtp_url=smtp_url), as_json,
         lambda r: table(["step", "channel", "to", "status", "message id"],
                         [(x["step_id"], x["channel"], x["to"] or "-", x["status"], x["message_id"] or "-")
                          for x in r["sent"]], f"Test messages of automation {r['automation_id']}"))

@app.command("enrollments")
def automations_enrollments(ctx: typer.Context, automation_id: AutomationId,
                            status: Annotated[str | None, typer.Option(
                                "--status", help="Only active, paused, completed or exited ones.")] = None,
                            as_json: JsonOption = False, wide: WideOption = False, quiet: QuietOption = False) -> None:
    """List an automation's enrollments, newest first (GET /v1/automations/:id/enrollments)."""
    from marketing_cli.services.automations import triggers

    s = state(ctx)
    emit(triggers.list_enrollments(s.conn(), s.workspace_id(), automation_id, status=status), as_json,
         lambda rows: table(["id", "contact", "version", "status", "step", "next run", "exit reason"],
                            [(str(r["id"]), r["contact_id"], r["version"], r["status"], r["step_id"] or "-",
                              r["next_run_at"] or "-", r["exit_reason"] or "-") for r in rows]),
         wide=wide, quiet=quiet)


@app.command("backfill")
def automations_backfill(ctx: typer.Context, automation_id: AutomationId,
                         segment: Annotated[int | None, typer.Option(
                             "--segment", metavar="SEGMENT_ID", help="Only this segment's members.")] = None,
                         yes: Annotated[bool, typer.Option("--yes", help="Enroll them without asking.")] = False,
                         dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count them.")] = False,
                         as_json: JsonOption = False) -> None:
    """Enroll existing contacts (POST /v1/automations/:id/backfill): shows the count first."""
    from marketing_cli.services.automations import triggers

    s = state(ctx)
    body: dict[str, Any] = {"segment_id": segment} if segment is not None else {}
    counted = triggers.backfill(s.conn(), s.workspace_id(), automation_id, {**body, "dry_run": True})
    if dry_run or counted["count"] == 0:
        emit(counted, as_json, lambda r: f"{r['count']:,} contacts would enter automation {r['automation_id']}.")
        return
    if not yes:
        if as_json:
            raise MktError(400, f"{counted['count']:,} contacts would enter: give --yes to enroll them.")
        typer.confirm(f"{counted['count']:,} contacts would enter automation {counted['automation_id']}. Go on?",
                      abort=True)
    emit(triggers.backfill(s.conn(), s.workspace_id(), automation_id, body), as_json,
         lambda r: f"{r['enrolled']:,} contacts entered automation {r['automation_id']}.")


@app.command("stats")
def automations_stats(ctx: typer.Context, automation_id: AutomationId, as_json: JsonOption = False) -> None:
    """Statistics per version and step (GET /v1/automations/:id/statistics)."""
    from marketing_cli.services.automations import stats

    s = state(ctx)

    def human(data: dict[str, Any]) -> Any:
        rows = []
        for v in data["versions"]:
            for st in v["steps"]:
                email = st.get("email") or st.get("sms") or {}  # a send step's counters
                rows.append((str(v["version"]), st["step_id"], st["type"], st["runs"], st["in_step"],
                             ", ".join(f"{k} {n}" for k, n in st["outcomes"].items()) or "-",
                             ", ".join(f"{k} {n}" for k, n in email.items() if n) or "-",
                             "; ".join([*(f"{k}: {n}" for k, n in st["skipped"].items()),
                                        *(f"deferred, {k}: {n}" for k, n in st.get("deferred", {}).items())])
                             or "-"))
        title = (f"entered {data['entered']}, active {data['active']}, completed {data['completed']}, "
                 f"exited {data['exited']}, goals {data['goals_reached']}")
        paused = [f"Step {st['step_id']} (version {v['version']}) is paused: campaign {p['campaign_id']}: "
                  f"{p['status_detail']}" for v in data["versions"] for st in v["steps"] for p in st.get("paused", [])]
        listing = table(["version", "step", "type", "runs", "here", "outcomes", "messages", "skipped"], rows, title)
        if not paused:
            return listing
        from rich.console import Group
        return Group(listing, *paused)

    emit(stats.automation_stats(s.conn(), s.workspace_id(), automation_id), as_json, human)


@app.command("migrate")
def automations_migrate(ctx: typer.Context, automation_id: AutomationId,
                        to_version: Annotated[int, typer.Option("--to-version", help="The version to move them to.")],
                        mapping: Annotated[list[str] | None, typer.Option(
                            "--map", metavar="OLD=NEW", help="Send the contacts at step OLD to step NEW (repeatable).")]
                        = None,
                        unmapped: Annotated[str, typer.Option(
                            "--unmapped", help="Contacts at a step without a counterpart: stay or exit.")] = "stay",
                        dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print where they would go.")]
                        = False,
                        as_json: JsonOption = False) -> None:
    """Move in-flight contacts to another version (POST /v1/automations/:id/migrate), logged."""
    from marketing_cli.services.automations import migrate

    pairs_: dict[str, str] = {}
    for item in mapping or []:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise MktError(400, f"--map takes OLD=NEW step ids, not '{item}'.")
        pairs_[old] = new
    s = state(ctx)
    body = {"to_version": to_version, "map": pairs_, "dry_run": dry_run, "unmapped": unmapped}

    def human(r: dict[str, Any]) -> Any:
        title = (f"{'Would move' if r['dry_run'] else 'Moved'} {r['moved']} to version {r['to_version']}; "
                 f"{r['stayed']} stay, {r['exited']} exit")
        return table(["from version", "step", "contacts", "to step", "action"],
                     [(str(x["from_version"]), x["step_id"] or "-", x["contacts"], x["to_step"] or "-", x["action"])
                      for x in r["steps"]], title)

    emit(migrate.migrate(s.conn(), s.workspace_id(), automation_id, body), as_json, human)


@app.command("schema")
def automations_schema(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Print the JSON Schema of the flow document (GET /v1/automations/schema)."""
    from marketing_cli.services.automations.format import flow_schema

    schema = flow_schema()
    emit(schema, as_json, lambda value: json.dumps(value, indent=2))


# --- frequency caps (GET/PUT /v1/automations/caps) ---------------------------------------------

caps_app = typer.Typer(help="Frequency caps per channel: at most N automated messages per contact in a rolling"
                            " window (docs/automations.md).", no_args_is_help=True)
app.add_typer(caps_app, name="caps")
Channel = Annotated[str, typer.Argument(metavar="CHANNEL", help="email or sms.")]


def render_caps(r: dict[str, Any]) -> Any:
    def window(cap: dict[str, Any]) -> str:
        return " ".join(f"{n} {unit}" for unit, n in cap["window"].items())

    return table(["channel", "at most", "per"], [(channel, cap["max_messages"] if cap else "no cap",
                                                  window(cap) if cap else "-") for channel, cap in r.items()],
                 "Frequency caps of automated messages")


def parse_window(text: str) -> dict[str, int]:
    """'1d', '36h', '1d12h', '90m' -> the duration object the API takes."""
    import re

    units = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
    cleaned = text.strip().lower().replace(" ", "")
    parts = re.findall(r"(\d{1,9})([dhms])", cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned or len({u for _, u in parts}) != len(parts):
        raise MktError(400, f"--window takes a duration such as 1d, 12h, 1d12h or 90m, not '{text}'.")
    return {units[u]: int(n) for n, u in parts}


@caps_app.command("show")
def caps_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the workspace's frequency caps (GET /v1/automations/caps)."""
    from marketing_cli.services.automations import caps

    s = state(ctx)
    emit(caps.get_caps(s.conn(), s.workspace_id()), as_json, render_caps)


@caps_app.command("set")
def caps_set(ctx: typer.Context, channel: Channel,
             max_messages: Annotated[int | None, typer.Option("--max", help="At most this many messages per contact in the window.")]
             = None,
             window: Annotated[str | None, typer.Option("--window", help="The rolling window: 1d, 12h, 1d12h, 90m.")]
             = None,
             off: Annotated[bool, typer.Option("--off", help="Remove the channel's cap.")] = False,
             as_json: JsonOption = False) -> None:
    """Set or remove one channel's cap (PUT /v1/automations/caps)."""
    from marketing_cli.services.automations import caps

    if off and (max_messages is not None or window is not None):
        raise MktError(400, "Give either --off, or --max and --window.")
    if not off and (max_messages is None or window is None):
        raise MktError(400, "Give --max and --window (for example --max 2 --window 1d), or --off.")
    cap = None if off else {"max_messages": max_messages, "window": parse_window(window or "")}
    s = state(ctx)
    emit(caps.set_caps(s.conn(), s.workspace_id(), {channel: cap}), as_json, render_caps)


delete_command(app, AutomationId, "marketing_cli.services.deletion.campaigns:remove_automation",
               'Delete automation {id} with its versions, enrollments and step messages?',
               'Delete a DRAFT or ARCHIVED automation (DELETE /v1/automations/:id).')

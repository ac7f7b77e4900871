"""Schemathesis against a real `mkt serve` (issue 21 item 7): every operation of the document.

`mkt serve` runs as its own process on a free local port, over a database with a workspace,
its key, tags, fields and five contacts, its DNS pointed at a local server that knows no
name (a verification never leaves the machine). Schemathesis reads GET /v1/openapi.json from
it, draws requests from the document's schemas, valid ones (positive) and ones that break
them (negative), and applies all its checks: no 5xx, status code, content type, headers and
body as documented, schema-breaking input refused with a 4xx. Its positive_data_acceptance
("a schema-valid request gets a 2xx") is replaced by `spec_refusals_only`: a schema-valid
request may be refused only by one of the business rules listed in REFUSALS (a missing
campaign, a duplicate name, ...), which no JSON Schema can state; every shape rule the
services enforce is in the document, so any other refusal is a gap in it or a bug. Then the
document's links drive stateful sequences (create, then read, configure, schedule with the id
the API returned).

The example count is bounded so the module stays under about 90 s on two loaded cores;
MKT_FUZZ_EXAMPLES=200 MKT_FUZZ_RANDOM=1 MKT_FUZZ_STATEFUL=300 digs deeper by hand.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from marketing_cli.services.account import workspaces
from marketing_cli.storage.db import connect
from tests import factories
from tests.conftest import LocalDNS, Server
from tests.engines import new_database, restore_copy, save_copy

pytestmark = pytest.mark.slow

MAX_EXAMPLES = int(os.environ.get("MKT_FUZZ_EXAMPLES", "5"))  # per operation and mode
DERANDOMIZE = not os.environ.get("MKT_FUZZ_RANDOM")
STATEFUL_EXAMPLES = int(os.environ.get("MKT_FUZZ_STATEFUL", "60"))  # sequences of up to 6 calls
DEADLINE_MS = 10_000  # one request over HTTP on a loaded machine (the slowest real one takes a few ms)


# --- the refusals a schema-valid request may get -------------------------------------------
#
# Each is the specification's (or, for extension endpoints, docs/api.md's) answer to a rule
# about the workspace's data or the world, not about the request's shape. Keyed by message
# (a regular expression, matched in full); the comment says why JSON Schema cannot state it.
NOT_FOUND = "an id of the right shape that names nothing in the workspace"
REFUSALS: dict[str, str] = {
    # A resource the id does not name (the specification answers a missing campaign 400).
    r"We could not find the campaign you are looking for\.": NOT_FOUND,
    r"We could not find the variant you are looking for\.": NOT_FOUND,
    r"We were unable to find the segment\.": NOT_FOUND,
    r"We couldn't find a contact with that ID\.": NOT_FOUND,
    r"We could not find the template you are looking for\.": NOT_FOUND,
    r"We were unable to find the domain\.": NOT_FOUND,
    r"We were unable to find the sender identity\.": NOT_FOUND,
    r"We were unable to find the field\.": NOT_FOUND,
    r"We couldn't find a contact with that phone number\.": NOT_FOUND,
    r"Tag ID \d+ does not exist in this workspace": NOT_FOUND,
    r"One or more (exclude )?(tags|segments) could not be found\.": NOT_FOUND,
    r"Filter #\d+: The specified field_id does not exist": NOT_FOUND,
    r"The sender identity could not be found\.": NOT_FOUND,
    r"We could not find the (series|automation) you are looking for\.": NOT_FOUND,
    r"Not found\.": NOT_FOUND,  # DELETE of an id that names nothing (CONTRACT's answer, docs/api.md)
    # Deleting what something still uses, or what sent (docs/api.md "Deleting resources").
    r"This (tag|field|segment|sender|domain) is used by .*": "in use by a campaign, a flow or a segment",
    r"This (campaign|SMS campaign|automation)('s)? .*": "the resource's state: in flight, sent, archived",
    r"Messages of this .* are being handed over right now: .*": "a worker's hand-over in progress",
    r"This field is immutable and cannot be deleted\.": "the built-in email_address field",
    # The workspace's own definitions and settings.
    r"We were unable to find a field with the merge_tag .*": "fields are keyed by the workspace's merge tags",
    r"We couldn't find a PhoneNumber field in your workspace\. .*|Phone field not found in workspace configuration\.": (
        "the phone field, which a DELETE of the run may have removed"),
    r"Event properties can be at most 16 KB .*": "the properties' size as serialized JSON, which no schema counts",
    r"The file has no email_address column .*": "the CSV file's header names the workspace's fields",
    r"Validation error": "fields: uniqueness, the merge tag's format, dropdown options (the spec's one message)",
    r"Your plan does not support conversion tracking\. Please upgrade to enable this feature\.": "the plan",
    r"Email address is required for upsert operation\.": "unless the workspace allows contacts without email",
    r"A tag named .* already exists in this workspace\.": "uniqueness",
    r"The member 'timezone' must be an IANA time zone name .*": "a name in the tz database (600 of them)",
    r"Unknown text encoding .*": "a codec Python knows (encoding=)",
    # A flow document's rules across its members (docs/automations.md): what JSON Schema
    # cannot say without naming the document's own step ids.
    r"The member 'cooldown' is only for reentry 'cooldown'\.": "cooldown goes with reentry 'cooldown'",
    r"The step id '.*' is used twice \(steps\[\d+\] and steps\[\d+\]\)\.": "step ids are unique (JSON Schema's"
                                                                             " uniqueItems compares whole items)",
    r"The member '.*' names '.*', which is no step\.": "a step reference names one of the flow's steps",
    r"The duration '.*' must be more than 0 and at most 366 days\.": "the units' sum (days, hours, ...)",
    r"The member '.*' must be an object such as \{\"days\": 1\} .*": "a duration names a unit (nulls are left out)",
    r"Step '.*' \(steps\[\d+\]\) points '.*' at '.*', which is no step\.": "a step reference names one of the flow's steps",
    r".* names the \w+ '.*', which the workspace does not have\.": "the workspace's fields, tags, segments ...",
    r"Step '.*' \(steps\[\d+\]\) needs exactly one of 'template_id' and 'html'\.": "one of the two (null is absent)",
    r"Step '.*' \(steps\[\d+\]\) sends an SMS, but the workspace has no SMS sender ID: .*": "the workspace's settings",
    r"Step '.*' \(steps\[\d+\]\): The merge tag .*": "an SMS body's tags are the workspace's fields",
    r"Step '.*' \(steps\[\d+\]\): The message contains '.*', which is not a merge tag: .*": "the SMS merge syntax",
    r"No path from the start reaches the step\(s\): .*": "a flow's graph: every step reachable from the start",
    r"Step '.*' \(steps\[\d+\]\) has no unsubscribe link: .*": "a marketing email's HTML carries its way out",
    r"Step '.*' \(steps\[\d+\]\): The sending domain .* is not verified yet: .*": "DNS",
    r"We could not find that version of the automation\.": NOT_FOUND,
    r"Only (active|paused) automations .*": "the automation's status",
    r"This automation is archived; .*": "the automation's status",
    # simulate and test (docs/automations.md): what an address, a time and an event file mean.
    r"'.*' is neither an email address nor a phone number in E\.164 form\. .*": "an email address or a + number",
    r"The member 'sms_to' .*": "a phone number beside an email address",
    r"This automation has no send step: there is nothing to test\.": "the flow's steps",
    r"The member '(until|events\[\d+\]\.at)' must be a date .*": "a date or an RFC 3339 time",
    r"The member 'until' must be in the future\.": "the clock",
    r"The member 'events\[\d+\]\.name' is required for a custom event .*": "name goes with a custom event",
    r"The member 'events\[\d+\]\.type' must be one of: .*": "a custom event is given by its name",
    # What makes an address, a domain or a number real (JSON Schema's formats cannot say).
    r"Please provide a valid recipient email address\.": "email syntax and domain",
    r"Please provide a valid domain name, such as example\.com\.": "DNS syntax and public suffix",
    r"Phone number is invalid\. Please provide a valid phone number\.": "a dialable number",
    r"'.*' is not a valid email address: .*": "email syntax and domain",
    r"'.*' is not a valid phone number in E\.164 form .*": "a dialable number",
    r"The member '.*' holds the NUL character \(\\u0000\), which text may not contain\.": "no engine's text"
                                                                                   " holds U+0000 (PostgreSQL's cannot)",
    r"We were unable to decode the base64 content\.": "content_base64 is base64 (the specification's"
                                                      " message, not a schema pattern)",
    # What the base64 content decodes to: a file's text, which no schema reads.
    r"The template HTML (is empty|must be UTF-8 text)\.": "the decoded file: blank, or not UTF-8",
    r"The (content is not a valid ZIP archive|ZIP archive .*)\.": "the decoded file: a ZIP archive and its members",
    # Rules across members (one of two, one required when another has a value): the
    # specification's own messages, for a request whose members are each valid.
    r"Email address or phone number is required\. .*": "exactly one of email_address and phone_number",
    r"Please provide an email address or phone number, not both\.": "exactly one of the two",
    r"We couldn't find a contact with the (email address|phone number) '.*'\.": NOT_FOUND,
    r"Please provide the HTML content for this variant\.": "html, or template_id instead",
    r"The import format is required for coded templates\. .*": "import_format when type is code",
    r"Please provide the content_base64 field for HTML and ZIP coded templates\.": "content per import_format",
    r"The url field is required for URL-based coded templates\.": "url when import_format is url",
    # (the series' feed_url states its scheme in a pattern: it is read whatever the other members)
    r"The url must start with http:// or https://": "url's scheme, read only when import_format is url",
    r"Please provide a domain name\.": "domain_name, or one of its aliases",
    r"This field is immutable and cannot be updated\.": "the built-in email_address field",
    r"The request body is empty: .*": "the CSV file of an import is the body",
    r"Please provide either html or template_id, not both\.": "one of the two",
    r"Give either a date format .*, not both\.": "date_format or day_first, not both",
    r"The date format .* must read a day, a month and a year, for example %d\.%m\.%Y or %m/%d/%Y\.": (
        "what a strftime format means (issue 41: a schema-valid date_format refused 400 failed the run)"),
    r"The type of the field cannot be changed\.": "type must equal the field's own",
    r"The template has no file named .*": NOT_FOUND,
    r"The member 'tags' holds tag IDs that do not exist in this workspace: .*": NOT_FOUND,
    # The spec's `Filter #N:` messages: a filter's operator and value follow its type and,
    # for a field filter, the field's type in the workspace.
    r"Filter #\d+: (Invalid operator for .* filter\. Must be one of: .*|Tags filter value must be an array "
    r"of tag IDs\.|Value must be .*|.*value.*)": "a filter's operator and value follow its type",
    r"No field matches the column\(s\) .*": "the CSV file's header names the workspace's fields",
    # The resource's state, built over several calls (the stateful phase meets these).
    r"Please configure (a sender identity|an audience for this campaign) before (scheduling|sending).*": "state",
    r"Variant [AB] (needs|has|uses) .*": "a variant's subject and HTML are set by other calls",
    r"The variant must have .* before sending test emails\.": "state",
    r"Please provide a (name|message) for this campaign before scheduling\.": "state",
    r"Please add an SMS sender ID under SMS Marketing before scheduling this campaign\.": "operator setting",
    r"Your available SMS balance is .*": "the prepaid balance",
    r"The sending domain .* is not verified yet: .*": "DNS",
    r"The audience of this campaign has no subscribed recipients with an email address\.": "the contacts",
    r"Only .* campaigns can be .*": "the campaign's status",
    r"The campaign must be in draft mode before it can be configured\.": "the campaign's status",
    r"The campaign cannot be edited while it is being reviewed\.": "the campaign's status",
    r"Only A/B testing campaigns take ab_test settings\.": "the campaign's type",
    r"(Single variant|A/B testing) campaigns (cannot|must) .*": "the campaign's type",
    r"Variant '[AB]' is given more than once\.": "a variant type once (unique by a member: uniqueItems compares"
                                                " whole items)",
    r"Another contact export is running in this workspace .*": "one export at a time (one the run started"
                                                              " may still be running)",
    r"Scheduled date must be in the future\.": "the clock",
    r"Billing limit error.*": "the plan's allowance",
    r"You (are sending test emails too quickly|have exceeded the (hourly|daily) test email limit)\..*": "rate",
    r"You have exceeded the rate limit of 60 requests per minute\..*": "rate (public rate list)",
    r"This campaign was flagged by automated review\..*": "review of the message's words",
    # A person's data (docs/privacy.md): an address that is one of two (an id that names nothing: above).
    r"Please provide an email address or a phone number(, not both)?\.": "exactly one of the two",
    r"This (email address|phone number) is already on the suppression list \(suppression \d+\)\.": "uniqueness",
    r"Contact [0-9a-f]{24} holds this (email address|phone number): .*": "a contact is erased, not suppressed",
    r"'.*' (is not a (valid )?phone number|has no country code .*)\.?": "a dialable number",
    r"This person asked to be erased: a new double opt-in confirmation is needed\.": "the suppression list",
    # Bulk tagging (docs/api.md "Tags"): which contacts, said by exactly one selector.
    r"We couldn't find a tag with that ID in this workspace\.": NOT_FOUND,
    r"Please provide exactly one of 'search', 'segment_id', 'emails' or 'contact_ids' .*": "exactly one selector"
                                                                                         " (null is absent)",
    r"The member 'emails' holds an entry that is not an email address: .*": "email syntax and domain",
    # A warm-up schedule (docs/api.md "POST, GET, DELETE /v1/domains/:id/warmup").
    r"the request's schedule: day \d+ gives the \w+ lane two caps\.": "one cap per day and lane (rows unique by "
                                                                      "two of their members)",
}


def refusal_allowed(message: str) -> bool:
    return any(re.fullmatch(pattern, message, re.DOTALL) for pattern in REFUSALS)  # a name may hold a newline


@schemathesis.check
def spec_refusals_only(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request is answered 2xx, or refused by a rule listed in REFUSALS."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code < 400:
        return None
    if response.status_code == 401 and "Authorization" not in (case.headers or {}):
        return None  # the auth checks send requests without the key on purpose
    if case.path.startswith(("/t/", "/s/", "/webhooks/")):
        return None  # a made-up token or signature: answered 404/403 by design (an HTML page)
    try:
        message = response.json()["error"]["message"]
    except Exception:  # noqa: BLE001 - any non-JSON answer is a failure here
        message = response.text[:200]
    if not refusal_allowed(message):
        raise AssertionError(f"{case.method} {case.formatted_path}: a schema-valid request was refused "
                             f"{response.status_code} {message!r}; body {case.body!r}, query {case.query!r}")
    return None


# --- the world and the server ----------------------------------------------------------------

def make_world(db_path: Path) -> str:
    """A database with a workspace, tags, fields and five contacts; returns its API key."""
    conn = connect(db_path)
    created = workspaces.create_workspace(conn, "Fuzz workspace")
    workspace_id = created["workspace"]["id"]
    vip = factories.tag(conn, workspace_id, "vip")
    factories.tag(conn, workspace_id, "newsletter")
    factories.field(conn, workspace_id, "city")
    factories.field(conn, workspace_id, "age", "NUMBER")
    for i in range(5):
        factories.contact(conn, workspace_id, f"person{i}@example.com", tags=[vip] if i % 2 else [], city="Lyon")
    conn.close()
    return created["api_key"]


KEY: dict[str, str] = {}  # the fuzzed workspace's API key


@schemathesis.auth(refresh_interval=None)
class WorkspaceKey:
    """Every generated request carries the key, except where schemathesis tests missing or bad auth."""

    def get(self, case: Any, context: Any) -> str:
        return KEY["value"]

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[dict[str, Any]]:
    """`mkt serve` on a free port over the world's database (its DNS a local server that knows nothing)."""
    folder = tmp_path_factory.mktemp("fuzz")
    db = new_database(postgres_server, folder)
    KEY["value"] = make_world(db)
    dns = LocalDNS()
    dns.start()
    saved = {name: os.environ.get(name) for name in ("MKT_DNS_SERVER", "MKT_OUTBOX", "MKT_SMTP_URL")}
    os.environ.update(MKT_DNS_SERVER=dns.address, MKT_OUTBOX=str(folder / "outbox"))
    os.environ.pop("MKT_SMTP_URL", None)
    try:
        server = Server(db)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        yield {"base": server.base, "db": db, "server": server}
    finally:
        code = server.stop()
        dns.stop()
        output = server.output()
        assert "Traceback" not in output, output[-4000:]
        assert code == 0, output[-4000:]
        if postgres_server is not None:
            postgres_server.drop(db)


def load_schema(base: str) -> Any:
    schema = schemathesis.openapi.from_url(f"{base}/v1/openapi.json")
    schema.config.update(base_url=base)
    return schema


@pytest.fixture(scope="module")
def api_schema(served: dict[str, Any]) -> Any:
    schema = load_schema(served["base"])
    schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                                    max_examples=MAX_EXAMPLES, deterministic=DERANDOMIZE)
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(scope="module")
def http() -> Iterator[Any]:
    """One HTTP session for all the calls: its connections kept alive, and no look at the
    environment's proxy settings per request (without it, a new connection and a read of
    os.environ for each of some 7,000 requests: about a fifth of the module's time)."""
    from schemathesis.transport.requests import SameHostRedirectsSession

    session = SameHostRedirectsSession()  # (what schemathesis makes for each call when given none)
    session.trust_env = False
    with session:
        yield session


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=DEADLINE_MS, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_documented(case: Any, http: Any) -> None:
    case.call_and_validate(session=http, excluded_checks=[positive_data_acceptance],
                           additional_checks=[spec_refusals_only], timeout=DEADLINE_MS / 1000)


def test_stateful_create_then_use(served: dict[str, Any], tmp_path: Path) -> None:
    """The document's links drive sequences: create a contact, campaign, segment... then read,
    configure, schedule it with the id the API returned (valid data only, so creations succeed)."""
    db = served["db"]
    stateful = load_schema(served["base"])
    pristine = save_copy(db, tmp_path)
    stateful.config.generation.update(modes=[GenerationMode.POSITIVE], deterministic=DERANDOMIZE)
    base = stateful.as_state_machine()

    created: set[str] = set()  # ids the API gave to resources made during the run
    followed: list[str] = []  # calls that used one of them in their path

    class CreateThenUse(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            """Each sequence starts from the same database: which links can be followed depends on
            what earlier answers made, and Hypothesis needs a replayed sequence to meet the same
            answers. The server's connections see the restored rows as another writer's commit."""
            restore_copy(db, pristine)

        def after_call(self, response: Any, case: Any) -> None:
            super().after_call(response, case)
            if {str(v) for v in (case.path_parameters or {}).values()} & created:
                followed.append(f"{case.method} {case.path} {response.status_code}")
            if response.status_code == 201:
                created.add(str(response.json()["data"]["id"]))

        def validate_response(self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any) -> None:
            case.validate_response(response, additional_checks=[*(additional_checks or ()), spec_refusals_only],
                                   excluded_checks=[positive_data_acceptance])

    CreateThenUse.run(settings=settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=6, deadline=DEADLINE_MS,
                                        derandomize=DERANDOMIZE, database=None,
                                        suppress_health_check=list(HealthCheck)))
    # The links were followed: a resource made in a step was used with the id it was given. In
    # about one run in seven none of 25 random sequences follows a link, and the derandomized run
    # (the default, CI's) is one draw of the same kind: its seed is the test's source, but
    # Hypothesis also draws from the literals of the code under test, so any change elsewhere
    # can make it a draw without a link (it did, 2026-11-29). 60 sequences make that about one
    # code change in a hundred; a random run (MKT_FUZZ_RANDOM) is not held to it.
    assert created, created
    assert followed or not DERANDOMIZE, created

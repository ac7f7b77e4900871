"""The flows of examples/automations/, end to end as shipped: each test runs the commands of
examples/automations/README.md as they are written (`mkt` in this process, `--json` added
to read the ids; `ID` is the id `mkt automations create` printed), so the files loaded are
the shipped ones, then drives contacts and events through the HTTP API on a fixed clock and
runs the due jobs as `mkt jobs run` does (the automations.run job and the sends it queues;
the double opt-in's first
tick through `mkt jobs run` itself) against a real SMTP server, twice at every
tick: each contact gets exactly the emails listed, at the times listed, once.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from marketing_cli.kernel import clock
from tests import factories as f
from tests.smtp_server import SmtpServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "automations"
T0 = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)  # a Wednesday, 09:00 UTC
BROWSER = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
           "Chrome/124.0.0.0 Safari/537.36")

CONFIRM = "Please confirm your subscription"
CONFIRM_AGAIN = "Reminder: please confirm your subscription"
TIPS = "Three tips to get the most out of it"
GIFT = "A welcome gift: 10% off your first order"
CART = "You left something in your cart"
CART_LAST = "Your cart is about to expire"
LAST_CALL = "Should we stop writing to you?"


def readme_commands(section: str) -> list[list[str]]:
    """The words of each command in the one `sh` block of the README's section `## <section>`."""
    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    assert match, f"examples/automations/README.md has no section '## {section}'"
    blocks = re.findall(r"^```sh\n(.*?)^```", match.group(1), re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1, f"the section '{section}' holds one sh block"
    return [shlex.split(line, comments=True) for line in blocks[0].splitlines() if line.strip()]


@dataclass
class World:
    conn: Any
    cli: Callable[..., Any]
    client: Any
    auth: dict[str, str]
    smtp: SmtpServer
    dns: Any
    now: f.FixedClock
    automations: dict[str, str] = field(default_factory=dict)  # section -> automation id
    arrived: list[datetime] = field(default_factory=list)  # the clock's time of each SMTP message

    def mkt(self, *args: str) -> Any:
        result = self.cli(*args, "--json")
        assert result.exit_code == 0, f"mkt {' '.join(args)}:\n{result.stderr or result.stdout}"
        return json.loads(result.stdout)

    def readme(self, section: str) -> list[Any]:
        """Run the section's commands as written; their outputs. Checks the ids the README's
        comments promise (domain 1, sender 1, segment N)."""
        outputs = []
        automation = None
        for words in readme_commands(section):
            assert words[0] == "mkt", words
            args = [automation if word == "ID" else word for word in words[1:]]
            assert None not in args, f"`ID` before `mkt automations create` in {words}"
            out = self.mkt(*args)
            if args[:2] == ["domains", "add"]:
                assert out["id"] == 1
                self.dns.publish(out)  # the DNS records the operator publishes
            elif args[:2] == ["domains", "verify"]:
                assert out["verified"] is True
            elif args[:2] == ["senders", "add"]:
                assert out["id"] == 1  # the sender_id of every example
            elif args[:2] == ["automations", "create"]:
                automation = str(out["id"])
                assert out["status"] == "DRAFT"
                self.automations[section] = automation
            elif args[:2] == ["automations", "publish"]:
                assert out["status"] == "ACTIVE" and out["current_version"] == 1
            outputs.append(out)
        return outputs

    def jobs(self) -> None:
        """The due jobs (automations.run and the sends it queues) run as `mkt jobs run` runs
        them, twice: the second run finds nothing more to send. What arrived is stamped with
        the fixed clock's time (the run that sent it)."""
        assert f.run_automations(self.conn)["failed"] == 0
        sent = len(self.smtp.messages)
        assert f.run_automations(self.conn)["failed"] == 0
        assert len(self.smtp.messages) == sent, "a second run sent again"
        self.arrived += [self.now()] * (sent - len(self.arrived))

    def at(self, moment: datetime) -> None:
        self.now.set(moment)
        self.jobs()

    def contact(self, email: str, first_name: str, status: str = "SUBSCRIBED") -> str:
        made = self.client.post("/v1/contacts", headers=self.auth, json={
            "status": status, "fields": {"email_address": email, "first_name": first_name}})
        assert made.status_code == 201, made.text
        return made.json()["data"]["id"]

    def status(self, contact_id: str) -> str:
        return self.client.get(f"/v1/contacts/{contact_id}", headers=self.auth).json()["data"]["status"]

    def event(self, name: str, email: str) -> None:
        answer = self.client.post("/v1/events", headers=self.auth, json={"event_name": name, "email_address": email})
        assert answer.status_code in (200, 201), answer.text

    def inbox(self, start: int = 0) -> list[tuple[str, str, datetime]]:
        """(subject, recipient, when it was sent) of every message the SMTP server got, from `start` on."""
        assert len(self.arrived) == len(self.smtp.messages)
        return [(m.message["Subject"], m.rcpt_tos[0], when)
                for m, when in zip(self.smtp.messages[start:], self.arrived[start:], strict=True)]

    def html(self, subject: str, to: str) -> str:
        [message] = [m.message for m in self.smtp.messages if m.message["Subject"] == subject and m.rcpt_tos == [to]]
        return message.get_body(("html",)).get_content()

    def link(self, subject: str, to: str, kind: str) -> str:
        """The path of the message's confirmation link (`confirm`) or open pixel (`o`)."""
        found = re.search(rf'(?:href|src)="(https?://[^"]+/t/{kind}/[^"]+)"', self.html(subject, to))
        assert found, f"no /t/{kind}/ link in '{subject}' to {to}"
        return urlsplit(found.group(1)).path

    def open(self, subject: str, to: str) -> None:
        assert self.client.get(self.link(subject, to, "o"), headers={"User-Agent": BROWSER}).status_code == 200

    def stats(self, section: str) -> dict[str, Any]:
        return self.mkt("automations", "stats", self.automations[section])

    def step(self, section: str, step_id: str) -> dict[str, Any]:
        [version] = self.stats(section)["versions"]
        [found] = [s for s in version["steps"] if s["step_id"] == step_id]
        return found


@pytest.fixture
def world(conn: Any, cli: Callable[..., Any], client: Any, auth: dict[str, str], dns_server: Any,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    now = f.FixedClock(T0)
    monkeypatch.setattr(clock, "utcnow", now)
    monkeypatch.chdir(ROOT)  # the README's paths (examples/automations/...) are from the checkout's root
    with SmtpServer() as smtp:
        monkeypatch.setenv("MKT_SMTP_URL", smtp.url)
        yield World(conn, cli, client, auth, smtp, dns_server, now)


def days(n: float, **more: float) -> datetime:
    return T0 + timedelta(days=n, **more)


def test_every_example_is_in_the_readme_and_the_docs() -> None:
    files = sorted(p.name for p in EXAMPLES.glob("*.json"))
    assert files == ["abandoned-cart.json", "birthday-sms.json", "double-opt-in.json", "welcome-series.json",
                     "win-back.json"]
    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "automations.md").read_text(encoding="utf-8")
    for name in files:
        assert f"## {name}" in text and f"examples/automations/{name}" in docs
        words = readme_commands(name)
        assert ["mkt", "automations", "create", "--file", f"examples/automations/{name}"] in words
        assert ["mkt", "automations", "publish", "ID"] in words
        assert json.loads((EXAMPLES / name).read_text(encoding="utf-8"))["description"]


def test_double_opt_in(world: World) -> None:
    world.readme("The sender")
    world.readme("double-opt-in.json")
    ann = world.contact("ann@example.com", "Ann", "UNCONFIRMED")
    bob = world.contact("bob@example.com", "Bob", "UNCONFIRMED")
    world.contact("cat@example.com", "Cat")  # created SUBSCRIBED: no double opt-in, no email
    assert world.mkt("jobs", "run") == {"processed": 2, "failed": 0}  # automations.run, the step's email.send
    world.at(T0)
    assert sorted(world.inbox()) == [(CONFIRM, "ann@example.com", T0), (CONFIRM, "bob@example.com", T0)]
    assert "Hi Ann," in world.html(CONFIRM, "ann@example.com")

    path = world.link(CONFIRM, "ann@example.com", "confirm")
    world.now.set(days(0, hours=1))
    assert world.client.get(path).status_code == 200  # a mail scanner fetching the link confirms nobody
    assert world.status(ann) == "UNCONFIRMED"
    assert "confirmed" in world.client.post(path).text  # the button
    assert world.status(ann) == "SUBSCRIBED"
    world.jobs()  # the goal: Ann leaves the flow

    for hour in range(6, 4 * 24, 6):
        world.at(days(0, hours=hour))
    assert sorted(world.inbox(2)) == [(CONFIRM_AGAIN, "bob@example.com", days(2))]  # Ann confirmed: no reminder
    assert world.status(bob) == "UNCONFIRMED"
    assert "confirmed" in world.client.post(world.link(CONFIRM_AGAIN, "bob@example.com", "confirm")).text
    assert world.status(bob) == "SUBSCRIBED"  # the reminder's link confirms too

    stats = world.stats("double-opt-in.json")
    assert (stats["entered"], stats["completed"], stats["exited"], stats["goals_reached"]) == (2, 1, 1, 1)
    assert stats["exit_reasons"] == {"goal": 1}
    confirm, wait, reminder = stats["versions"][0]["steps"]
    assert (confirm["outcomes"], confirm["email"]["sent"], confirm["email"]["delivered"]) == ({"sent": 2}, 2, 2)
    assert wait["outcomes"] == {"waited": 2}
    # Ann was waiting for the reminder when she confirmed: the goal is counted at that step.
    assert reminder["outcomes"] == {"sent": 1, "goal_reached": 1} and reminder["runs"] == 1
    assert reminder["email"]["sent"] == 1


def test_welcome_series(world: World) -> None:
    world.readme("The sender")
    world.readme("double-opt-in.json")
    world.readme("welcome-series.json")
    welcome = world.automations["welcome-series.json"]
    world.contact("ann@example.com", "Ann", "UNCONFIRMED")
    world.at(T0)
    assert "confirmed" in world.client.post(world.link(CONFIRM, "ann@example.com", "confirm")).text
    world.jobs()  # the confirmation (CONTACT_SUBSCRIBED) enrolls Ann at once

    for hour in range(6, 8 * 24, 6):
        if hour == 24:  # Dan was created SUBSCRIBED (no event): added by hand, as the README says
            world.now.set(days(1))
            dan = world.contact("dan@example.com", "Dan")
            assert world.mkt("automations", "enroll", welcome, "--contact", dan)["status"] == "active"
        world.at(days(0, hours=hour))

    assert sorted(world.inbox(), key=lambda m: (m[2], m[1])) == [
        (CONFIRM, "ann@example.com", T0),
        ("Welcome, Ann!", "ann@example.com", T0),
        ("Welcome, Dan!", "dan@example.com", days(1)),
        (TIPS, "ann@example.com", days(2)),
        (TIPS, "dan@example.com", days(3)),
        (GIFT, "ann@example.com", days(5)),
        (GIFT, "dan@example.com", days(6)),
    ]
    again = world.cli("automations", "enroll", welcome, "--contact", dan)
    assert again.exit_code == 1 and "re-entry policy is once" in again.stderr  # once per contact, ever
    stats = world.stats("welcome-series.json")
    assert (stats["entered"], stats["completed"], stats["active"]) == (2, 2, 0)
    assert [s["email"]["delivered"] for s in stats["versions"][0]["steps"] if s["type"] == "send_email"] == [2, 2, 2]


def test_abandoned_cart(world: World) -> None:
    world.readme("The sender")
    world.readme("abandoned-cart.json")
    for address, name in (("ann@example.com", "Ann"), ("bob@example.com", "Bob"), ("cat@example.com", "Cat"),
                          ("dan@example.com", "Dan")):
        world.contact(address, name)
    for address in ("ann@example.com", "bob@example.com", "cat@example.com"):
        world.event("cart_abandoned", address)
    world.at(T0)
    for hour in range(1, 31):
        world.now.set(days(0, hours=hour))
        if hour == 1:
            world.event("purchase", "bob@example.com")  # Bob buys within the hour: no email at all
            world.event("purchase", "dan@example.com")  # Dan bought without a cart: not in the flow
        if hour == 10:
            world.event("purchase", "cat@example.com")  # Cat buys after the reminder: no last call
        if hour == 29:
            world.event("cart_abandoned", "ann@example.com")  # within 7 days of Ann's entry: no new entry
        world.jobs()
    # After the cooldown, a new cart is a new entry.
    world.now.set(days(8))
    world.event("cart_abandoned", "ann@example.com")
    for hour in range(0, 6):
        world.at(days(8, hours=hour))

    assert sorted(world.inbox(), key=lambda m: (m[2], m[1])) == [
        (CART, "ann@example.com", days(0, hours=4)),
        (CART, "cat@example.com", days(0, hours=4)),
        (CART_LAST, "ann@example.com", days(1, hours=4)),
        (CART, "ann@example.com", days(8, hours=4)),
    ]
    stats = world.stats("abandoned-cart.json")
    assert (stats["entered"], stats["completed"], stats["active"], stats["goals_reached"]) == (4, 1, 1, 2)
    assert stats["exit_reasons"] == {"goal": 2}
    wait, reminder, wait_day, last_call = stats["versions"][0]["steps"]
    assert wait["outcomes"] == {"waited": 4}
    assert reminder["outcomes"] == {"sent": 3, "goal_reached": 1}  # Bob converted before his reminder
    assert last_call["outcomes"] == {"sent": 1, "goal_reached": 1}  # Cat before her last call
    assert last_call["in_step"] == 1  # Ann's second cart
    assert (reminder["email"]["sent"], last_call["email"]["sent"]) == (3, 1)


def _history_campaign(world: World, conn: Any, ws: int, subject: str) -> None:
    """A newsletter to everyone, sent now (the past, for the flow)."""
    from marketing_cli.services.email import campaigns, schedule, variant_html

    made = campaigns.create_campaign(conn, ws, {"name": subject})
    campaigns.configure_campaign(conn, ws, made["id"], {
        "sender": {"sender_identity_id": 1}, "audience": {"type": "ENTIRE_AUDIENCE"},
        "variants": [{"type": "A", "subject": subject}]})
    variant_html.set_variant_html(conn, ws, made["id"], "A", {"html": f.UNSUBSCRIBE_HTML})
    schedule.schedule_campaign(conn, ws, made["id"], {"schedule_type": "NOW"})
    world.jobs()


def test_win_back(world: World, conn: Any, workspace: dict[str, Any]) -> None:
    """Only contacts who opened nothing in 90 days get the win-back, each when its 90 days
    are up: the window moves with the clock, checked weekly per contact."""
    ws = workspace["id"]
    world.now.set(days(-200))
    world.readme("The sender")
    people = {"ann@example.com": "Ann", "bob@example.com": "Bob", "cat@example.com": "Cat", "eve@example.com": "Eve"}
    for address, name in people.items():
        world.contact(address, name)
    opened: dict[str, list[datetime]] = {address: [] for address in people}
    # The history: three newsletters; Bob opens the first, Eve the second, Ann the third, Cat none.
    for when, subject, reader in ((-200, "Spring news", "bob@example.com"), (-120, "Summer news", "eve@example.com"),
                                  (-30, "Autumn news", "ann@example.com")):
        world.now.set(days(when))
        _history_campaign(world, conn, ws, subject)
        world.open(subject, reader)
        opened[reader].append(days(when))
    history = len(world.smtp.messages)
    assert history == 12

    world.now.set(T0)
    outputs = world.readme("win-back.json")
    assert [o["id"] for o in outputs[:2]] == [1, 2]  # the segments the file names
    assert outputs[-1]["enrolled"] == 4  # the backfill: everyone
    for day in range(0, 101):
        world.at(days(day))
        if day == 1:  # Eve opens the we-miss-you email three hours after the run
            world.now.set(days(1, hours=3))
            world.open("We miss you, Eve", "eve@example.com")
            opened["eve@example.com"].append(days(1, hours=3))
        if day == 10:
            world.contact("dan@example.com", "Dan")  # a new contact: no event, so not in the flow yet
        if day == 14:  # the weekly backfill from cron takes in only the new contact
            assert world.mkt("automations", "backfill", world.automations["win-back.json"], "--yes")["enrolled"] == 1

    sent = sorted(world.inbox(history), key=lambda m: (m[2], m[1]))
    assert sent == [
        ("We miss you, Bob", "bob@example.com", T0),     # last open 200 days ago
        ("We miss you, Eve", "eve@example.com", T0),     # last open 120 days ago
        (LAST_CALL, "bob@example.com", days(14)),        # Bob did not open it; Eve did
        ("We miss you, Ann", "ann@example.com", days(63)),  # her open of day -30 is 93 days old at this check
        (LAST_CALL, "ann@example.com", days(77)),
        ("We miss you, Cat", "cat@example.com", days(90)),  # never opened: 90 days of grace first
        ("We miss you, Eve", "eve@example.com", days(98)),  # her open of day 1 ran out; once more
    ]
    for subject, to, when in sent:  # nobody who opened anything in the 90 days before got one
        assert all(when - moment > timedelta(days=90) for moment in opened[to] if moment < when), (subject, to, when)
    # and each of the four had 90 silent days at some check (Dan, new, is still in his grace)
    assert {to for _, to, _ in sent} == {"ann@example.com", "bob@example.com", "cat@example.com", "eve@example.com"}
    stats = world.stats("win-back.json")
    assert (stats["entered"], stats["completed"], stats["active"]) == (5, 2, 3)
    steps = {s["step_id"]: s for s in stats["versions"][0]["steps"]}
    assert steps["we-miss-you"]["email"]["sent"] == 5 and steps["last-call"]["email"]["sent"] == 2
    assert steps["opened-it?"]["outcomes"] == {"yes": 1, "no": 2}
    assert steps["grace-90-days"]["outcomes"] == {"waited": 2}  # Cat, and Dan (new) who is still in it

"""The webhook step against receivers that misbehave (issue 40): one deadline over the whole
answer, at most 64 KB of its body read, the checked address connected to, no redirect
followed. Before, a receiver that sent its answer a byte at a time held the job runner for
as long as it liked, a 200 MB answer was read whole, and a name that resolved to a public
address and then to 127.0.0.1 sent the signed POST to the loopback."""

from __future__ import annotations

import time
from typing import Any

import pytest

from marketing_cli.services.automations import webhooks
from tests import factories as f
from tests.hostile_http import HostileServer, NetStandIn

DEADLINE = 1.5
MARGIN = 1.0
PUBLIC = "1.2.3.4"


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webhooks, "TIMEOUT_SECONDS", DEADLINE)


@pytest.fixture
def allow_private(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")


def deliver(conn: Any, workspace: dict[str, Any], url: str) -> tuple[float, Any]:
    f.webhook_flow(conn, workspace["id"], url)
    started = time.monotonic()
    f.run_automations(conn)
    elapsed = time.monotonic() - started
    return elapsed, conn.execute("SELECT status, attempts, response_status, last_error FROM automation_webhooks"
                                 ).fetchone()


def test_the_documented_limits() -> None:
    assert webhooks.TIMEOUT_SECONDS == 10.0 and webhooks.ANSWER_BYTES == 64 * 1024


@pytest.mark.parametrize("kind", ["slow_head", "slow_body"])
def test_a_trickled_answer_is_given_up_at_the_deadline_and_retried(conn: Any, workspace: dict[str, Any],
                                                                    short_deadline: None, allow_private: None,
                                                                    kind: str) -> None:
    with HostileServer(kind, lasting=DEADLINE * 4) as server:
        elapsed, row = deliver(conn, workspace, server.url("/hook"))
    assert DEADLINE - 0.05 <= elapsed <= DEADLINE + MARGIN
    assert (row["status"], row["attempts"], row["response_status"]) == ("pending", 1, None)  # not delivered
    assert row["last_error"] == f"no complete answer within {DEADLINE:g} s"
    job = conn.execute("SELECT status, last_error FROM jobs WHERE type = ?", (webhooks.JOB,)).fetchone()
    assert job["status"] == "queued"  # retried with the queue's backoff


@pytest.mark.parametrize("kind", ["endless", "huge"])
def test_only_the_status_and_64_kb_of_a_large_answer_are_read(conn: Any, workspace: dict[str, Any],
                                                              short_deadline: None, allow_private: None,
                                                              kind: str) -> None:
    with HostileServer(kind, lasting=DEADLINE * 4) as server:
        elapsed, row = deliver(conn, workspace, server.url("/hook"))
    assert elapsed < DEADLINE
    assert (row["status"], row["response_status"]) == ("delivered", 200)
    assert max(server.sent) < 32 * 1024 * 1024  # the huge answer declares 200 MB


def test_a_rebinding_name_delivers_to_the_checked_address_only(conn: Any, workspace: dict[str, Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    net = NetStandIn(monkeypatch)
    with HostileServer("ok") as public, HostileServer("ok") as loopback:
        net.names["rebind.example"] = [PUBLIC, "127.0.0.1"]  # TTL 0: public first, then the loopback
        net.routes[PUBLIC] = public.port
        _, row = deliver(conn, workspace, f"http://rebind.example:{loopback.port}/hook")
    assert loopback.requests == []
    assert [r["method"] for r in public.requests] == ["POST"] and row["status"] == "delivered"
    assert public.requests[0]["headers"]["x-mkt-signature"].startswith("sha256=")


def test_a_redirect_to_a_private_address_is_not_followed(conn: Any, workspace: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    net = NetStandIn(monkeypatch)
    with HostileServer("ok") as private, HostileServer("redirect", location="") as public:
        public.location = private.url("/internal")
        net.names["public.example"] = [PUBLIC]
        net.routes[PUBLIC] = public.port
        _, row = deliver(conn, workspace, f"http://public.example:{public.port}/hook")
    assert private.requests == [] and len(public.requests) == 1
    assert (row["status"], row["response_status"], row["last_error"]) == ("pending", 302, "HTTP 302")


def test_a_private_address_fails_for_good_without_a_request(conn: Any, workspace: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    with HostileServer("ok") as private:
        _, row = deliver(conn, workspace, private.url("/hook"))
    assert private.requests == [] and row["status"] == "failed"
    assert "private, loopback or reserved" in row["last_error"]

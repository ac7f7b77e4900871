"""Handing an email send's claimed messages to the mail transport
(services/delivery/sender.py runs the rounds, claim.py claims them, record.py records the answers).

`Send` is everything one send job needs, built once: each variant compiled (compose.py) with
its tracked links registered, the workspace's merge-tag values, the DKIM signer, the
transport as this process sees it, the pace (kernel/pacing.py) and the workspace's shared
pacer (services/account/pace.py), and the provider lanes' (shaping.py). The send loop hands each claimed message to `deliver` in
a pool of `concurrency` threads: each builds the message for its contact (merge tags, its own
URLs), signs it and hands it to its own thread's transport session, so one message's
rendering and signing overlaps the others' network waits.

A failure stays with its message. A message that cannot be composed, or that the server
cannot take (no SMTPUTF8 for a non-ASCII local part), fails at once with its reason; an
unexpected error of the transport counts as a connection problem (its session is dropped);
neither stops the round. A claimed message that the pool reaches after the send halted (the
campaign left SENDING, or the job failed) or after our claim was lost (paused past it) is
not handed over at all: record.py gives it back (HALTED).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import pacing
from marketing_cli.kernel.links import tracked_links
from marketing_cli.kernel.tokens import TokenMaker
from marketing_cli.services.account import pace, workspaces
from marketing_cli.services.contacts.merge_tags import Renderer
from marketing_cli.services.delivery import transport_settings
from marketing_cli.services.delivery.compose import CompiledVariant, Recipient, compile_variant
from marketing_cli.services.delivery.dkim import DkimSigner
from marketing_cli.services.delivery.path_tokens import MessageTokens
from marketing_cli.services.delivery.shaping import Shaper
from marketing_cli.services.delivery.transport import TransportError
from marketing_cli.services.email import domains, senders, stats
from marketing_cli.services.email.preparation import load_variants
from marketing_cli.storage.db import instance_secret

HALTED = "Not sent: the campaign stopped sending."  # a claimed message given back untouched
COMPOSE_FAILED = "the message could not be composed"

log = logging.getLogger("mkt.email.send")


class Send:
    """Everything one send job needs, built once: compiled variants, values, transports."""

    def __init__(self, conn: sqlite3.Connection, row: sqlite3.Row) -> None:
        ws = row["workspace_id"]
        sender = senders.get_sender_identity(conn, ws, row["sender_identity_id"])
        if sender is None:
            raise MktError(400, "The campaign's sender identity no longer exists.")
        domain_name, selector, key = domains.dkim_signing_key(conn, sender["domain_id"])
        signer = DkimSigner(domain_name, selector, key)
        track = bool(conn.execute("SELECT interaction_tracking FROM workspaces WHERE id = ?", (ws,)).fetchone()[0])
        base = workspaces.tracking_base_url(conn, ws)
        reply_to = json.loads(row["reply_to"]) if row["reply_to"] else None
        self.secret = instance_secret(conn)
        self.tokens = TokenMaker(self.secret)  # the keyed HMAC made once (kernel/tokens.py)
        self.variants: dict[str, CompiledVariant] = {}
        self.renderers: dict[str, Renderer] = {}
        for variant in load_variants(conn, row["id"]).values():
            links = stats.register_links(conn, row["id"], variant["id"], tracked_links(variant["body_html"]))
            self.variants[variant["id"]] = compile_variant(
                variant, sender, reply_to, tracking_base=base, campaign_id=row["id"], track=track,
                link_ids=links, signer=signer)
            self.renderers[variant["id"]] = Renderer(conn, ws, preview_text=variant["preview_text"] or "")
        # The envelope sender (MAIL FROM, where bounces go) is on the domain's return-path
        # host, which its CNAME record points at the domain (docs/sending-domains.md).
        code = domains.get_domain(conn, ws, sender["domain_id"])["domain_code"]
        self.envelope_from = f"bounces@{code}.{sender['domain_name']}"
        rate = pacing.read_pace(pacing.EMAIL)
        self.concurrency, self.pacer = rate.concurrency, pace.SharedPacer(ws, pace.EMAIL, rate.rate)
        self.shaper = Shaper(ws)  # the provider lanes' rates (shaping.py)
        self.answered = 0  # answers this job recorded (the circuit breaker reads its rates every CHECK_EVERY)
        self._local = threading.local()
        self._transports: list[Any] = []
        self._lock = threading.Lock()
        self.campaign_id = row["id"]
        # The workspace's transport as this process sees it (flags and variables first); an
        # outbox folder is counted on the campaign, so statistics can say where mail went.
        self.selection = transport_settings.selection(conn, ws)
        self.outbox = str(self.selection.folder) if self.selection.kind == "outbox" else None
        self.halt = threading.Event()  # set when the campaign left SENDING: claimed messages are given back
        self.claim = jobs.current_run()  # the token our claimed rows carry, renewed with the job's lease

    def build(self, message: sqlite3.Row) -> bytes:
        """The signed message of one claimed row (merge tags for its contact, its own URLs)."""
        compiled = self.variants[message["variant_id"]]
        token = MessageTokens.make(self.tokens, message["id"])
        contact = None if message["data"] is None else {
            "email": message["contact_email"], "phone": message["phone"], "data": message["data"]}
        values = self.renderers[message["variant_id"]].values_for(contact, extra=compiled.urls(token))
        return compiled.build(Recipient(message["id"], message["email"], token), values)

    def transport(self) -> Any:
        transport = getattr(self._local, "transport", None)
        if transport is None:
            transport = self._local.transport = self.selection.open()
            with self._lock:
                self._transports.append(transport)
        return transport

    def smtp_id(self, message: sqlite3.Row) -> str:
        return self.variants[message["variant_id"]].smtp_message_id(message["id"])

    def deliver(self, message: sqlite3.Row) -> tuple[int, str | None, bool]:
        """Build, sign and hand one message to this thread's transport: (message id, error or
        None, permanent). Building in the pool's threads overlaps one message's rendering and
        signing with the others' network waits.

        Never raises: whatever goes wrong with one recipient is that message's answer, so the
        round's other answers are recorded with it (an exception here would leave messages
        the server accepted unrecorded, and the job's next attempt would send them again).
        """
        if self.halt.is_set() or not self.claim.held():  # (paused past our claim: another worker has it)
            return message["id"], HALTED, False
        try:
            raw = self.build(message)
        except Exception as exc:  # noqa: BLE001 - this recipient's message only
            log.exception("message %s of campaign %s could not be composed", message["id"], self.campaign_id)
            return message["id"], f"{COMPOSE_FAILED}: {type(exc).__name__}: {exc}", True
        try:
            self.transport().send(raw, self.envelope_from, [message["email"]])
        except TransportError as exc:
            return message["id"], str(exc), exc.permanent
        except Exception as exc:  # noqa: BLE001 - not the server's answer: tried again, like a connection problem
            log.exception("sending message %s of campaign %s failed", message["id"], self.campaign_id)
            self.drop_transport()  # its session is in an unknown state
            return message["id"], f"sending failed: {type(exc).__name__}: {exc}", False
        return message["id"], None, False

    def drop_transport(self) -> None:
        transport, self._local.transport = getattr(self._local, "transport", None), None
        if transport is not None:
            with contextlib.suppress(Exception):  # a broken session: nothing to keep
                transport.close()

    def close(self) -> None:
        for transport in self._transports:
            transport.close()

"""SMS providers: where a campaign's messages go once they are charged.

A provider takes a batch of `Outgoing` messages and answers one `Receipt` per message:
its own reference and whether it took the message. Expansion hands messages over in
batches (docs/sms.md):

    pending --claim (transaction)--> sending --provider.send--> sent (handed_at, provider_ref)

A provider whose `in_database` is True (the outbox) writes inside the claim's own
transaction, so a crash can never leave a message handed over but not marked; a network
provider (Twilio, a later step) is called between two transactions, so a crash between
them can send at most one batch twice (CONTRACT section 7's bound).

The default provider is the outbox: an `sms_outbox` table that `mkt sms outbox` lists.
`get_provider(conn, workspace_id)` is the one place that picks a workspace's provider.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from marketing_cli.kernel import clock, pacing
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.services.account import pace

log = logging.getLogger("mkt.sms")


@dataclass(frozen=True)
class Outgoing:
    message_id: int
    campaign_id: str
    sender: str
    to: str
    body: str
    segments: int
    closes_at: str | None = None  # RFC 3339 UTC: the quiet-hours window closes then (gate.py); None: never


@dataclass(frozen=True)
class Receipt:
    message_id: int
    accepted: bool
    reference: str | None = None
    error: str | None = None
    code: str | None = None
    held: bool = False  # not tried: the quiet-hours window closed first; the message goes back in line
    # An earlier try may have reached the provider (no answer after the request was sent, or
    # a 5xx): the message may have gone out once more than the one recorded (recorded uncertain).
    uncertain: bool = False


class SmsProvider(Protocol):
    name: str
    in_database: bool

    def send(self, conn: sqlite3.Connection, workspace_id: int, messages: list[Outgoing]) -> list[Receipt]: ...


class OutboxProvider:
    """Messages land in `sms_outbox` (one row per message, written at most once)."""

    name = "outbox"
    in_database = True

    def send(self, conn: sqlite3.Connection, workspace_id: int, messages: list[Outgoing]) -> list[Receipt]:
        now = clock.now()
        conn.executemany(
            "INSERT OR IGNORE INTO sms_outbox (workspace_id, message_id, campaign_id, sender, recipient, body,"
            " segments, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(workspace_id, m.message_id, m.campaign_id, m.sender, m.to, m.body, m.segments, now) for m in messages],
        )
        return [Receipt(m.message_id, True, f"outbox:{m.message_id}") for m in messages]

    def send_claimed(self, conn: sqlite3.Connection, workspace_id: int, campaign_id: str, sender: str,
                     message: str, token: str) -> str:
        """The same as `send` for every message of the campaign claimed under `token` (state
        'sending'), in one SQL statement (expansion's fast path); returns the reference prefix
        ('outbox:<message id>')."""
        conn.execute(
            "INSERT OR IGNORE INTO sms_outbox (workspace_id, message_id, campaign_id, sender, recipient, body, segments,"
            " created_at) SELECT ?, id, campaign_id, ?, phone, COALESCE(body, ?), segments, ? FROM sms_messages"
            " WHERE claim_token = ? AND status = 'sending' AND campaign_id = ?",
            (workspace_id, sender, message, clock.now(), token, campaign_id),
        )
        return "outbox:"


DEFAULT_TWILIO_URL = "https://api.twilio.com"
_SID = re.compile(r"^AC[0-9a-fA-F]{32}$")
RETRIES = 4              # a 429, 5xx or network error is tried this many more times
BACKOFF_SECONDS = 0.5    # doubled at each retry (Retry-After when Twilio gives one, capped at 30 s)
# Requests in flight at once over one pooled client, and requests per second: MKT_SMS_CONCURRENCY
# (default 8) and MKT_SMS_RATE (default 0, unlimited), read by kernel/pacing.py. The rate is the
# workspace's, shared by all its workers on any machine (services/account/pace.py): a batch
# books its first tries with one statement, a retry its own start.


class TwilioProvider:
    """Twilio's Messages API over one pooled httpx client (CONTRACT section 8).

    A 2xx answer's `sid` becomes the message's provider_ref; a 4xx (other than 429) fails the
    message at once with Twilio's `code` and `message`; 429, 5xx and network errors are tried
    again with exponential backoff, and fail the message when the retries run out.
    """

    name = "twilio"
    in_database = False

    def __init__(self, account_sid: str, auth_token: str, base_url: str, status_callback: str | None,
                 *, concurrency: int = pacing.SMS.default_concurrency, rate: float = 0.0, retries: int = RETRIES,
                 backoff: float = BACKOFF_SECONDS, workspace_id: int = 0) -> None:
        self.account_sid = account_sid
        self._auth = (account_sid, auth_token)
        self.url = f"{base_url.rstrip('/')}/2010-04-01/Accounts/{account_sid}/Messages.json"
        self.status_callback = status_callback
        self.concurrency = max(1, concurrency)
        self.pacer = pace.SharedPacer(workspace_id, pace.SMS, rate)
        self.retries = retries
        self.backoff = backoff
        self.claim: Any = None  # the job run whose claim the messages are under (jobs.Run): held() or stop
        self.watch: Any = None  # handoff.RevocationWatch: stopped(id) once the message's contact revoked
        self.erased: set[int] = set()  # messages whose recipient was erased while claimed (handoff.keep_claimed)

    def __repr__(self) -> str:  # never the token
        return f"TwilioProvider(account_sid={self.account_sid!r}, url={self.url!r})"

    def _post(self, conn: sqlite3.Connection, client: Any, m: Outgoing, start: float | None = None) -> Receipt:
        """One message's request (and its retries). `start`: the time.monotonic() instant its
        first try was booked for with its batch (None: it books its own)."""
        import time

        import httpx

        form = {"To": m.to, "From": m.sender, "Body": m.body}
        if self.status_callback:
            form["StatusCallback"] = self.status_callback
        last_code, last_error = "network", "No answer from Twilio."
        retry_after: float | None = None
        # A try that may have reached Twilio: it answered 5xx, or did not answer once the request
        # was on its way (a read timeout, a dropped connection). The retry may text the recipient a
        # second time (Twilio's Messages API has no idempotency key), so the message is recorded
        # uncertain, as a dead worker's in-flight messages are; a try that never connected is safe.
        maybe_sent = False
        for attempt in range(self.retries + 1):
            if attempt:
                delay = retry_after if retry_after is not None else self.backoff * (2 ** (attempt - 1))
                time.sleep(min(30.0, delay))
                retry_after = None
            if attempt or start is None:  # every request counts against the workspace's rate, retries included
                self.pacer.wait(conn)
            elif start > time.monotonic():
                time.sleep(start - time.monotonic())
            if self.claim is not None and not self.claim.held():  # paused past the claim: another worker has it
                return Receipt(m.message_id, False, held=True, uncertain=maybe_sent)
            if m.message_id in self.erased:  # its recipient was erased while it waited its turn: never posted
                return Receipt(m.message_id, False, held=True, uncertain=maybe_sent)
            if m.closes_at is not None and clock.now() >= m.closes_at:  # quiet hours began while it waited its turn
                return Receipt(m.message_id, False, held=True, uncertain=maybe_sent)
            if self.watch is not None and self.watch.stopped(m.message_id):  # its contact revoked: back in line,
                return Receipt(m.message_id, False, held=True, uncertain=maybe_sent)  # the next claim cancels it
            try:
                response = client.post(self.url, data=form, auth=self._auth)
            except httpx.HTTPError as exc:
                last_code, last_error = "network", f"No answer from Twilio ({type(exc).__name__})."
                maybe_sent = maybe_sent or not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout,
                                                                     httpx.PoolTimeout))
                continue
            payload = _json(response)
            if 200 <= response.status_code < 300:
                sid = payload.get("sid") if isinstance(payload, dict) else None
                if isinstance(sid, str) and sid:
                    return Receipt(m.message_id, True, sid, uncertain=maybe_sent)
                return Receipt(m.message_id, False, None, "Twilio's answer had no sid.", "invalid_answer",
                               uncertain=True)
            code = str(payload.get("code")) if isinstance(payload, dict) and payload.get("code") is not None \
                else str(response.status_code)
            message = payload.get("message") if isinstance(payload, dict) and isinstance(payload.get("message"), str) \
                else f"HTTP {response.status_code}"
            if response.status_code == 429 or response.status_code >= 500:
                last_code, last_error = code, message
                maybe_sent = maybe_sent or response.status_code >= 500
                header = response.headers.get("Retry-After", "")
                seconds = parse_digits(header, 9)
                retry_after = float(seconds) if seconds is not None else None
                continue
            return Receipt(m.message_id, False, None, message, code, uncertain=maybe_sent)
        return Receipt(m.message_id, False, None, last_error, last_code, uncertain=maybe_sent)

    def send(self, conn: sqlite3.Connection, workspace_id: int, messages: list[Outgoing]) -> list[Receipt]:
        import time
        from concurrent.futures import ThreadPoolExecutor

        client = _client(self.concurrency)
        # The batch's first tries are booked at once (one statement for the batch: the i-th
        # starts i x interval after the first); a retry books its own start, from the pool's
        # thread, on `conn` (one at a time: the pacer's lock). The caller holds no transaction
        # during a network provider's call.
        starts: list[float | None] = [None] * len(messages)
        if self.pacer.interval and messages:
            first = time.monotonic() + self.pacer.book(conn, len(messages))
            starts = [first + i * self.pacer.interval for i in range(len(messages))]
        if self.concurrency == 1 or len(messages) == 1:
            receipts = [self._post(conn, client, m, at) for m, at in zip(messages, starts)]
        else:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(messages))) as pool:
                receipts = list(pool.map(lambda m, at: self._post(conn, client, m, at), messages, starts))
        for r in receipts:  # each one a message the recipient may have got twice: said, as a take-over is
            if r.uncertain:
                log.warning("SMS message %s: a request that may have reached Twilio got no usable answer and was "
                            "tried again or given up (recorded uncertain)", r.message_id)
        return receipts


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


_clients: dict[int, Any] = {}
_clients_lock = threading.Lock()  # two hand-offs of one process (threads) make one client, not two


def _client(concurrency: int) -> Any:
    """One pooled httpx client per process (and pool size), kept for the process's life.

    Its pool has no cap of its own: each hand-off sends on at most `concurrency` threads, and a
    runner runs several hand-offs at once (jobs/pool.py: two campaigns, a send and its helper, a
    confirmation beside them). A cap of `concurrency` made their requests queue for connections,
    and httpcore's pool can close a connection it has already given to a queued request
    (encode/httpcore#1110): the request was on its way, its answer lost (`ReadError: Bad file
    descriptor`), so it was retried and the recipient texted twice (recorded uncertain)."""
    import httpx

    with _clients_lock:
        client = _clients.get(concurrency)
        if client is None:
            client = httpx.Client(timeout=httpx.Timeout(30.0, connect=10.0),
                                  limits=httpx.Limits(max_connections=None, max_keepalive_connections=None))
            _clients[concurrency] = client
    return client


def _settings(conn: sqlite3.Connection, workspace_id: int) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM sms_provider_settings WHERE workspace_id = ?", (workspace_id,)).fetchone()


def status_callback_url(conn: sqlite3.Connection, workspace_id: int) -> str:
    from marketing_cli.services.account.workspaces import tracking_base_url

    return f"{tracking_base_url(conn, workspace_id)}/webhooks/twilio/status"


def get_provider(conn: sqlite3.Connection, workspace_id: int, *, paced: bool = True) -> SmsProvider:
    """The workspace's provider: the outbox unless `mkt sms provider set twilio` chose Twilio.
    `paced=False` (a revocation's confirmation, due within minutes): not spaced by MKT_SMS_RATE,
    so it never waits behind the starts a running campaign has booked."""
    row = _settings(conn, workspace_id)
    if row is None or row["provider"] != "twilio":
        return OutboxProvider()
    speed = pacing.read_pace(pacing.SMS)
    return TwilioProvider(row["account_sid"], row["auth_token"], row["base_url"] or DEFAULT_TWILIO_URL,
                          status_callback_url(conn, workspace_id), concurrency=speed.concurrency,
                          rate=speed.rate if paced else 0.0, retries=RETRIES, backoff=BACKOFF_SECONDS,
                          workspace_id=workspace_id)


def show_provider(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    """`mkt sms provider show`: the provider, account SID and base URL, never the token."""
    row = _settings(conn, workspace_id)
    if row is None or row["provider"] != "twilio":
        return {"provider": "outbox", "account_sid": None, "base_url": None}
    return {"provider": "twilio", "account_sid": row["account_sid"], "base_url": row["base_url"]}


def set_provider(conn: sqlite3.Connection, workspace_id: int, provider: Any, *, account_sid: Any = None,
                 auth_token: Any = None, base_url: Any = None) -> dict[str, Any]:
    """`mkt sms provider set outbox|twilio` (operator only); answers what `show` answers."""
    from urllib.parse import urlsplit

    from marketing_cli.errors import MktError
    from marketing_cli.storage.db import transaction

    if provider == "outbox":
        if account_sid is not None or auth_token is not None or base_url is not None:
            raise MktError(400, "The outbox provider takes no account SID, auth token or base URL.")
        with transaction(conn):
            conn.execute("DELETE FROM sms_provider_settings WHERE workspace_id = ?", (workspace_id,))
        return show_provider(conn, workspace_id)
    if provider != "twilio":
        raise MktError(400, f"The provider must be outbox or twilio, not '{provider}'.")
    if not isinstance(account_sid, str) or not _SID.match(account_sid.strip()):
        raise MktError(400, "The Twilio account SID must be AC followed by 32 hexadecimal characters.")
    if not isinstance(auth_token, str) or not auth_token.strip() or any(ch.isspace() for ch in auth_token.strip()):
        raise MktError(400, "The Twilio auth token must be a non-empty string without spaces.")
    url = DEFAULT_TWILIO_URL if base_url is None else base_url
    parts = urlsplit(url.strip()) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise MktError(400, "The Twilio base URL must be an http:// or https:// URL without a query.")
    url = url.strip().rstrip("/")
    from marketing_cli.kernel import clock as _clock

    with transaction(conn):
        conn.execute(
            "INSERT INTO sms_provider_settings (workspace_id, provider, account_sid, auth_token, base_url, updated_at)"
            " VALUES (?, 'twilio', ?, ?, ?, ?) ON CONFLICT (workspace_id) DO UPDATE SET provider = 'twilio',"
            " account_sid = excluded.account_sid, auth_token = excluded.auth_token, base_url = excluded.base_url,"
            " updated_at = excluded.updated_at",
            (workspace_id, account_sid.strip(), auth_token.strip(), url, _clock.now()))
    return show_provider(conn, workspace_id)


def list_outbox(conn: sqlite3.Connection, workspace_id: int, *, campaign_id: str | None = None,
                limit: int = 50) -> list[dict[str, Any]]:
    """`mkt sms outbox`: the newest messages the outbox provider took."""
    from marketing_cli.errors import MktError

    if not 1 <= limit <= 1000:
        raise MktError(400, "The limit must be between 1 and 1000.")
    sql = "SELECT * FROM sms_outbox WHERE workspace_id = ?"
    params: list[Any] = [workspace_id]
    if campaign_id is not None:
        sql += " AND campaign_id = ?"
        params.append(campaign_id)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, limit)).fetchall()
    return [{"id": r["id"], "message_id": r["message_id"], "campaign_id": r["campaign_id"], "from": r["sender"],
             "to": r["recipient"], "body": r["body"], "segments": r["segments"], "created_at": r["created_at"]}
            for r in rows]


def close_clients() -> None:
    """Close the pooled httpx clients (tests, and a process that is shutting down)."""
    while _clients:
        _clients.popitem()[1].close()

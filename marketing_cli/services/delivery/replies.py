"""How each SMTP reply of the relay is read: throttle, transient or permanent, from a table of
rules kept as data (docs/deliverability.md "Reply rules"; the model is KumoMTA's shaping.toml,
whose automation rules match a provider's reply text and suspend or slow the provider).

The table (`replies.csv` beside this module, or the operator's copy named by MKT_REPLY_RULES,
read again when it changes) holds rows of lane, code, status, text, class, action, duration and
source. A reply is matched on its code (421, or a class 4xx / 5xx), its enhanced status code
(RFC 3463: 4.7.28, or a prefix 4.7.*) and a regular expression searched in its text; the first
row that matches wins. A reply no row matches is read as RFC 5321 section 4.2.1 reads its first
digit (4: transient, 5: permanent); an answer without a reply code (the connection failed, the
message could not be composed) keeps the hand-off's own reading (`permanent` or transient).

    throttle    not a failure and not an attempt: the message goes back to the queue, its lane's
                rate is cut (shaping.py), and `suspend` holds the lane for `duration`
    transient   tried again after an exponential backoff (record.py)
    permanent   failed at once
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from marketing_cli.errors import MktError
from marketing_cli.kernel.data_tables import DataTable, csv_rows

TABLE_ENV = "MKT_REPLY_RULES"
BUILT_IN = Path(__file__).with_name("replies.csv")
LANES = ("gmail", "yahoo", "microsoft", "apple", "other")  # CONTRACT section 11
THROTTLE, TRANSIENT, PERMANENT = "throttle", "transient", "permanent"
CLASSES = (THROTTLE, TRANSIENT, PERMANENT)
ACTIONS = ("slow", "suspend")
HEADER = ["lane", "code", "status", "text", "class", "action", "duration", "source"]
_CODE = re.compile(r"^(?:[45]\d\d|[45]xx)$")
_STATUS = re.compile(r"^[245]\.\d{1,3}(?:\.(?:\d{1,3}|\*))?$|^[245]\.\*$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# The hand-off's error texts end with the server's reply: "...: 421 4.7.28 text"
_REPLY = re.compile(r"(?:^|:\s)([245]\d\d)(?:[ -]([245]\.\d{1,3}\.\d{1,3}))?\b[ -]?(.*)$", re.S)


@dataclass(frozen=True)
class Rule:
    lane: str
    code: str
    status: str
    text: re.Pattern[str] | None
    cls: str
    action: str
    duration: float                # seconds (a suspension), 0 otherwise
    source: str
    line: int

    def matches(self, lane: str, code: int, status: str | None, text: str) -> bool:
        if self.lane != "*" and self.lane != lane:
            return False
        if self.code.endswith("xx") and str(code)[0] != self.code[0] or not self.code.endswith("xx") \
                and str(code) != self.code:
            return False
        if self.status:
            if status is None:
                return False
            if self.status.endswith(".*"):
                if not (status + ".").startswith(self.status[:-1]):
                    return False
            elif status != self.status:
                return False
        return self.text is None or self.text.search(text) is not None


@dataclass(frozen=True)
class Reply:
    """One answer read: its class, the rule that decided it (None: the first digit did), and the
    reply itself (code, enhanced status, text) as the server gave it."""

    cls: str
    rule: Rule | None
    code: int | None
    status: str | None
    text: str

    @property
    def shown(self) -> str:
        """"421 4.7.28 text" as the relay answered (for a lane's reason)."""
        return " ".join(str(part) for part in (self.code, self.status, self.text) if part).strip()[:200]


def parse_seconds(text: str) -> float | None:
    match = _DURATION.match(text.strip().lower())
    return None if match is None else float(match.group(1)) * _UNITS[match.group(2)]


def parse_table(text: str, origin: str) -> tuple[Rule, ...]:
    """The rules of a reply-rules CSV; MktError(400) naming the line of the first bad row."""
    rules: list[Rule] = []
    header_seen = False
    for n, cells in csv_rows(text):
        if not header_seen:
            if [c.lower() for c in cells[:len(HEADER)]] != HEADER:
                raise MktError(400, f"{origin} line {n}: the header must be {','.join(HEADER)}.")
            header_seen = True
            continue
        if len(cells) < 5:
            raise MktError(400, f"{origin} line {n}: expected {','.join(HEADER)}.")
        cells += [""] * (len(HEADER) - len(cells))
        lane, code, status, pattern, cls, action, duration = (c.lower() if i != 3 else c
                                                              for i, c in enumerate(cells[:7]))
        source = ", ".join(cells[7:]).strip()
        if lane != "*" and lane not in LANES:
            raise MktError(400, f"{origin} line {n}: '{lane}' is not a lane ({', '.join(LANES)} or *).")
        if not _CODE.match(code):
            raise MktError(400, f"{origin} line {n}: '{code}' is not a reply code (421, 4xx, 5xx).")
        if status and not _STATUS.match(status):
            raise MktError(400, f"{origin} line {n}: '{status}' is not an enhanced status code (4.7.28, 4.7.*).")
        if cls not in CLASSES:
            raise MktError(400, f"{origin} line {n}: '{cls}' is not a class ({', '.join(CLASSES)}).")
        if cls == THROTTLE and action not in ACTIONS:
            raise MktError(400, f"{origin} line {n}: a throttle's action is slow or suspend, not '{action}'.")
        if cls != THROTTLE and action:
            raise MktError(400, f"{origin} line {n}: only a throttle has an action.")
        seconds = parse_seconds(duration) if duration else 0.0
        if seconds is None or (action == "suspend") != bool(seconds):
            raise MktError(400, f"{origin} line {n}: a suspension needs a duration (90s, 15m, 2h) and only "
                                f"a suspension has one, not '{duration}'.")
        try:
            compiled = re.compile(pattern, re.I) if pattern else None
        except re.error as exc:
            raise MktError(400, f"{origin} line {n}: the text is not a regular expression ({exc}).") from None
        rules.append(Rule(lane, code, status, compiled, cls, action, seconds, source, n))
    if not header_seen:
        raise MktError(400, f"{origin}: no header line ({','.join(HEADER)}).")
    return tuple(rules)


TABLE = DataTable(TABLE_ENV, BUILT_IN, parse_table, "reply-rules table")


def check_environment() -> None:
    """`mkt jobs run` and `mkt serve` refuse to start on a reply-rules table they cannot read."""
    TABLE.current()


def parse_reply(error: str) -> tuple[int | None, str | None, str]:
    """(code, enhanced status, text) of a hand-off's error text; code None when it holds no reply."""
    match = _REPLY.search(error)
    if match is None:
        return None, None, error
    return int(match.group(1)), match.group(2), match.group(3).strip()


def classify(error: str, lane: str | None, permanent: bool, rules: tuple[Rule, ...] | None = None) -> Reply:
    """How the answer `error` (the hand-off's text; `permanent` its own reading) of a message in
    `lane` is handled: the first rule that matches, else the reply code's first digit."""
    code, status, text = parse_reply(error)
    if code is None or code < 400:
        return Reply(PERMANENT if permanent else TRANSIENT, None, None, None, error)
    for rule in rules if rules is not None else TABLE.current():
        if rule.matches(lane or "other", code, status, text):
            return Reply(rule.cls, rule, code, status, text)
    return Reply(PERMANENT if code >= 500 else TRANSIENT, None, code, status, text)

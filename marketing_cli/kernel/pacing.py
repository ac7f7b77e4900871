"""How fast a send goes: concurrency and rate from the environment (the pacer that holds the
rate for a whole workspace, across processes, is services/account/pace.py).

One piece for every channel (docs/sending.md, docs/sms.md):

    email   MKT_SEND_CONCURRENCY (default 10)   MKT_SEND_RATE (default 0)
    SMS     MKT_SMS_CONCURRENCY  (default 8)    MKT_SMS_RATE  (default 0)

Concurrency is the number of messages in flight at once in one worker (1-100); rate is
messages per second for the workspace as a whole, however many workers send, 0 meaning as
fast as the other side takes them. A value that is not one of these
is refused with a message that names the variable: `mkt jobs run` and `mkt serve` check
every variable before they start (`check_environment`), so a typo stops the command at
once instead of failing a campaign's job later.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from marketing_cli.errors import MktError

MAX_CONCURRENCY = 100
MAX_RATE = 100_000.0


@dataclass(frozen=True)
class Channel:
    prefix: str               # MKT_SEND or MKT_SMS
    default_concurrency: int
    default_rate: float = 0.0


EMAIL = Channel("MKT_SEND", 10)
SMS = Channel("MKT_SMS", 8)


@dataclass(frozen=True)
class Pace:
    concurrency: int
    rate: float               # messages per second; 0 = unlimited


def _concurrency(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_CONCURRENCY:
        raise MktError(400, f"{name} must be a whole number from 1 to {MAX_CONCURRENCY}, not '{raw}'.")
    return value


def _rate(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_RATE:  # also refuses nan and inf
        raise MktError(400, f"{name} must be a number of messages per second from 0 (unlimited) to "
                            f"{MAX_RATE:,.0f}, not '{raw}'.")
    return value


def read_pace(channel: Channel) -> Pace:
    """The channel's concurrency and rate from the environment (defaults when unset or empty)."""
    return Pace(_concurrency(f"{channel.prefix}_CONCURRENCY", channel.default_concurrency),
                _rate(f"{channel.prefix}_RATE", channel.default_rate))


def check_environment() -> None:
    """Raise MktError for the first bad pacing variable of any channel (commands that send call it first)."""
    for channel in (EMAIL, SMS):
        read_pace(channel)


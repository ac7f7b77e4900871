"""Per-recipient tracking tokens: unguessable, unforgeable, and free to check.

A token is the message row's integer id followed by a truncated HMAC-SHA256 of
(kind, id) under the installation's secret, written in URL-safe base64 without padding:

    token = b64url(id as 5..8 bytes || HMAC(secret, kind || id)[:mac_bytes])

(The id is any non-negative integer: a test email's view-online token packs two 12-byte
ids into one, 24 bytes, and is 46 characters long; services/delivery/test_emails.py.)

- Nothing in a token tells anything about another recipient's: ids are not secret, but a
  token for id N+1 needs the MAC, which needs the secret (2^-80 per guess with 10 bytes).
- Checking a token is one HMAC and a primary-key lookup: no token index, no table scan.
- `kind` separates uses (open pixel, click, unsubscribe, SMS link): a token made for one
  cannot be replayed as another.

The secret is 32 random bytes made on first use and kept in the database
(`instance_secrets`, read by db.instance_secret), so tokens stay valid across restarts and between `mkt serve` and
`mkt jobs run` on the same file.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import Any

EMAIL_MAC_BYTES = 10   # 80 bits: email links can afford a long token
SMS_MAC_BYTES = 6      # 48 bits: SMS links pay per character (docs/sms.md)
MAX_TOKEN_LENGTH = 48  # characters: a 24-byte id and an email MAC; longer input is refused unread
# The URL-safe alphabet only: the decoder would otherwise skip foreign characters, so that
# `ab.cd` and `abcd` named the same token. With the canonical check below, a token has one spelling.
_ALPHABET = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)


def _mac(secret: bytes, kind: str, number: int, size: int) -> bytes:
    return hmac.new(secret, kind.encode() + b":" + str(number).encode(), hashlib.sha256).digest()[:size]


def _id_bytes(number: int) -> bytes:
    return number.to_bytes(max(5, (number.bit_length() + 7) // 8), "big")


def make_token(secret: bytes, kind: str, number: int, mac_bytes: int = EMAIL_MAC_BYTES) -> str:
    raw = _id_bytes(number) + _mac(secret, kind, number, mac_bytes)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class TokenMaker:
    """`make_token` for many ids under one secret: the keyed HMAC state (the secret's inner and
    outer pads hashed) is made once and copied per token, which saves about half of each
    token's cost (a message makes six, services/delivery/path_tokens.py). Same tokens."""

    __slots__ = ("_keyed", "_kinds")

    def __init__(self, secret: bytes) -> None:
        self._keyed = hmac.new(secret, digestmod=hashlib.sha256)
        self._kinds: dict[str, Any] = {}  # kind -> the keyed state with `kind:` hashed (`make_all`)

    def make(self, kind: str, number: int, mac_bytes: int = EMAIL_MAC_BYTES) -> str:
        mac = self._keyed.copy()
        mac.update(kind.encode() + b":" + str(number).encode())
        raw = _id_bytes(number) + mac.digest()[:mac_bytes]
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    def make_all(self, kinds: tuple[str, ...], number: int, mac_bytes: int = EMAIL_MAC_BYTES) -> list[str]:
        """`make` of each kind for one id: the id's bytes and digits made once, and each kind's
        state copied with its `kind:` prefix already hashed (made on first use)."""
        digits, prefix = str(number).encode(), _id_bytes(number)
        tokens = []
        for kind in kinds:
            state = self._kinds.get(kind)
            if state is None:
                state = self._keyed.copy()
                state.update(kind.encode() + b":")
                self._kinds[kind] = state
            mac = state.copy()
            mac.update(digits)
            tokens.append(base64.urlsafe_b64encode(prefix + mac.digest()[:mac_bytes]).rstrip(b"=").decode("ascii"))
        return tokens


def read_token(secret: bytes, kind: str, token: str, mac_bytes: int = EMAIL_MAC_BYTES) -> int | None:
    """The id a token was made for, or None when it is malformed or forged."""
    if not isinstance(token, str) or not 8 <= len(token) <= MAX_TOKEN_LENGTH or _ALPHABET.fullmatch(token) is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError:
        return None
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token:
        return None  # non-canonical: trailing bits set, or a length no encoder writes
    if len(raw) < 5 + mac_bytes:
        return None
    number = int.from_bytes(raw[:-mac_bytes], "big")
    if _id_bytes(number) != raw[:-mac_bytes]:  # one spelling per id: no alternate encodings
        return None
    return number if hmac.compare_digest(raw[-mac_bytes:], _mac(secret, kind, number, mac_bytes)) else None

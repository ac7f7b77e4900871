"""DKIM signing (RFC 6376) for outgoing messages: RSA-SHA256, relaxed/relaxed.

    signer = DkimSigner("example.com", "mkt", domain_private_key_pem)   # once per domain
    signed = signer.sign(message_bytes)                                  # once per message

    fixed = signer.field(b"From: News <news@example.com>")              # once per send
    signed = signer.sign_fields([fixed, signer.field(b"To: ..."), ...], body)   # per message

A campaign signs up to 100,000 messages with one key, so everything that does not depend
on the message is done once in the constructor: the PEM is parsed into an OpenSSL key
(`cryptography`; an RSA-2048 signature costs about 0.7 ms there against 7.5 ms in dkimpy's
pure-Python RSA), the tag list is pre-built. Per message the signer splits the header
block, canonicalises only the headers it signs, hashes the canonical body in one pass of
C-level byte operations and signs the SHA-256 digest of the header data.

What is signed (the `h=` tag): every header of `headers` present in the message, each
occurrence, bottom-up as RFC 6376 section 5.4.2 says, then `From` once more ("over-signed":
a verifier then rejects a message to which anyone appended a second From). The default
list covers From, To, Subject, Date, Message-ID and both List-Unsubscribe headers, plus
Reply-To, Cc, MIME-Version and Content-Type when present. Headers absent from the message
are left out of `h=` (except the over-signed From), so an MTA that adds a missing Date or
Message-ID does not break the signature. A custom `headers` list must include From (RFC
6376 requires it); names repeated in it count once.

A sender that writes the message itself (services/delivery/compose.py) gives it as header
fields and body (`sign_fields`): the header fields the same for every recipient (From,
Reply-To, MIME-Version, Content-Type) are split and canonicalised once per send
(`field`), and no message is parsed back; the bytes and signature are those `sign` gives
for the joined message.

The message must be RFC 5322 bytes. Line ends are made CRLF (bare LF or CR converted) and
a final CRLF is added when the body lacks one, so the bytes returned are exactly the bytes
the signature covers; the `DKIM-Signature:` header is prepended, folded below 78
characters per line, with `b=` last.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Iterable, Sequence

DEFAULT_HEADERS = (
    "From", "Reply-To", "To", "Cc", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type",
    "List-Unsubscribe", "List-Unsubscribe-Post",
)
OVERSIGNED = ("from",)
LINE_LIMIT = 78

# runs of blanks other than one lone space (replacing every single space would cost a
# regex substitution per word)
_WSP_RUN = re.compile(rb"\t[ \t]*| [ \t]+")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_FOLD = re.compile(rb"\r\n(?=[ \t])")


class DkimSigner:
    """Signs messages for one domain and selector with one RSA private key (PEM)."""

    def __init__(self, domain: str, selector: str, private_key_pem: bytes | str,
                 headers: Iterable[str] = DEFAULT_HEADERS) -> None:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

        pem = private_key_pem.encode("ascii") if isinstance(private_key_pem, str) else private_key_pem
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError("The DKIM private key is not a readable unencrypted PEM key.") from exc
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("The DKIM private key must be an RSA key (a=rsa-sha256).")
        self._key = key
        self._padding = padding.PKCS1v15()
        self._prehashed = utils.Prehashed(hashes.SHA256())
        self.domain = _a_label(domain)
        self.selector = _a_label(selector)
        self.headers = tuple(dict.fromkeys(name.strip().lower() for name in headers))  # every occurrence is signed anyway
        if not self.headers or any(not _is_field_name(name) for name in self.headers):
            raise ValueError("DKIM header names must be non-empty field names without ':' or spaces.")
        if "from" not in self.headers:
            raise ValueError("DKIM signatures must cover the From header (RFC 6376 section 5.4).")
        self._fixed_tags = ["v=1", "a=rsa-sha256", "c=relaxed/relaxed", f"d={self.domain}", f"s={self.selector}"]
        self._names = tuple((name, name.encode("ascii")) for name in self.headers)
        self._signs = frozenset(encoded for _, encoded in self._names)
        self._heads: dict[tuple[str, int, int], bytes] = {}  # `_head`'s folded layouts
        self._orders: dict[tuple[bytes, ...], tuple[str, tuple[int, ...]]] = {}  # `_select`'s, by field names

    def sign(self, message: bytes, *, timestamp: int | None = None) -> bytes:
        """The message (CRLF line ends) with a `DKIM-Signature:` header prepended."""
        message = _crlf(message)
        split = message.find(b"\r\n\r\n")
        if split == -1:
            header_block, body = message, b""
            if not header_block.endswith(b"\r\n"):
                message = header_block = header_block + b"\r\n"
        else:
            header_block, body = message[: split + 2], message[split + 4:]
            if body and not body.endswith(b"\r\n"):
                body += b"\r\n"
                message += b"\r\n"
        fields = [(name, raw, b"") for name, raw in _parse_header_block(header_block)]
        return self._signed(fields, body, message, timestamp)

    def field(self, raw: bytes) -> tuple[bytes, bytes, bytes]:
        """One header field for `sign_fields`, given as written (`Name: value`, no final CRLF;
        folded lines joined by CRLF and a blank): (its lowercase name, `raw`, its relaxed
        canonical form with CRLF when this signer signs it, else b"")."""
        name = raw.split(b":", 1)[0].strip().lower()
        return name, raw, _canonical_header(raw) + b"\r\n" if name in self._signs else b""

    def sign_fields(self, fields: Sequence[tuple[bytes, bytes, bytes]], body: bytes, *,
                    timestamp: int | None = None) -> bytes:
        """`sign` of the message made of `fields` (from `field`, in order) and `body` (CRLF
        line ends, as the caller guarantees: nothing is converted), without parsing it:
        the same bytes as sign(b"\\r\\n".join(raws) + b"\\r\\n\\r\\n" + body)."""
        if body and not body.endswith(b"\r\n"):
            body += b"\r\n"
        message = b"\r\n".join([raw for _, raw, _ in fields] + [b"", body])
        return self._signed(fields, body, message, timestamp)

    def _signed(self, fields: Sequence[tuple[bytes, bytes, bytes]], body: bytes, message: bytes,
                timestamp: int | None) -> bytes:
        names, canonical = self._select(fields)
        head = self._head(names, b"%d" % (int(time.time()) if timestamp is None else timestamp),
                          base64.b64encode(body_hash(body)))  # "DKIM-Signature: v=1; ...;\r\n bh=...;\r\n b="
        digest = hashlib.sha256(b"".join(canonical))
        digest.update(_canonical_header(head))
        signature = self._key.sign(digest.digest(), self._padding, self._prehashed)
        return head + _fold_b(base64.b64encode(signature), len(head) - head.rfind(b"\n") - 1) + b"\r\n" + message

    def _head(self, names: str, t: bytes, bh: bytes) -> bytes:
        """The folded tags (`_fold_tags`) with these h=, t= and bh= values. Where the lines
        break depends on the lengths of t= and bh= only (neither is ever split), so the layout
        is folded once per h= list and lengths, with the two values as placeholders, and a
        message's head is two byte replacements of it."""
        key = (names, len(t), len(bh))
        layout = self._heads.get(key)
        if layout is None:
            if len(self._heads) >= 64:  # (a send has one or two h= lists: bounded all the same)
                self._heads.clear()
            layout = self._heads[key] = _fold_tags([*self._fixed_tags, "t=" + "\x01" * len(t), "h=" + names,
                                                    "bh=" + "\x02" * len(bh)])
        return layout.replace(b"\x01" * len(t), t, 1).replace(b"\x02" * len(bh), bh, 1)

    def _select(self, fields: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[str, list[bytes]]:
        """The h= list and the canonical lines it signs, bottom-up per name. Which fields it
        takes, in which order, depends on the fields' names only: worked out once per list
        of names (`_order`; a send writes the same names in every message)."""
        key = tuple(name for name, _, _ in fields)
        order = self._orders.get(key)
        if order is None:
            if len(self._orders) >= 64:  # (a send has one or two lists of names: bounded all the same)
                self._orders.clear()
            order = self._orders[key] = self._order(key)
        names, picks = order
        lines = []
        for i in picks:
            _, raw, canonical = fields[i]
            lines.append(canonical or _canonical_header(raw) + b"\r\n")
        return names, lines

    def _order(self, field_names: tuple[bytes, ...]) -> tuple[str, tuple[int, ...]]:
        """(h=, the indexes of the fields it signs in its order): every occurrence of each
        signed name, bottom-up, in this signer's order of names, then the over-signed From."""
        by_name: dict[bytes, list[int]] = {}
        for i, name in enumerate(field_names):
            if name in self._signs:
                by_name.setdefault(name, []).append(i)
        names: list[str] = []
        picks: list[int] = []
        for name, encoded in self._names:
            for i in reversed(by_name.get(encoded, ())):
                names.append(name)
                picks.append(i)
        names.extend(OVERSIGNED)  # a name past its last occurrence signs nothing (RFC 6376 5.4)
        return ":".join(names), tuple(picks)


def body_hash(body: bytes) -> bytes:
    """SHA-256 of the relaxed-canonical body (CRLF line ends assumed)."""
    if b"\t" in body or b"  " in body:  # (a regex pass over the body only when it can change it)
        body = _WSP_RUN.sub(b" ", body)
    # after the collapse a blank run before a line end is one space; what is left at the
    # end (blank lines, blanks of the last line) all goes
    body = body.replace(b" \r\n", b"\r\n").rstrip(b" \r\n")
    return hashlib.sha256(body + b"\r\n" if body else b"").digest()


def _canonical_header(raw: bytes) -> bytes:
    """Relaxed form of one whole header field, without the final CRLF."""
    name, _, value = raw.partition(b":")
    if b"\r\n" in value:
        value = _FOLD.sub(b"", value)
    if b"\t" in value or b"  " in value:
        value = _WSP_RUN.sub(b" ", value)
    value = value.strip(b" \r\n")
    return name.strip().lower() + b":" + value


def _parse_header_block(block: bytes) -> list[tuple[bytes, bytes]]:
    """(lowercase name, whole field with folds, no final CRLF) for each header field."""
    fields: list[tuple[bytes, bytes]] = []
    for line in block[:-2].split(b"\r\n"):
        if line[:1] in (b" ", b"\t") and fields:
            name, raw = fields[-1]
            fields[-1] = (name, raw + b"\r\n" + line)
        elif b":" in line:
            fields.append((line.split(b":", 1)[0].strip().lower(), line))
    return fields


def _fold_tags(tags: list[str]) -> bytes:
    """`DKIM-Signature: ` and the tags, `; `-separated, folded below LINE_LIMIT, ending in ` b=`."""
    lines = ["DKIM-Signature:"]
    for tag in [*tags, "b="]:
        piece = " " + tag + ("" if tag == "b=" else ";")
        if len(lines[-1]) + len(piece) <= LINE_LIMIT:
            lines[-1] += piece
        elif tag.startswith("h=") and len(piece) > LINE_LIMIT:
            lines.extend(_fold_colon_list(piece))
        else:
            lines.append(piece)
    return "\r\n".join(lines).encode("ascii")


def _fold_colon_list(piece: str) -> list[str]:
    """A long ` h=a:b:c;` split after colons (FWS is allowed around them)."""
    out = [""]
    for part in re.findall(r"[^:]+:?", piece):
        if out[-1] and len(out[-1]) + len(part) > LINE_LIMIT:
            out.append(" ")
        out[-1] += part
    return out


def _fold_b(value: bytes, column: int) -> bytes:
    """The base64 signature, folded so no line passes LINE_LIMIT (FWS inside b= is ignored)."""
    first = max(LINE_LIMIT - column, 0)
    rest = [value[i:i + LINE_LIMIT - 1] for i in range(first, len(value), LINE_LIMIT - 1)]
    return b"\r\n ".join([value[:first], *rest])


def _crlf(message: bytes) -> bytes:
    crlf = message.count(b"\r\n")
    if message.count(b"\n") == crlf and message.count(b"\r") == crlf:
        return message
    return _LINE_END.sub(b"\r\n", message)


def _a_label(name: str) -> str:
    name = name.strip().rstrip(".").lower()
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"{name!r} is not a valid DNS name for DKIM.") from exc
    if not ascii_name or not re.fullmatch(r"[a-z0-9_.-]+", ascii_name):
        raise ValueError(f"{name!r} is not a valid DNS name for DKIM.")
    return ascii_name


def _is_field_name(name: str) -> bool:
    return bool(name) and all(33 <= ord(ch) <= 126 and ch != ":" for ch in name)

"""What a bounce says about its recipient: the class of a synchronous SMTP refusal or of an
RFC 3464 report's recipient block, from a table of rules (data, not code; docs/deliverability.md
"Bounce classes").

    classify(text, status) -> "unknown_user" | "unknown_domain" | "mailbox_full" |
                              "message_too_large" | "policy_block" | "reputation_block" |
                              "authentication_failure" | "rate_limit" | "other_transient" |
                              "other_permanent"

The table (`bounce_classes.csv` beside this module, or the operator's copy named by
MKT_BOUNCE_CLASSES) has the columns `class,code,pattern,source`. Its rows are tried in order
and the first that matches decides:

    code     an enhanced status code (RFC 3463) the reply must carry: `5.7.26`, or with `x`
             for any number: `x.2.2` (4.2.2 and 5.2.2), `5.7.2x` (5.7.20-5.7.29), `4.x.x`
    pattern  a regular expression (Python `re`) searched in the reply's text, lower case,
             runs of whitespace as one space
    source   where the rule comes from: a provider's published error reference, an RFC, or
             the sisimai project's reason lists (BSD-2-Clause), which most rows are taken from

A row with both must match both; a row needs at least one. The shipped table ends with
`4.x.x` -> other_transient and `5.x.x` -> other_permanent, so every failure gets a class;
a text with no code at all and no matching pattern is `other_permanent` (RFC 3464 reads an
`Action: failed` as permanent).

What a class does (services/delivery/bounces.py): only unknown_user and unknown_domain clean
a contact at once, mailbox_full does after SOFT_BOUNCE_LIMIT in a row; the blocks and
authentication failures say something about the sending domain, not the recipient, and are
counted against the domain (the `bounce_class` of email_messages; the view
`domain_bounce_classes`).

Speed: consecutive rows of one class and one code are joined into one alternation, so a
text is searched a few dozen times, not once per row (bench/bounce_classes.py).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from marketing_cli.errors import MktError
from marketing_cli.kernel.data_tables import DataTable

TABLE_ENV = "MKT_BOUNCE_CLASSES"
BUILT_IN = Path(__file__).with_name("bounce_classes.csv")
CLASSES = ("unknown_user", "unknown_domain", "mailbox_full", "message_too_large", "policy_block",
           "reputation_block", "authentication_failure", "rate_limit", "other_transient", "other_permanent")
CLEANS = ("unknown_user", "unknown_domain")            # clean the contact at once
REPEATED = ("mailbox_full",)                           # clean it when repeated (SOFT_BOUNCE_LIMIT in a row)
AGAINST_DOMAIN = ("policy_block", "reputation_block", "authentication_failure", "rate_limit")
HEADER = ["class", "code", "pattern", "source"]
_CODE = re.compile(r"^(?:[245x])\.(?:\d{1,3}x?|x)\.(?:\d{1,3}x?|x)$")
_STATUS = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
_REPLY = re.compile(r"\b([245])\d\d\b")
_SPACE = re.compile(r"\s+")
_ADDRESS = re.compile(r"[^\s<>\"'()\[\],;:]+@[^\s<>\"'()\[\],;:]+")
_CACHED = 4096


@dataclass(frozen=True)
class Group:
    """Consecutive rows of one class and one code: the patterns that are plain text (searched
    with `in`, C's substring search) and one compiled alternation of the others; a group with
    neither matches on its code alone."""

    cls: str
    code: re.Pattern[str] | None
    literals: tuple[str, ...]
    pattern: re.Pattern[str] | None

    def matches(self, text: str) -> bool:
        if not self.literals and self.pattern is None:
            return True
        return any(literal in text for literal in self.literals) or (
            self.pattern is not None and self.pattern.search(text) is not None)


@dataclass(frozen=True, eq=False)
class Table:
    """The parsed table (compared by identity: a verdict is remembered per table object)."""

    groups: tuple[Group, ...] = field(hash=False)
    rows: int
    origin: str


def _code_pattern(code: str) -> re.Pattern[str]:
    parts = []
    for part in code.split("."):
        if part == "x":
            parts.append(r"\d{1,3}")
        elif part.endswith("x"):
            parts.append(re.escape(part[:-1]) + r"\d")
        else:
            parts.append(re.escape(part))
    return re.compile(r"\.".join(parts) + "$")


def _literal(pattern: str) -> str | None:
    """The text a pattern matches when it is plain text (metacharacters only escaped), else None."""
    plain = re.sub(r"\\([^A-Za-z0-9])", r"\1", pattern)
    if re.search(r"[.^$*+?{}\[\]|()\\]", re.sub(r"\\[^A-Za-z0-9]", "", pattern)):
        return None
    return plain


def parse_table(text: str, origin: str) -> Table:
    """The table of a CSV text; MktError(500) naming the line of the first bad row."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if [h.strip().lower() for h in header or []] != HEADER:
        raise MktError(500, f"{TABLE_ENV}: {origin} must begin with the header {','.join(HEADER)}.")
    rows: list[tuple[str, str, str]] = []
    for number, row in enumerate(reader, 2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 4:
            raise MktError(500, f"{TABLE_ENV}: {origin} line {number}: 4 columns expected, not {len(row)}.")
        cls, code, pattern, source = (cell.strip() for cell in row)
        if cls not in CLASSES:
            raise MktError(500, f"{TABLE_ENV}: {origin} line {number}: unknown class {cls!r}.")
        if code and not _CODE.match(code.lower()):
            raise MktError(500, f"{TABLE_ENV}: {origin} line {number}: {code!r} is not a status code such as 5.7.26.")
        if not code and not pattern:
            raise MktError(500, f"{TABLE_ENV}: {origin} line {number}: a rule needs a code, a pattern or both.")
        if not source:
            raise MktError(500, f"{TABLE_ENV}: {origin} line {number}: every rule names its source.")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise MktError(500, f"{TABLE_ENV}: {origin} line {number}: the pattern does not compile ({exc}).") from None
        rows.append((cls, code.lower(), pattern))
    groups: list[Group] = []
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][:2] != rows[start][:2] or not rows[i][2] or not rows[start][2]:
            cls, code, _ = rows[start]
            patterns = [r[2] for r in rows[start:i] if r[2]]
            literals = tuple(_literal(p) for p in patterns if _literal(p) is not None)
            others = [p for p in patterns if _literal(p) is None]
            groups.append(Group(cls, _code_pattern(code) if code else None, literals,
                                re.compile("|".join(f"(?:{p})" for p in others)) if others else None))
            start = i
    return Table(tuple(groups), len(rows), origin)


TABLE: DataTable[Table] = DataTable(TABLE_ENV, BUILT_IN, parse_table, "bounce-class table")


def status_of(text: str) -> str | None:
    """The enhanced status code in a reply's text ("5.1.1"), else its basic reply code read as
    one ("550" -> "5.0.0"), else None."""
    match = _STATUS.search(text)
    if match:
        return ".".join(match.groups())
    reply = _REPLY.search(text)
    return f"{reply.group(1)}.0.0" if reply else None


def classify(text: str | None, status: str | None = None, table: Table | None = None) -> str:
    """The class of a failure from its text (a Diagnostic-Code, an SMTP reply) and its status
    (RFC 3464 Status; read from the text when not given).

    The text is read with its addresses written `x@x`: a server words every bounce of a kind
    alike but for the address, so the verdict of a wording is remembered (_CACHED verdicts per
    table) and a campaign's thousand `550 5.1.1 <someone@...>: user unknown` cost one reading."""
    text = _ADDRESS.sub("x@x", _SPACE.sub(" ", (text or "").lower()))
    status = status or status_of(text)
    return _verdict(table or TABLE.current(), text, status)


@lru_cache(maxsize=_CACHED)
def _verdict(table: Table, text: str, status: str | None) -> str:
    for group in table.groups:
        if group.code is not None and (status is None or not group.code.match(status)):
            continue
        if not group.matches(text):
            continue
        return group.cls
    return "other_transient" if status and status.startswith("4") else "other_permanent"


def classify_reply(error: str | None, permanent: bool = True) -> str:
    """The class of a synchronous refusal as the transport words it ("the SMTP server refused
    the recipient: 550 5.1.1 ..."); a text without a code (a connection that failed) is read by
    `permanent` (the transport's verdict): other_permanent, else other_transient."""
    text = error or ""
    return classify(text, status_of(text) or ("5.0.0" if permanent else "4.0.0"))

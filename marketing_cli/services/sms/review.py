"""Automated review of SMS messages: a deterministic local classifier with scored rules.

A message is flagged when its score reaches THRESHOLD (5). The rules and their scores
(docs/sms.md lists the same table):

    rule                    score  fires when
    all_capitals              3    4+ words of 3+ letters in capitals in a row, or over
                                   60% of 12+ letters in capitals
    repeated_punctuation      3    "!!", "??", "?!", "$$", "***" and the like (an ellipsis
                                   "..." does not count)
    several_links             3    2 links or more (+1 per link beyond 2)
    url_shortener             1    a link through a public shortener (bit.ly, tinyurl ...)
    spam_phrase               1    each known spam phrase ("act now", "you have won" ...),
                                   at most 2 in all
    missing_opt_out           1    the first message to a number without opt-out wording
                                   ("Reply STOP", "opt out", "unsubscribe")

Only all_capitals, repeated_punctuation and several_links can reach the threshold with
the others, and the others together score at most 4: so a message of ordinary sentences
in normal case, without repeated punctuation and with at most one link, is never flagged,
with or without opt-out wording (CONTRACT section 6). No network service is called.
"""

from __future__ import annotations

import re
from typing import Any

THRESHOLD = 5
SHORTENERS = (
    "bit.ly", "bitly.com", "tinyurl.com", "goo.gl", "t.co", "ow.ly", "is.gd", "buff.ly", "rebrand.ly",
    "cutt.ly", "shorturl.at", "tiny.cc", "rb.gy", "t.ly", "v.gd", "s.id", "shorte.st", "adf.ly", "bl.ink",
    "lnkd.in", "qrco.de",
)
SPAM_PHRASES = (
    "act now", "you have won", "you've won", "you won", "claim your prize", "claim your reward", "cash prize",
    "free money", "100% free", "risk free", "risk-free", "no credit check", "guaranteed approval",
    "limited time offer", "winner", "lottery", "double your", "earn money fast", "make money fast",
    "verify your account", "your account has been suspended", "urgent response", "click here now",
    "congratulations you", "free gift", "free prize", "dear customer",
)
OPT_OUT = re.compile(r"\b(stop|stopall|unsubscribe|opt[- ]?out|cancel)\b", re.IGNORECASE)
LINK = re.compile(r"(?:https?://|www\.)[^\s<>\"']+|\b(?:[a-z0-9-]+\.)+(?:com|net|org|io|co|ly|gl|gd|me|us|info|biz|"
                  r"xyz|link|at|cc|id|de|uk|fr)(?:/[^\s<>\"']*)?", re.IGNORECASE)
CAPS_RUN = re.compile(r"\b[A-Z][A-Z'’]{2,}\b(?:\W+\b[A-Z][A-Z'’]{2,}\b){3,}")
REPEATED = re.compile(r"[!?]{2,}|[$€£]{2,}|[*#~]{3,}|,{2,}|\.{4,}")
SPAM = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in SPAM_PHRASES) + r")(?!\w)", re.IGNORECASE)
MERGE_TAG = re.compile(r"\{\{[^{}]*\}\}")

RULES = {
    "all_capitals": "Words in capitals",
    "repeated_punctuation": "Repeated punctuation",
    "several_links": "Several links",
    "url_shortener": "Link through a URL shortener",
    "spam_phrase": "Known spam phrase",
    "missing_opt_out": "No opt-out wording in a first message",
}


def _host(link: str) -> str:
    text = re.sub(r"^(?:https?://)", "", link, flags=re.IGNORECASE)
    return text.split("/", 1)[0].split(":", 1)[0].lower().removeprefix("www.")


NO_OPT_OUT = ("Warning: the message says nothing about opting out (\"Reply STOP to opt out\"). People who do "
              "not know how to stop report texts as spam, and US carriers expect the wording in a first message.")


def opt_out_warning(message: str | None) -> str | None:
    """What `mkt sms schedule` prints before it queues a message without opt-out wording (the
    review's `missing_opt_out` rule, which alone does not flag a campaign)."""
    if not message or OPT_OUT.search(MERGE_TAG.sub(" ", message)):
        return None
    return NO_OPT_OUT


def review_message(message: str, *, first_message: bool = True) -> dict[str, Any]:
    """Score a message: {"flagged", "score", "threshold", "rules": [{rule, score, detail}]}."""
    text = MERGE_TAG.sub(" ", message)  # a merge tag is not part of what is judged
    fired: list[dict[str, Any]] = []

    def fire(rule: str, score: int, detail: str) -> None:
        fired.append({"rule": rule, "description": RULES[rule], "score": score, "detail": detail})

    words = LINK.sub(" ", text)  # links are not judged for capitals
    letters = [ch for ch in words if ch.isalpha()]
    upper = sum(1 for ch in letters if ch.isupper())
    run = CAPS_RUN.search(words)
    if run:
        fire("all_capitals", 3, f"capitals: '{run.group(0)[:40]}'")
    elif len(letters) >= 12 and upper / len(letters) > 0.6:
        fire("all_capitals", 3, f"{upper} of {len(letters)} letters are capitals")
    repeated = REPEATED.findall(text)
    if repeated:
        fire("repeated_punctuation", 3, ", ".join(dict.fromkeys(repeated)))
    links = LINK.findall(text)
    if len(links) >= 2:
        fire("several_links", 3 + len(links) - 2, f"{len(links)} links")
    shortened = [link for link in links if _host(link) in SHORTENERS]
    if shortened:
        fire("url_shortener", 1, shortened[0])
    phrases = list(dict.fromkeys(m.group(0).lower() for m in SPAM.finditer(text)))
    if phrases:
        fire("spam_phrase", min(2, len(phrases)), ", ".join(phrases))
    if first_message and not OPT_OUT.search(text):
        fire("missing_opt_out", 1, "no 'Reply STOP' or similar wording")
    score = sum(r["score"] for r in fired)
    return {"flagged": score >= THRESHOLD, "score": score, "threshold": THRESHOLD, "rules": fired}

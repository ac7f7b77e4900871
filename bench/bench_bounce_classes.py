"""Bounce classification: what classifying costs on top of reading the reports.

100,000 RFC 3464 reports (10,000 with --quick), each a Postfix DSN (tests/data/reports/
postfix_hard.eml) for its own recipient, carrying the Status and Diagnostic-Code of one of the
486 real bounce texts of tests/data/bounces/labels.csv, in turn, with the recipient's address
in front of the text as servers write it. The classifier reads a text with its addresses
written x@x and remembers the verdict of a wording (bounce_classes.classify), so the 486
wordings are read once each and the rest are found again: real bounces repeat a few wordings
per server in the same way; the first reading of each wording is measured too (cold).

Rows (reports per second, best pass; the two sides alternated in one run, one core):
- parse_report with classification (what `mkt bounces import` does) against parse_report with
  the classifier replaced by a constant (parsing alone). Target: ratio >= 0.5 (classifying
  costs at most as much as parsing).
- classify alone (the text and status of each report) against parsing alone: how many times
  faster the rules are than the email package. Target: ratio >= 1.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import row  # noqa: E402

REPO = HERE.parent


def corpus() -> list[tuple[str, str]]:
    with (REPO / "tests" / "data" / "bounces" / "labels.csv").open(encoding="utf-8", newline="") as handle:
        return [(r["status"] or "5.0.0", r["text"]) for r in csv.DictReader(handle)]


def reports(n: int) -> tuple[list[bytes], list[tuple[str, str]]]:
    template = (REPO / "tests" / "data" / "reports" / "postfix_hard.eml").read_text(encoding="utf-8")
    head, _, tail = template.partition("Diagnostic-Code: smtp; ")
    tail = tail.split("\n\n", 1)[1]
    texts = corpus()
    out, pairs = [], []
    for i in range(n):
        status, text = texts[i % len(texts)]
        text = f"<reader{i}@example.org>: {text[:900]}"  # each report names its own recipient, as servers do
        body = head.replace("Status: 5.1.1", f"Status: {status}") + f"Diagnostic-Code: smtp; {text}\n\n" + tail
        out.append(body.replace("nobody@example.org", f"reader{i}@example.org").encode("utf-8"))
        pairs.append((text, status))
    return out, pairs


def timed(fn, items: list) -> float:  # noqa: ANN001
    started = time.perf_counter()
    for item in items:
        fn(item)
    return time.perf_counter() - started


def run(quick: bool) -> list[dict]:
    from marketing_cli.services.delivery import bounce_classes, bounce_reports

    n = 10_000 if quick else 100_000
    data, pairs = reports(n)
    classify = bounce_reports.classify
    bounce_classes.TABLE.current()  # the table read once, as a long-running import does

    def parse_alone(item: bytes) -> None:
        bounce_reports.classify = lambda *_: "other_permanent"
        try:
            bounce_reports.parse_report(item)
        finally:
            bounce_reports.classify = classify

    best = {"both": float("inf"), "parse": float("inf"), "classify": float("inf")}
    for _ in range(2):  # alternated: the machine is shared
        best["parse"] = min(best["parse"], timed(parse_alone, data))
        best["both"] = min(best["both"], timed(bounce_reports.parse_report, data))
        best["classify"] = min(best["classify"], timed(lambda p: classify(*p), pairs))
    both, parse, alone = n / best["both"], n / best["parse"], n / best["classify"]
    distinct = list(dict.fromkeys(corpus()))
    bounce_classes._verdict.cache_clear()
    cold = len(distinct) / timed(lambda p: classify(p[1], p[0]), distinct)
    return [
        row(f"bounce reports parsed and classified ({n:,})", round(both), "reports/s", "parsed alone", round(parse),
            round(both / parse, 2), ">= 0.5", both / parse >= 0.5),
        row(f"bounce texts classified ({n:,})", round(alone), "texts/s", "reports parsed alone", round(parse),
            round(alone / parse, 2), ">= 1", alone / parse >= 1),
        row(f"bounce wordings classified cold ({len(distinct)}, none seen before)", round(cold), "texts/s",
            "reports parsed alone", round(parse), round(cold / parse, 2), ">= 1", cold / parse >= 1),
    ]


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)

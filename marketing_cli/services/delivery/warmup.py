"""Warm-up of a sending domain: a schedule of daily caps per provider lane (CONTRACT section 11;
docs/deliverability.md "Warm-up"), held for all the workers of the domain's sends.

`mkt domains warmup start ID [--schedule FILE]` (POST /v1/domains/{id}/warmup) starts one: day 1
is the UTC day it starts; day N caps each lane at what the schedule's `N,lane,cap` rows say (a
lane missing from a day has no cap that day; after the schedule's last day the warm-up is
finished: no cap). The shipped schedule is data (`warmup_schedule.csv` beside this module, its
source per row; the operator's copy is named in MKT_WARMUP_SCHEDULE); a warm-up started with a
file of its own keeps that file's rows. `status` (GET) says the day, each lane's cap and what
went out today; `stop` (DELETE) lifts the caps. A new start replaces the warm-up and its counts.

The caps are enforced by the claim (claim.py, warmup_gate.py): each message claimed from the
domain counts against its lane's cap of the UTC day in the claim's transaction, so any number
of workers together stay under it; what is over today's cap waits for tomorrow.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.data_tables import DataTable, csv_rows
from marketing_cli.services.delivery.replies import LANES
from marketing_cli.services.email import domains
from marketing_cli.storage.db import transaction

TABLE_ENV = "MKT_WARMUP_SCHEDULE"
BUILT_IN = Path(__file__).with_name("warmup_schedule.csv")
MAX_DAYS = 365
MAX_CAP = 100_000_000
MAX_FILE_BYTES = 256 * 1024
COLUMNS = ("day", "lane", "cap")
INVALID_BODY = ('Expected a JSON object, optionally with "schedule": a list of {"day", "lane", "cap"} rows '
                '(day 1 is the day the warm-up starts).')


@dataclass(frozen=True)
class Schedule:
    rows: tuple[tuple[int, str, int], ...]   # (day, lane, cap), by day then lane
    origin: str

    @property
    def days(self) -> int:
        return max((d for d, _, _ in self.rows), default=0)

    def caps(self, day: int) -> dict[str, int]:
        return {lane: cap for d, lane, cap in self.rows if d == day}


def _row(values: list[Any], where: str) -> tuple[int, str, int]:
    day, lane, cap = values
    try:
        day_n = int(str(day).strip())
    except ValueError:
        raise MktError(400, f"{where}: day '{day}' is not a whole number (day 1 is the day the warm-up starts).") \
            from None
    if not 1 <= day_n <= MAX_DAYS:
        raise MktError(400, f"{where}: day {day_n} is out of range (1 to {MAX_DAYS}).")
    lane_s = str(lane).strip().lower()
    if lane_s not in LANES:
        raise MktError(400, f"{where}: '{lane}' is not a lane ({', '.join(LANES)}).")
    try:
        cap_n = int(str(cap).strip().replace("_", ""))
    except ValueError:
        raise MktError(400, f"{where}: cap '{cap}' is not a whole number of messages.") from None
    if not 0 <= cap_n <= MAX_CAP:
        raise MktError(400, f"{where}: cap {cap_n} is out of range (0 to {MAX_CAP:,}).")
    return day_n, lane_s, cap_n


def _checked(rows: list[tuple[int, str, int]], origin: str) -> Schedule:
    if not rows:
        raise MktError(400, f"{origin}: the schedule has no rows (day,lane,cap).")
    seen: set[tuple[int, str]] = set()
    for day, lane, _ in rows:
        if (day, lane) in seen:
            raise MktError(400, f"{origin}: day {day} gives the {lane} lane two caps.")
        seen.add((day, lane))
    return Schedule(tuple(sorted(rows)), origin)


def parse_schedule(text: str, origin: str) -> Schedule:
    """A schedule file: CSV with the header day,lane,cap (a source column and # comments allowed)."""
    rows: list[tuple[int, str, int]] = []
    header = False
    for n, cells in csv_rows(text):
        if not header:
            if [c.lower() for c in cells[:3]] != list(COLUMNS):
                raise MktError(400, f"{origin} line {n}: the header must be day,lane,cap (then optionally source).")
            header = True
            continue
        if len(cells) < 3:
            raise MktError(400, f"{origin} line {n}: expected day,lane,cap.")
        rows.append(_row(cells[:3], f"{origin} line {n}"))
    if not header:
        raise MktError(400, f"{origin}: no header line (day,lane,cap).")
    return _checked(rows, origin)


def schedule_from_body(body: Any) -> Schedule | None:
    """The optional `schedule` of POST /v1/domains/{id}/warmup: a list of {day, lane, cap}."""
    if body is None:
        return None
    if not isinstance(body, dict) or set(body) - {"schedule"}:
        raise MktError(400, INVALID_BODY)
    rows = body.get("schedule")
    if rows is None:
        return None
    if not isinstance(rows, list):
        raise MktError(400, INVALID_BODY)
    parsed = []
    for i, item in enumerate(rows):
        if not isinstance(item, dict) or set(item) != set(COLUMNS) or any(isinstance(item[k], bool) or
                                                                         not isinstance(item[k], int | str)
                                                                         for k in COLUMNS):
            raise MktError(400, f"schedule[{i}]: expected {{\"day\", \"lane\", \"cap\"}}.")
        parsed.append(_row([item["day"], item["lane"], item["cap"]], f"schedule[{i}]"))
    return _checked(parsed, "the request's schedule")


def schedule_from_file(path: str) -> Schedule:
    """`--schedule FILE`: a schedule file (UTF-8 CSV, MAX_FILE_BYTES at most)."""
    from marketing_cli.kernel.text_files import decode_text

    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise MktError(400, f"Cannot read the schedule file {path}: {exc.strerror}.") from None
    if len(data) > MAX_FILE_BYTES:
        raise MktError(400, f"The schedule file {path} is over {MAX_FILE_BYTES // 1024} KiB.")
    text, _ = decode_text(data)
    return parse_schedule(text, Path(path).name)


TABLE = DataTable(TABLE_ENV, BUILT_IN, parse_schedule, "warm-up schedule")


def check_environment() -> None:
    TABLE.current()


def today() -> date:
    return clock.utcnow().date()


def day_number(start_day: str, on: date | None = None) -> int:
    return ((on or today()) - date.fromisoformat(start_day)).days + 1


def day_start(on: date) -> datetime:
    return datetime(on.year, on.month, on.day, tzinfo=timezone.utc)


def tomorrow() -> datetime:
    """The next UTC midnight: when today's caps give way to the next day's."""
    return day_start(today() + timedelta(days=1))


@dataclass(frozen=True)
class Warmup:
    domain_id: int
    workspace_id: int
    started_at: str
    start_day: str
    schedule: Schedule
    stopped_at: str | None

    @property
    def day(self) -> int:
        return day_number(self.start_day)

    @property
    def state(self) -> str:
        if self.stopped_at:
            return "stopped"
        return "finished" if self.day > self.schedule.days else "active"

    def caps_today(self) -> dict[str, int]:
        return self.schedule.caps(self.day) if self.state == "active" else {}


def load(row: sqlite3.Row) -> Warmup:
    return Warmup(row["domain_id"], row["workspace_id"], row["started_at"], row["start_day"],
                  Schedule(tuple(tuple(r) for r in json.loads(row["schedule"])), row["origin"]),  # type: ignore[misc]
                  row["stopped_at"])


def find(conn: sqlite3.Connection, domain_id: int) -> Warmup | None:
    row = conn.execute("SELECT * FROM domain_warmups WHERE domain_id = ?", (domain_id,)).fetchone()
    return load(row) if row else None


def used_today(conn: sqlite3.Connection, domain_id: int) -> dict[str, int]:
    return dict(conn.execute("SELECT lane, used FROM warmup_counters WHERE domain_id = ? AND day = ?",
                             (domain_id, today().isoformat())).fetchall())


def view(conn: sqlite3.Connection, domain: sqlite3.Row, warm: Warmup | None) -> dict[str, Any]:
    """The warm-up's status: its day, each lane's cap today and what went out of it."""
    if warm is None:
        return {"domain_id": domain["id"], "domain_name": domain["domain_name"], "status": "none", "day": None,
                "days": None, "started_at": None, "stopped_at": None, "ends_on": None, "origin": None,
                "today": [], "schedule": []}
    caps, used = warm.caps_today(), used_today(conn, warm.domain_id)
    end = date.fromisoformat(warm.start_day) + timedelta(days=warm.schedule.days)
    return {"domain_id": domain["id"], "domain_name": domain["domain_name"], "status": warm.state,
            "day": warm.day if warm.state == "active" else None, "days": warm.schedule.days,
            "started_at": warm.started_at, "stopped_at": warm.stopped_at, "ends_on": end.isoformat(),
            "origin": warm.schedule.origin,
            "today": [{"lane": lane, "cap": caps.get(lane), "used": used.get(lane, 0),
                       "left": None if lane not in caps else max(0, caps[lane] - used.get(lane, 0))}
                      for lane in LANES],
            "schedule": [{"day": d, "lane": lane, "cap": cap} for d, lane, cap in warm.schedule.rows]}


def start_warmup(conn: sqlite3.Connection, workspace_id: int, domain_id: Any,
                 schedule: Schedule | None = None) -> dict[str, Any]:
    """Start (or start again) the domain's warm-up on `schedule` (the shipped one by default)."""
    domain = domains.domain_row(conn, workspace_id, domain_id)
    schedule = schedule or TABLE.current()
    with transaction(conn):
        conn.execute("DELETE FROM warmup_counters WHERE domain_id = ?", (domain["id"],))
        conn.execute("DELETE FROM domain_warmups WHERE domain_id = ?", (domain["id"],))
        conn.execute("INSERT INTO domain_warmups (domain_id, workspace_id, started_at, start_day, schedule, origin)"
                     " VALUES (?, ?, ?, ?, ?, ?)",
                     (domain["id"], workspace_id, clock.now(), today().isoformat(),
                      json.dumps([list(r) for r in schedule.rows]), schedule.origin))
    return view(conn, domain, find(conn, domain["id"]))


def warmup_status(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> dict[str, Any]:
    domain = domains.domain_row(conn, workspace_id, domain_id)
    return view(conn, domain, find(conn, domain["id"]))


def stop_warmup(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> dict[str, Any]:
    """Lift the domain's caps (its day counts stay for the status)."""
    domain = domains.domain_row(conn, workspace_id, domain_id)
    warm = find(conn, domain["id"])
    if warm is None or warm.state != "active":
        raise MktError(409, f"Domain {domain['id']} has no warm-up running"
                            f"{'' if warm is None else f' (it is {warm.state})'}.")
    with transaction(conn):
        conn.execute("UPDATE domain_warmups SET stopped_at = ? WHERE domain_id = ?", (clock.now(), domain["id"]))
    return view(conn, domain, find(conn, domain["id"]))


IDLE_DAYS = 30          # SendGrid: "most reputation systems only store data for 30 days"
IDLE_OFFER_FROM = 5000  # recipients: a send this large from a cold domain is offered a warm-up
IDLE_OFFER = ("{domain} has sent nothing in the last {days} days and this campaign goes to {count:,} recipients: "
              "mailbox providers read a sudden volume from a cold domain as spam. Warm it up first: "
              "`mkt domains warmup start {id}` (POST /v1/domains/{id}/warmup) caps each provider lane per day, "
              "the most engaged recipients first.")


def idle_offer(conn: sqlite3.Connection, workspace_id: int, domain_id: int, recipients: int) -> str | None:
    """The warning of a large send (IDLE_OFFER_FROM recipients or more) scheduled from a domain
    without a warm-up running that sent nothing in IDLE_DAYS days: no campaign from it SENT
    since, and none SENDING (an automation's campaign stays SENDING). None otherwise."""
    if recipients < IDLE_OFFER_FROM:
        return None
    warm = find(conn, domain_id)
    if warm is not None and warm.state == "active":
        return None
    since = clock.format_ts(clock.utcnow() - timedelta(days=IDLE_DAYS))
    recent = conn.execute("SELECT 1 FROM campaigns c JOIN sender_identities s ON s.id = c.sender_identity_id"
                          " WHERE s.domain_id = ? AND c.workspace_id = ? AND (c.status = 'SENDING'"
                          " OR (c.sent_at IS NOT NULL AND c.sent_at >= ?)) LIMIT 1",
                          (domain_id, workspace_id, since)).fetchone()
    if recent is not None:
        return None
    name = conn.execute("SELECT domain_name FROM domains WHERE id = ?", (domain_id,)).fetchone()[0]
    return IDLE_OFFER.format(domain=name, days=IDLE_DAYS, count=recipients, id=domain_id)


"""services/email/timeline: events recorded at known times land in the expected buckets, the
buckets are the ones kernel/timeline.py promises, and the counts match the raw events."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, timeline
from marketing_cli.services.email import stats
from marketing_cli.services.email.timeline import SERIES, get_campaign_timeline
from tests import factories


def _nonzero(bucket: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in bucket.items() if k != "start" and v}


def test_events_at_known_times_land_in_their_buckets(conn: Any, workspace: dict) -> None:
    first = factories.timeline_start(100)
    world = factories.email_timeline_world(conn, workspace["id"], first)
    result = get_campaign_timeline(conn, workspace["id"], world["id"])

    assert result["campaign_id"] == world["id"] and result["status"] == "SENT"
    assert result["started_at"].startswith(timeline.iso(first)[:13])
    assert len(result["hours"]) == 72 and len(result["days"]) == 2  # 100-101 hours after the first hour
    assert result["hours"][0]["start"] == timeline.iso(first)
    assert result["hours"][1]["start"] == timeline.iso(first + timeline.HOUR)
    assert result["days"][0]["start"] == timeline.iso(first + 72 * timeline.HOUR)
    assert result["days"][1]["start"] == timeline.iso(first + 96 * timeline.HOUR)
    assert all(set(b) == {"start", *SERIES} for b in (*result["hours"], *result["days"]))
    busy = {i: _nonzero(b) for i, b in enumerate(result["hours"]) if _nonzero(b)}
    assert busy == {
        0: {"sent": 4, "delivered": 4, "bounced": 1},
        1: {"sent": 1, "unique_opens": 1, "total_opens": 1},
        2: {"total_opens": 1, "unique_clicks": 1, "total_clicks": 2},
        3: {"unsubscribed": 1},
        71: {"complained": 1},
    }
    assert [_nonzero(d) for d in result["days"]] == [{"unique_opens": 1, "total_opens": 1},
                                                     {"unique_clicks": 1, "total_clicks": 1}]
    assert result["totals"] == {"sent": 5, "delivered": 4, "unique_opens": 2, "total_opens": 3, "unique_clicks": 2,
                                "total_clicks": 3, "unsubscribed": 1, "bounced": 1, "complained": 1}


def test_the_timeline_matches_the_raw_events_and_the_statistics(conn: Any, workspace: dict) -> None:
    first = factories.timeline_start(100)
    world = factories.email_timeline_world(conn, workspace["id"], first)
    result = get_campaign_timeline(conn, workspace["id"], world["id"])
    raw: dict[str, dict[str, int]] = {}
    for column, name in (("delivered_at", "delivered"), ("opened_at", "unique_opens"),
                         ("clicked_at", "unique_clicks"), ("unsubscribed_at", "unsubscribed"),
                         ("bounced_at", "bounced"), ("complained_at", "complained")):
        for hour, n in conn.execute(f"SELECT substr({column}, 1, 13), count(*) FROM email_messages"
                                    f" WHERE campaign_id = ? AND {column} IS NOT NULL GROUP BY 1", (world["id"],)):
            raw.setdefault(hour, {})[name] = n
    for hour, n in conn.execute("SELECT substr(k.clicked_at, 1, 13), count(*) FROM email_clicks k JOIN email_messages m"
                                " ON m.id = k.message_id WHERE m.campaign_id = ? AND k.machine = 0 GROUP BY 1",
                                (world["id"],)):
        raw.setdefault(hour, {})["total_clicks"] = n
    buckets = {b["start"][:13]: b for b in result["hours"]}
    for hour, counts in raw.items():
        offset = int((timeline.hour_of(hour) - first) / timeline.HOUR)
        bucket = buckets[hour] if offset < 72 else result["days"][(offset - 72) // 24]
        for name, n in counts.items():
            assert bucket[name] == n, (hour, name)
    aggregate = stats.get_campaign_statistics(conn, workspace["id"], world["id"])["aggregate"]
    totals = result["totals"]
    assert (totals["delivered"], totals["unique_opens"], totals["unique_clicks"], totals["bounced"],
            totals["unsubscribed"], totals["complained"]) == tuple(aggregate[k] for k in stats.COUNTERS)


def test_a_campaign_not_sent_yet_has_no_buckets(conn: Any, workspace: dict) -> None:
    campaign = factories.email_campaign(conn, workspace["id"])
    assert get_campaign_timeline(conn, workspace["id"], campaign["id"]) == {
        "campaign_id": campaign["id"], "status": "DRAFT", "started_at": None, "hours": [], "days": [],
        "totals": dict.fromkeys(SERIES, 0)}


def test_a_send_that_started_minutes_ago_has_one_bucket_so_far(conn: Any, workspace: dict) -> None:
    from marketing_cli.storage.db import transaction

    campaign = factories.email_campaign(conn, workspace["id"])
    [message] = factories.email_recipients(conn, workspace["id"], campaign, ["a@gmail.com"])
    now = clock.utcnow()
    with transaction(conn):
        conn.execute("UPDATE campaigns SET status = 'SENDING', send_started_at = ? WHERE id = ?",
                     (clock.format_ts(now), campaign["id"]))
    stats.record_delivery(conn, message)
    result = get_campaign_timeline(conn, workspace["id"], campaign["id"])
    assert len(result["hours"]) in (1, 2) and result["days"] == []  # 2 when the hour turned meanwhile
    assert result["hours"][0]["start"] == timeline.iso(timeline.floor_hour(now))
    assert result["totals"]["delivered"] == 1


def test_a_database_upgraded_to_step_16_has_the_timelines_of_its_events(tmp_path: Any) -> None:
    """The step fills the hours from the events recorded before it (the first open's hour
    takes all of a message's opens)."""
    from marketing_cli.services.account import workspaces
    from marketing_cli.storage.db import connect, latest_version, migrate, transaction

    conn = connect(tmp_path / "old.db")
    ws = workspaces.create_workspace(conn, "Old")["workspace"]["id"]
    first = factories.timeline_start(10)
    world = factories.email_timeline_world(conn, ws, first)
    before = get_campaign_timeline(conn, ws, world["id"])
    with transaction(conn):
        conn.execute("DELETE FROM email_campaign_hours")
    step_16 = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"
                                                "  AND (name LIKE 'email_hours_%' OR name LIKE 'sms_hours_%')")]
    conn.executescript("".join(f"DROP TRIGGER {name};" for name in step_16) +
                       "PRAGMA user_version = 15; DROP TABLE email_campaign_hours; DROP TABLE sms_campaign_hours;")
    assert migrate(conn, target=16) == 16  # step 16 alone: the later steps' changes are in place already
    conn.execute(f"PRAGMA user_version = {latest_version()}")
    conn.close()
    conn = connect(tmp_path / "old.db")
    after = get_campaign_timeline(conn, ws, world["id"])
    assert after["totals"] == before["totals"]
    assert after["hours"][1]["total_opens"] == 2 and after["hours"][2]["total_opens"] == 0
    def without_total_opens(result: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in b.items() if k != "total_opens"} for b in (*result["hours"], *result["days"])]

    assert without_total_opens(after) == without_total_opens(before)
    conn.close()


@pytest.mark.parametrize("campaign_id, message", [
    ("", "Please provide a campaign ID."), ("nope", "We could not find the campaign you are looking for."),
    ("0" * 24, "We could not find the campaign you are looking for.")])
def test_bad_ids(conn: Any, workspace: dict, campaign_id: str, message: str) -> None:
    with pytest.raises(MktError) as exc:
        get_campaign_timeline(conn, workspace["id"], campaign_id)
    assert (exc.value.status, exc.value.message) == (400, message)


def test_another_workspaces_campaign_is_not_found(conn: Any, workspace: dict) -> None:
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    campaign = factories.email_campaign(conn, other)
    with pytest.raises(MktError):
        get_campaign_timeline(conn, workspace["id"], campaign["id"])

"""services/sms/timeline: SMS events at known times land in their buckets, cost included,
and the totals agree with the statistics."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import timeline
from marketing_cli.services.sms import stats
from marketing_cli.services.sms.timeline import SERIES, campaign_timeline
from tests import factories


def _nonzero(bucket: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in bucket.items() if k != "start" and v and v != "0.00"}


def test_events_at_known_times_land_in_their_buckets(conn: sqlite3.Connection, workspace: dict) -> None:
    first = factories.timeline_start(100)
    cid = factories.sms_timeline_world(conn, workspace["id"], first)
    result = campaign_timeline(conn, workspace["id"], cid)
    assert result["status"] == "COMPLETED" and result["started_at"].startswith(timeline.iso(first)[:13])
    assert len(result["hours"]) == 72 and len(result["days"]) == 2
    assert all(set(b) == {"start", *SERIES, "cost"} for b in (*result["hours"], *result["days"]))
    busy = {i: _nonzero(b) for i, b in enumerate(result["hours"]) if _nonzero(b)}
    assert busy == {0: {"delivered": 2}, 1: {"failed": 1}, 2: {"unique_clicks": 2, "total_clicks": 3},
                    5: {"unsubscribed": 1}}
    # sent and charged now: 100-101 hours after the first hour, the second day bucket
    cost = stats.campaign_statistics(conn, workspace["id"], cid)["total_cost"]
    assert [_nonzero(d) for d in result["days"]] == [{"total_clicks": 1}, {"sent": 3, "cost": cost}]
    assert result["totals"] == {"sent": 3, "delivered": 2, "failed": 1, "unique_clicks": 2, "total_clicks": 4,
                                "unsubscribed": 1, "cost": cost}
    aggregate = stats.campaign_statistics(conn, workspace["id"], cid)["aggregate"]
    assert (aggregate["sent"], aggregate["delivered"], aggregate["failed"], aggregate["clicked"],
            aggregate["unsubscribed"]) == tuple(result["totals"][k] for k in
                                                ("sent", "delivered", "failed", "unique_clicks", "unsubscribed"))


def test_a_draft_campaign_has_no_buckets(conn: sqlite3.Connection, workspace: dict) -> None:
    factories.sms_ready(conn, workspace["id"])
    campaign = factories.sms_campaign(conn, workspace["id"])
    assert campaign_timeline(conn, workspace["id"], campaign["id"]) == {
        "campaign_id": campaign["id"], "status": "DRAFT", "started_at": None, "hours": [], "days": [],
        "totals": {**dict.fromkeys(SERIES, 0), "cost": "0.00"}}


def test_a_campaign_due_later_has_not_started(conn: sqlite3.Connection, workspace: dict) -> None:
    from marketing_cli.services.sms import schedule

    factories.sms_ready(conn, workspace["id"])
    factories.sms_contacts(conn, workspace["id"], ["+14155550101"])
    campaign = factories.sms_campaign(conn, workspace["id"])
    schedule.schedule_campaign(conn, workspace["id"], campaign["id"],
                               {"schedule_type": "LATER", "scheduled_at": "2099-01-01T00:00:00Z"})
    result = campaign_timeline(conn, workspace["id"], campaign["id"])
    assert (result["status"], result["started_at"], result["hours"]) == ("QUEUED", None, [])


@pytest.mark.parametrize("campaign_id, message", [
    ("", "Please provide a campaign ID."), ("nope", "We could not find the campaign you are looking for."),
    ("0" * 24, "We could not find the campaign you are looking for.")])
def test_bad_ids(conn: sqlite3.Connection, workspace: dict, campaign_id: str, message: str) -> None:
    with pytest.raises(MktError) as exc:
        campaign_timeline(conn, workspace["id"], campaign_id)
    assert (exc.value.status, exc.value.message) == (400, message)

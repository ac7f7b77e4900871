"""What the faces call: the campaign objects, lists, statistics, schedule previews and
schedule answers of both channels, each with its `estimate` (CONTRACT section 12), so the
API, the CLI and the dashboard read one estimate and show the same numbers.

A live series' definition (a DRAFT that is copied at each occurrence) and a local-time send
carry their next occurrence in `scheduled_at`: the series' next run, the next zone's instant
(or the send's start before its audience is frozen). A sending campaign's `progress.eta_seconds`
counts the messages waiting for their zone and held by quiet hours (groups.eta_seconds).

Lists: one query for the page's series, then one estimate per item; a finished campaign's
estimate reads nothing, a frozen one's is a GROUP BY over its queued messages, a DRAFT's or
a QUEUED one's is its audience's, kept per campaign and state (cache.py) so a page reads
the kept ones (bench/bench_estimates.py measures a page of 50).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.services.delivery import lane_view
from marketing_cli.services.estimates import cache
from marketing_cli.services.estimates import email as email_estimates
from marketing_cli.services.estimates import sms as sms_estimates
from marketing_cli.services.estimates.groups import eta_seconds, next_release
from marketing_cli.storage.db import marks

ACTIVE_LOCAL = ("QUEUED", "PREPROCESSING", "IN_REVIEW", "SENDING", "PAUSED")


# --- email ---------------------------------------------------------------------------------------

def _series_next(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    """campaign id -> the next occurrence of the live series it defines."""
    if not ids:
        return {}
    return {r[0]: r[1] for r in conn.execute(
        f"SELECT campaign_id, next_run_at FROM campaign_series WHERE campaign_id IN ({marks(ids)})"
        " AND status = 'ACTIVE' AND next_run_at IS NOT NULL", ids)}


def _rows(conn: sqlite3.Connection, table: str, ids: list[str]) -> dict[str, sqlite3.Row]:
    if not ids:
        return {}
    return {r["id"]: r for r in conn.execute(f"SELECT * FROM {table} WHERE id IN ({marks(ids)})", ids)}


def _with_estimate(view: dict[str, Any], est: dict[str, Any], row: sqlite3.Row, active: tuple[str, ...],
                   series_next: str | None = None) -> dict[str, Any]:
    view["estimate"] = est
    if series_next:
        view["scheduled_at"] = series_next
    elif row["local_time"] and row["status"] in active:
        upcoming = next_release(est)
        view["scheduled_at"] = upcoming["until"] if upcoming else (row["local_starts_at"] or view["scheduled_at"])
    progress = view.get("progress")
    if progress and row["status"] == "SENDING":
        progress["eta_seconds"] = eta_seconds(est, progress["rate_per_second"])
    return view


def email_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/campaigns/:id and `mkt campaigns show/watch`: the campaign with its estimate."""
    from marketing_cli.services.email import campaigns

    view = campaigns.get_campaign(conn, workspace_id, campaign_id)
    row = campaigns.campaign_row(conn, workspace_id, view["id"])
    series = _series_next(conn, [row["id"]]).get(row["id"])
    view = _with_estimate(view, email_estimates.campaign_estimate(conn, row, series), row, ACTIVE_LOCAL, series)
    return lane_view.with_held_back(conn, workspace_id, view)  # what the provider lanes hold back, and why


def email_campaigns(conn: sqlite3.Connection, workspace_id: int, **query: Any) -> dict[str, Any]:
    """GET /v1/campaigns and `mkt campaigns list`: the page, each item with its estimate."""
    from marketing_cli.services.email import campaigns

    listed = campaigns.list_campaigns(conn, workspace_id, **query)
    ids = [c["id"] for c in listed["campaigns"]]
    rows, series = _rows(conn, "campaigns", ids), _series_next(conn, ids)
    budget = cache.Budget(conn, workspace_id)
    views = {v["id"]: v for v in listed["campaigns"]}
    for row in cache.oldest_first(list(rows.values())):
        est = email_estimates.campaign_estimate(conn, row, series.get(row["id"]), budget=budget)
        _with_estimate(views[row["id"]], est, row, ACTIVE_LOCAL, series.get(row["id"]))
    return listed


def email_statistics(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/campaigns/:id/statistics with the estimate of what is still to go."""
    from marketing_cli.services.email import campaigns, stats

    answer = stats.get_campaign_statistics(conn, workspace_id, campaign_id)
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    answer["estimate"] = email_estimates.campaign_estimate(conn, row, _series_next(conn, [row["id"]]).get(row["id"]))
    return answer


def email_report(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """`mkt campaigns stats` for a person: the report's data (services/email/report.py) with the
    estimate in its statistics, as GET /v1/campaigns/:id/statistics answers it."""
    from marketing_cli.services.email import campaigns, report

    data = report.campaign_report(conn, workspace_id, campaign_id)
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    data["statistics"]["estimate"] = email_estimates.campaign_estimate(
        conn, row, _series_next(conn, [row["id"]]).get(row["id"]))
    return data


def email_schedule_preview(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/schedule/preview: the preview with the estimate; `recipients` is the estimate's."""
    import json

    from marketing_cli.services.email import campaigns, schedule

    preview = schedule.preview_schedule(conn, workspace_id, campaign_id, body)
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    est = email_estimates.preview_estimate(conn, workspace_id, json.loads(row["audience"]), preview["scheduled_at"],
                                           preview["local_time"], row)
    return {**preview, "recipients": est["recipients"], "estimate": est}


def email_estimate(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """The estimate of a stored email campaign alone (`schedule`'s confirmation line)."""
    from marketing_cli.services.email import campaigns

    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    return email_estimates.campaign_estimate(conn, row, _series_next(conn, [row["id"]]).get(row["id"]))


def email_create(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/campaigns: the new DRAFT as GET answers it (with its estimate)."""
    from marketing_cli.services.email import campaigns

    return email_campaign(conn, workspace_id, campaigns.create_campaign(conn, workspace_id, body)["id"])


def email_duplicate(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/duplicate: the copy as GET answers it (with its estimate)."""
    from marketing_cli.services.email import campaigns

    return email_campaign(conn, workspace_id, campaigns.duplicate_campaign(conn, workspace_id, campaign_id)["id"])


def email_summaries(conn: sqlite3.Connection, workspace_id: int, **query: Any) -> dict[str, Any]:
    """The dashboard's email list (services/email/report.py) with each campaign's
    `scheduled_at` and `estimate` as GET /v1/campaigns answers them."""
    from marketing_cli.services.email import report

    listed = report.campaign_summaries(conn, workspace_id, **query)
    return _summaries(listed, email_campaigns(conn, workspace_id, page=query.get("page", 1),
                                              limit=query.get("limit", 50)))


def _summaries(listed: dict[str, Any], full: dict[str, Any]) -> dict[str, Any]:
    by_id = {c["id"]: c for c in full["campaigns"]}
    for item in listed["campaigns"]:
        found = by_id.get(item["id"], {})
        item["scheduled_at"], item["estimate"] = found.get("scheduled_at"), found.get("estimate")
    return listed


# --- SMS -----------------------------------------------------------------------------------------

def sms_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/sms-campaigns/:id and `mkt sms show`: the campaign with its estimate."""
    from marketing_cli.services.sms import campaigns

    return _sms_object(conn, workspace_id, campaigns.get_campaign(conn, workspace_id, campaign_id))


def sms_campaigns(conn: sqlite3.Connection, workspace_id: int, **query: Any) -> dict[str, Any]:
    """GET /v1/sms-campaigns and `mkt sms list`: the page, each item with its estimate."""
    from marketing_cli.services.sms import campaigns

    listed = campaigns.list_campaigns(conn, workspace_id, **query)
    rows = _rows(conn, "sms_campaigns", [c["id"] for c in listed["campaigns"]])
    budget = cache.Budget(conn, workspace_id)
    views = {v["id"]: v for v in listed["campaigns"]}
    for row in cache.oldest_first(list(rows.values())):
        _with_estimate(views[row["id"]], sms_estimates.campaign_estimate(conn, row, budget=budget), row, ("QUEUED",))
    return listed


def sms_statistics(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/sms-campaigns/:id/statistics with the estimate of what is still to go."""
    from marketing_cli.services.sms import campaigns, stats

    answer = stats.campaign_statistics(conn, workspace_id, campaign_id)
    answer["estimate"] = sms_estimates.campaign_estimate(conn, campaigns.campaign_row(conn, workspace_id, campaign_id))
    return answer


def sms_schedule_preview(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/schedule/preview: the preview with the estimate (quiet hours,
    local time, skipped recipients and the cost); `recipients` is the estimate's."""
    import json

    from marketing_cli.services.sms import campaigns, schedule

    preview = schedule.preview_schedule(conn, workspace_id, campaign_id, body)
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    est = sms_estimates.preview_estimate(conn, workspace_id, row["message"] or "", json.loads(row["audience"]),
                                         preview["scheduled_at"], preview["local_time"])
    return {**preview, "recipients": est["recipients"], "estimate": est}


def sms_estimate(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """The estimate of a stored SMS campaign alone (`schedule`'s confirmation line)."""
    from marketing_cli.services.sms import campaigns

    return sms_estimates.campaign_estimate(conn, campaigns.campaign_row(conn, workspace_id, campaign_id))


def _sms_object(conn: sqlite3.Connection, workspace_id: int, view: dict[str, Any]) -> dict[str, Any]:
    from marketing_cli.services.sms import campaigns

    row = campaigns.campaign_row(conn, workspace_id, view["id"])
    return _with_estimate(view, sms_estimates.campaign_estimate(conn, row), row, ("QUEUED",))


def sms_create(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns: the new DRAFT with its estimate, as GET answers it."""
    from marketing_cli.services.sms import campaigns

    return _sms_object(conn, workspace_id, campaigns.create_campaign(conn, workspace_id, body))


def sms_update(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """PATCH /v1/sms-campaigns/:id: the campaign with its estimate, as GET answers it."""
    from marketing_cli.services.sms import campaigns

    return _sms_object(conn, workspace_id, campaigns.update_campaign(conn, workspace_id, campaign_id, body))


def sms_unschedule(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/unschedule: the DRAFT again, with its estimate."""
    from marketing_cli.services.sms import campaigns

    return _sms_object(conn, workspace_id, campaigns.unschedule_campaign(conn, workspace_id, campaign_id))


def sms_duplicate(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/duplicate: the copy with its estimate."""
    from marketing_cli.services.sms import campaigns

    return _sms_object(conn, workspace_id, campaigns.duplicate_campaign(conn, workspace_id, campaign_id))


def sms_summaries(conn: sqlite3.Connection, workspace_id: int, **query: Any) -> dict[str, Any]:
    """The dashboard's SMS list with each campaign's `scheduled_at` and `estimate`."""
    from marketing_cli.services.sms import report

    listed = report.campaign_summaries(conn, workspace_id, **query)
    return _summaries(listed, sms_campaigns(conn, workspace_id, page=query.get("page", 1),
                                            limit=query.get("limit", 50)))

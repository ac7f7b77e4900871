"""An email campaign's report with its deliverability: the data of `mkt campaigns report`,
GET /v1/campaigns/:id/report and the dashboard's campaign page (html.py renders it).

services/email/report.py builds the report and knows nothing of delivery (email sits below
delivery); the rows per sending domain and provider lane of the campaign's messages come from
services/delivery/deliverability.py and are added here, above both.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.services.delivery import deliverability
from marketing_cli.services.email import report


def campaign_report(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    data = report.campaign_report(conn, workspace_id, campaign_id)
    data["deliverability"] = deliverability.campaign_rows(conn, workspace_id, data["campaign"]["id"])
    return data

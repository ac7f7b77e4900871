"""Plans, subscriptions, add-ons, allowances and live usage.

Usage is read from `usage_counters`, which triggers and services keep current as data
changes, so `resources` never counts rows: reading it costs the same at ten contacts or
ten million. Standing resources (contacts, segments, domains, users, automations) use
period ''; monthly_emails and events count the current calendar month ('YYYY-MM');
hourly_emails counts the current hour ('YYYY-MM-DDTHH') and so resets every hour.

A resource that many workers spend at once (monthly_emails and hourly_emails: every send
worker of a workspace, on any machine) is reserved before the work starts (`reserve`, in the
claim's transaction) and settled after (`settle`): `usage_counters.held` counts what is
reserved and not yet settled, `used` what was used, so `used` reads the same as without
reservations.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.storage.db import transaction

RESOURCES = ("contacts", "monthly_emails", "domains", "users", "segments", "automations", "events", "hourly_emails")
MONTHLY = {"monthly_emails", "events"}
HOURLY = {"hourly_emails"}
CENTS = Decimal("0.01")


def period_of(resource: str, moment: datetime | None = None) -> str:
    if resource not in MONTHLY and resource not in HOURLY:
        return ""
    stamp = (moment or clock.utcnow()).isoformat()  # 'YYYY-MM-DDTHH:...' and cheaper than strftime
    return stamp[:7] if resource in MONTHLY else stamp[:13]


def bump_usage(conn: sqlite3.Connection, workspace_id: int, resource: str, amount: int = 1) -> None:
    """Add `amount` to the current period's counter (call inside the write transaction)."""
    conn.execute(
        "INSERT INTO usage_counters (workspace_id, resource, period, used) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = usage_counters.used + excluded.used",
        (workspace_id, resource, period_of(resource), amount),
    )


def reserve(conn: sqlite3.Connection, workspace_id: int, resources: Sequence[str], wanted: int
            ) -> tuple[int, str | None]:
    """Reserve up to `wanted` units of each of `resources`' current period for work about to
    start (a round of messages claimed: one of the month's and one of the hour's allowance
    each): (how many were granted, the first resource whose room set that number when it is
    less than `wanted`, or None).

    Call it inside the claim's transaction: the counter rows are locked from here to its end,
    in the order given (the upsert on PostgreSQL, the write lock on SQLite), so reservations
    of any number of workers are taken one after the other and together never pass an
    allowance: what is granted is at most allowed - used - held of every resource. `settle`
    ends a reservation (used when the work was done, given back when not). Two statements
    whatever the number of resources: the upsert that locks the rows and reads each one's
    allowance, and the update of what they hold."""
    keys = [(resource, period_of(resource)) for resource in resources]
    found = {r[0]: r[1:] for r in conn.execute(
        "INSERT INTO usage_counters (workspace_id, resource, period, used, held) VALUES "
        + ", ".join(["(?, ?, ?, 0, 0)"] * len(keys))
        + " ON CONFLICT (workspace_id, resource, period) DO UPDATE SET held = usage_counters.held"
        f" RETURNING resource, used, held, {_ROW_ALLOWANCE}",
        [x for resource, period in keys for x in (workspace_id, resource, period)]).fetchall()}
    room = {resource: found[resource][2] - found[resource][0] - found[resource][1] for resource, _ in keys}
    granted = max(0, min(wanted, *room.values()))
    # (the allowance that bound the grant: with the month's room left and the hour's used up,
    # the hour's, so the send waits for the next hour instead of stopping for the month)
    short = next(resource for resource, _ in keys if room[resource] <= granted) if granted < wanted else None
    if granted:
        conn.execute("UPDATE usage_counters SET held = held + ? WHERE workspace_id = ? AND ("
                     + " OR ".join(["(resource = ? AND period = ?)"] * len(keys)) + ")",
                     (granted, workspace_id, *(x for key in keys for x in key)))
    return granted, short


def settle(conn: sqlite3.Connection, workspace_id: int, resource: str, period: str, *, released: int,
           used: int = 0) -> None:
    """End `released` reservations of `period` (call inside the write transaction), `used` of
    which were used: they count in `used`, the rest are given back to the allowance."""
    if released or used:
        conn.execute("INSERT INTO usage_counters (workspace_id, resource, period, used, held) VALUES (?, ?, ?, ?, 0)"
                     " ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = usage_counters.used"
                     " + excluded.used, held = CASE WHEN usage_counters.held > ? THEN usage_counters.held - ? ELSE 0 END",
                     (workspace_id, resource, period, used, released, released))


def _plan(conn: sqlite3.Connection, name: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM plans WHERE name = ?", (name,)).fetchone()
    if row is None:
        names = ", ".join(r["name"] for r in conn.execute("SELECT name FROM plans ORDER BY id"))
        raise MktError(400, f"There is no plan named '{name}'. Plans: {names}.")
    return row


def plan_of(conn: sqlite3.Connection, workspace_id: int) -> sqlite3.Row:
    row = conn.execute(
        "SELECT p.* FROM plans p JOIN subscriptions s ON s.plan_id = p.id WHERE s.workspace_id = ?",
        (workspace_id,),
    ).fetchone()
    if row is None:
        return _plan(conn, "free")
    return row


def start_subscription(conn: sqlite3.Connection, workspace_id: int, plan_name: str) -> None:
    plan = _plan(conn, plan_name)
    conn.execute(
        "INSERT INTO subscriptions (workspace_id, plan_id, status, current_period_start)"
        " VALUES (?, ?, 'active', ?)"
        " ON CONFLICT (workspace_id) DO UPDATE SET plan_id = excluded.plan_id, status = 'active',"
        " current_period_start = excluded.current_period_start, current_period_end = NULL,"
        " cancel_at_period_end = 0",
        (workspace_id, plan["id"], clock.now()),
    )


def _names(resources: Iterable[str]) -> str:
    return ", ".join(f"'{r}'" for r in sorted(resources))


# Allowances and usage of a workspace (:ws) as (source, resource, amount) rows; the
# parameters come from limits_params. Usage is read with one seek per resource on the
# counters' key (workspace_id, resource, period) for its current period: hourly_emails gets
# a row for every hour it was used (8,760 a year), and the read used to go through them all.
LIMITS_AND_USAGE = f"""
    SELECT 'plan' AS source, a.resource, a.allowed AS amount FROM plan_allowances a
        JOIN subscriptions s ON s.plan_id = a.plan_id WHERE s.workspace_id = :ws
    UNION ALL
    SELECT 'addon', a.resource, a.amount * sa.quantity FROM subscription_addons sa
        JOIN addons a ON a.id = sa.addon_id WHERE sa.workspace_id = :ws AND a.resource IS NOT NULL
    UNION ALL
    SELECT 'override', resource, allowed FROM allowance_overrides WHERE workspace_id = :ws
    UNION ALL
    SELECT 'used', resource, used FROM usage_counters WHERE workspace_id = :ws
        AND resource IN ({_names(r for r in RESOURCES if r not in MONTHLY and r not in HOURLY)}) AND period = ''
    UNION ALL
    SELECT 'used', resource, used FROM usage_counters WHERE workspace_id = :ws
        AND resource IN ({_names(MONTHLY)}) AND period = :month
    UNION ALL
    SELECT 'used', resource, used FROM usage_counters WHERE workspace_id = :ws
        AND resource IN ({_names(HOURLY)}) AND period = :hour
"""


# One resource's allowance (what fold_limits gives for it): the operator's override, else the
# plan's allowance plus the add-ons'. A scalar subquery, for a statement that also locks the
# resource's counter row (`reserve`): cheaper to plan than LIMITS_AND_USAGE, a hot path's cost.
_ALLOWANCE_OF = """coalesce(
    (SELECT allowed FROM allowance_overrides WHERE workspace_id = {ws} AND resource = {resource}),
    coalesce((SELECT sum(a.allowed) FROM plan_allowances a JOIN subscriptions s ON s.plan_id = a.plan_id
              WHERE s.workspace_id = {ws} AND a.resource = {resource}), 0)
    + coalesce((SELECT sum(a.amount * sa.quantity) FROM subscription_addons sa JOIN addons a ON a.id = sa.addon_id
                WHERE sa.workspace_id = {ws} AND a.resource = {resource}), 0))"""
ALLOWANCE = _ALLOWANCE_OF.format(ws=":ws", resource=":resource")
# The same for each counter row an upsert returns (its workspace and resource): `reserve`.
_ROW_ALLOWANCE = _ALLOWANCE_OF.format(ws="usage_counters.workspace_id", resource="usage_counters.resource")


def usage_hour() -> str:
    """The current hour, 'YYYY-MM-DDTHH' (UTC): what the usage LIMITS_AND_USAGE reads depends on
    besides the rows (its month and hour), for a key of values kept while the rows are unchanged."""
    return clock.utcnow().isoformat()[:13]


def limits_params(workspace_id: int) -> dict[str, Any]:
    """The parameters of LIMITS_AND_USAGE: the workspace, the current month and hour."""
    stamp = clock.utcnow().isoformat()  # 'YYYY-MM-DDTHH:...' and cheaper than strftime
    return {"ws": workspace_id, "month": stamp[:7], "hour": stamp[:13]}


def fold_limits(rows: Iterable[Sequence[Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """(allowed, used) per resource from LIMITS_AND_USAGE's rows: the plan's allowance plus
    add-ons, unless the operator overrode it; usage of the current period."""
    allowed = dict.fromkeys(RESOURCES, 0)
    used = dict.fromkeys(RESOURCES, 0)
    overrides = {}
    for source, resource, amount in rows:
        if resource not in allowed:
            continue
        if source == "used":
            used[resource] = amount
        elif source == "override":
            overrides[resource] = amount
        else:
            allowed[resource] += amount
    allowed.update(overrides)
    return allowed, used


def _limits_and_usage(conn: sqlite3.Connection, workspace_id: int) -> tuple[dict[str, int], dict[str, int]]:
    return fold_limits(conn.execute(LIMITS_AND_USAGE, limits_params(workspace_id)))


def usage(conn: sqlite3.Connection, workspace_id: int, resource: str) -> int:
    row = conn.execute(
        "SELECT used FROM usage_counters WHERE workspace_id = ? AND resource = ? AND period = ?",
        (workspace_id, resource, period_of(resource)),
    ).fetchone()
    return row["used"] if row else 0


def remaining(conn: sqlite3.Connection, workspace_id: int, resource: str) -> int:
    """How many more units of `resource` the workspace may use now (never negative)."""
    allowed, used = _limits_and_usage(conn, workspace_id)
    return max(0, allowed[resource] - used[resource])


PERIODS = {"monthly_emails": " this month", "events": " this month", "hourly_emails": " this hour"}
LIMIT_DETAIL = ("{resource}: the {plan} plan{override} allows {allowed:,}{period} and {used:,} are used. An operator "
                "raises it with `mkt billing allowance set {resource} N` or moves the workspace to a larger plan "
                "with `mkt billing plan set PLAN` (`mkt billing plan list` shows the plans).")


def limit_detail(conn: sqlite3.Connection, workspace_id: int, resource: str) -> str:
    """What a plan-limit error adds to the specification's message: the allowance, the usage
    and the commands that raise it (MktError.detail: the CLI prints it, the API sends it in
    the `X-Error-Detail` header; the error body keeps its fixed shape)."""
    allowed, used = _limits_and_usage(conn, workspace_id)
    overridden = conn.execute("SELECT 1 FROM allowance_overrides WHERE workspace_id = ? AND resource = ?",
                              (workspace_id, resource)).fetchone() is not None
    return LIMIT_DETAIL.format(resource=resource, plan=plan_of(conn, workspace_id)["name"],
                               override=" (with the operator's override)" if overridden else "",
                               allowed=allowed[resource], used=used[resource], period=PERIODS.get(resource, ""))


def limit_error(conn: sqlite3.Connection, workspace_id: int, resource: str, message: str,
                status: int = 400) -> MktError:
    """The error to raise when `resource` is used up: the given message, with limit_detail."""
    return MktError(status, message, limit_detail(conn, workspace_id, resource))


def resources(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    return resources_view(*_limits_and_usage(conn, workspace_id))


def resources_view(allowed: dict[str, int], used: dict[str, int]) -> list[dict[str, Any]]:
    return [{"name": r, "used": used[r], "allowed": allowed[r]} for r in RESOURCES]


_SUBSCRIPTION = (
    "SELECT s.*, p.name AS plan_name, p.price AS plan_price,"
    " EXISTS (SELECT 1 FROM subscription_addons sa WHERE sa.workspace_id = s.workspace_id) AS has_addons"
    " FROM subscriptions s JOIN plans p ON p.id = s.plan_id WHERE s.workspace_id = ?"
)


def subscription(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any] | None:
    return subscription_view(conn, conn.execute(_SUBSCRIPTION, (workspace_id,)).fetchone())


def subscription_view(conn: sqlite3.Connection, row: sqlite3.Row | None) -> dict[str, Any] | None:
    """The Subscription object from a row of `_SUBSCRIPTION` (None: no active subscription)."""
    if row is None or row["status"] != "active":
        return None
    addons = []
    total = Decimal(row["plan_price"])
    if row["has_addons"]:
        for a in conn.execute(
            "SELECT sa.id, sa.addon_id, a.name, a.price, sa.quantity FROM subscription_addons sa"
            " JOIN addons a ON a.id = sa.addon_id WHERE sa.workspace_id = ? ORDER BY sa.id",
            (row["workspace_id"],),
        ):
            price = Decimal(a["price"])
            total += price * a["quantity"]
            addons.append(
                {"id": a["id"], "addon_id": a["addon_id"], "name": a["name"], "price": price, "quantity": a["quantity"]}
            )
    return {
        "plan_id": row["plan_id"],
        "plan_name": row["plan_name"],
        "status": row["status"],
        "current_period_start": row["current_period_start"],
        "current_period_end": row["current_period_end"],
        "cancel_at_period_end": bool(row["cancel_at_period_end"]),
        "next_invoice_total": total.quantize(CENTS),
        "addons": addons,
    }


def get_billing(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    return {"subscription": subscription(conn, workspace_id), "resources": resources(conn, workspace_id)}


def _require_workspace(conn: sqlite3.Connection, workspace_id: int) -> None:
    if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone() is None:
        raise MktError(404, "The workspace does not exist.")


def set_plan(conn: sqlite3.Connection, workspace_id: int, plan_name: str) -> dict[str, Any]:
    """Move to a plan of the catalog. Leaving a plan with conversion tracking turns it off."""
    with transaction(conn):
        _require_workspace(conn, workspace_id)
        plan = _plan(conn, plan_name)
        start_subscription(conn, workspace_id, plan_name)
        if not plan["conversion_tracking"]:
            conn.execute("UPDATE workspaces SET conversion_tracking = 0 WHERE id = ?", (workspace_id,))
        return get_billing(conn, workspace_id)


def set_allowance(conn: sqlite3.Connection, workspace_id: int, resource: str, allowed: int | None) -> dict[str, Any]:
    """Override one allowance; None removes the override (back to plan and add-ons)."""
    if resource not in RESOURCES:
        raise MktError(400, f"There is no resource named '{resource}'. Resources: {', '.join(RESOURCES)}.")
    if allowed is not None and allowed < 0:
        raise MktError(400, "An allowance must be 0 or more.")
    with transaction(conn):
        _require_workspace(conn, workspace_id)
        if allowed is None:
            conn.execute(
                "DELETE FROM allowance_overrides WHERE workspace_id = ? AND resource = ?", (workspace_id, resource)
            )
        else:
            conn.execute(
                "INSERT INTO allowance_overrides (workspace_id, resource, allowed) VALUES (?, ?, ?)"
                " ON CONFLICT (workspace_id, resource) DO UPDATE SET allowed = excluded.allowed",
                (workspace_id, resource, allowed),
            )
        return get_billing(conn, workspace_id)


def list_addons(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [
        {"id": r["id"], "name": r["name"], "price": Decimal(r["price"]), "resource": r["resource"], "amount": r["amount"]}
        for r in conn.execute("SELECT * FROM addons ORDER BY id")
    ]


def list_plans(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    plans = []
    for p in conn.execute("SELECT * FROM plans ORDER BY id").fetchall():
        limits = {r["resource"]: r["allowed"] for r in conn.execute(
            "SELECT resource, allowed FROM plan_allowances WHERE plan_id = ?", (p["id"],))}
        plans.append({
            "id": p["id"],
            "name": p["name"],
            "price": Decimal(p["price"]),
            "conversion_tracking": bool(p["conversion_tracking"]),
            "allowances": {r: limits.get(r, 0) for r in RESOURCES},
        })
    return plans


def set_addon(conn: sqlite3.Connection, workspace_id: int, addon_name: str, quantity: int) -> dict[str, Any]:
    """Set how many units of an add-on the subscription carries (0 removes it)."""
    if quantity < 0:
        raise MktError(400, "An add-on quantity must be 0 or more.")
    with transaction(conn):
        _require_workspace(conn, workspace_id)
        addon = conn.execute("SELECT id FROM addons WHERE name = ?", (addon_name,)).fetchone()
        if addon is None:
            names = ", ".join(r["name"] for r in conn.execute("SELECT name FROM addons ORDER BY id"))
            raise MktError(400, f"There is no add-on named '{addon_name}'. Add-ons: {names}.")
        if quantity == 0:
            conn.execute(
                "DELETE FROM subscription_addons WHERE workspace_id = ? AND addon_id = ?", (workspace_id, addon["id"])
            )
        else:
            conn.execute(
                "INSERT INTO subscription_addons (workspace_id, addon_id, quantity) VALUES (?, ?, ?)"
                " ON CONFLICT (workspace_id, addon_id) DO UPDATE SET quantity = excluded.quantity",
                (workspace_id, addon["id"], quantity),
            )
        return get_billing(conn, workspace_id)

from __future__ import annotations

from typing import Any

from tests.factories import error_of


def test_public_prices_without_key(client: Any, workspace: dict, conn: Any) -> None:
    from marketing_cli.services.account import workspaces

    workspaces.update_operator_settings(conn, workspace["id"], sms_markup="2")
    r = client.get("/v1/sms-rates")
    assert r.status_code == 200
    body = r.json()
    assert body["error"] is None and body["data"]["currency"] == "USD"
    us = next(x for x in body["data"]["rates"] if x["country_code"] == "US")
    assert us == {"country_code": "US", "price_per_segment": "0.00830"}
    assert next(x for x in body["data"]["rates"] if x["country_code"] == "IN")["price_per_segment"] is None


def test_workspace_prices_with_key(client: Any, auth: dict, workspace: dict, conn: Any) -> None:
    from marketing_cli.services.account import workspaces

    workspaces.update_operator_settings(conn, workspace["id"], sms_markup="2")
    rates = client.get("/v1/sms-rates", headers=auth).json()["data"]["rates"]
    assert next(x for x in rates if x["country_code"] == "US")["price_per_segment"] == "0.01660"


def test_bad_key_is_401_not_public(client: Any) -> None:
    r = client.get("/v1/sms-rates", headers={"Authorization": "Bearer wrong"})
    assert error_of(r) == (401, "The API key you provided is invalid or has been revoked.")


def test_rate_limit_after_60_unauthenticated_requests(client: Any, auth: dict) -> None:
    for _ in range(60):
        assert client.get("/v1/sms-rates").status_code == 200
    r = client.get("/v1/sms-rates")
    assert error_of(r) == (429, "You have exceeded the rate limit of 60 requests per minute. "
                                "Please authenticate with an API key for a higher limit.")
    assert r.headers["retry-after"] == "60"
    assert client.get("/v1/sms-rates", headers=auth).status_code == 200  # a key lifts the limit


def test_rate_limiter_window_slides() -> None:
    import time

    import pytest

    from marketing_cli.api.auth import RateLimiter
    from marketing_cli.errors import MktError

    limiter = RateLimiter(2, window=0.2, message="slow down")
    limiter.check("a")
    limiter.check("a")
    limiter.check("b")
    with pytest.raises(MktError):
        limiter.check("a")
    time.sleep(0.25)
    limiter.check("a")

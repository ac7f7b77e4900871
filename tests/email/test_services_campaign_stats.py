"""services/campaign_stats: every number of the statistics shape, written through the
recording functions that sending, tracking and bounce handling call."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import records
from marketing_cli.services.email import stats
from tests import factories

ZERO = {"delivered": 0, "opened": 0, "clicked": 0, "bounced": 0, "unsubscribed": 0, "complained": 0}


def test_provider_of_names_the_big_mailbox_providers() -> None:
    assert stats.provider_of("gmail.com") == "Gmail"
    assert stats.provider_of("GoogleMail.com.") == "Gmail"
    for domain in ("hotmail.com", "outlook.com", "live.com", "msn.com"):
        assert stats.provider_of(domain) == "Outlook"
    for domain in ("yahoo.com", "ymail.com", "aol.com"):
        assert stats.provider_of(domain) == "Yahoo"
    for domain in ("icloud.com", "me.com", "mac.com"):
        assert stats.provider_of(domain) == "iCloud"
    assert [stats.provider_of(d) for d in ("proton.me", "gmx.de", "yandex.ru", "zoho.com", "fastmail.com")] == \
        ["Proton", "GMX", "Yandex", "Zoho", "Fastmail"]
    assert stats.provider_of("example.com") == "Other"
    assert stats.provider_of("mail.gmail.com.evil.io") == "Other"


def test_a_new_campaign_has_zero_statistics_and_one_entry_per_variant(conn: Any, workspace: dict) -> None:
    single = factories.email_campaign(conn, workspace["id"], "One")
    ab = factories.email_campaign(conn, workspace["id"], "Two", "AB_TESTING")
    result = stats.get_campaign_statistics(conn, workspace["id"], single["id"])
    assert result == {
        "aggregate": ZERO, "clicks_by_country": [], "clicks_by_device_type": [], "clicks_by_os": [],
        "delivered_by_provider": [], "link_activity": [],
        "variant_stats": [{"variant_id": single["variants"]["A"], **ZERO}], "outbox": None,
    }
    variants = stats.get_campaign_statistics(conn, workspace["id"], ab["id"])["variant_stats"]
    assert variants == [{"variant_id": ab["variants"]["A"], **ZERO}, {"variant_id": ab["variants"]["B"], **ZERO}]


@pytest.mark.parametrize("campaign_id", [None, "", "   "])
def test_a_missing_id_is_asked_for(conn: Any, workspace: dict, campaign_id: Any) -> None:
    with pytest.raises(MktError) as exc:
        stats.get_campaign_statistics(conn, workspace["id"], campaign_id)
    assert (exc.value.status, exc.value.message) == (400, "Please provide a campaign ID.")


@pytest.mark.parametrize("campaign_id", ["nope", "0" * 24, "ABCDEF0123456789abcdef01", 7, ["x"]])
def test_malformed_or_unknown_ids_are_not_found(conn: Any, workspace: dict, campaign_id: Any) -> None:
    with pytest.raises(MktError) as exc:
        stats.get_campaign_statistics(conn, workspace["id"], campaign_id)
    assert (exc.value.status, exc.value.message) == (400, "We could not find the campaign you are looking for.")


def test_another_workspaces_campaign_is_not_found(conn: Any, workspace: dict) -> None:
    other = factories.workspace(conn, "Other")
    theirs = factories.email_campaign(conn, other["id"])
    with pytest.raises(MktError) as exc:
        stats.get_campaign_statistics(conn, workspace["id"], theirs["id"])
    assert exc.value.message == "We could not find the campaign you are looking for."
    assert stats.get_campaign_statistics(conn, other["id"], theirs["id"])["aggregate"] == ZERO


@pytest.fixture
def world(conn: Any, workspace: dict) -> dict[str, Any]:
    """An A/B campaign: 6 recipients on A, 3 on B, two links per variant."""
    ws = workspace["id"]
    campaign = factories.email_campaign(conn, ws, "Spring", "AB_TESTING")
    a = factories.email_recipients(conn, ws, campaign, ["a1@gmail.com", "a2@gmail.com", "a3@hotmail.com",
                                                        "a4@yahoo.com", "a5@example.com", "a6@icloud.com"])
    b = factories.email_recipients(conn, ws, campaign, ["b1@gmail.com", "b2@outlook.com", "b3@me.com"], "B")
    links_a = stats.register_links(conn, campaign["id"], campaign["variants"]["A"],
                                   ["https://shop.example/sale", "https://shop.example/about"])
    links_b = stats.register_links(conn, campaign["id"], campaign["variants"]["B"], ["https://shop.example/sale"])
    return {"ws": ws, "campaign": campaign, "a": a, "b": b, "links_a": links_a, "links_b": links_b}


def test_every_number_of_the_shape(conn: Any, world: dict) -> None:
    a, b, la, lb = world["a"], world["b"], world["links_a"], world["links_b"]
    sale_a, about_a, sale_b = la["https://shop.example/sale"], la["https://shop.example/about"], \
        lb["https://shop.example/sale"]
    for message in a[:5] + b:
        assert stats.record_delivery(conn, message) is True
    assert stats.record_failure(conn, a[5], "550 5.1.1 no such user") is True
    # opens: a1 twice (counts once), a2 once, a2 by a privacy proxy (ignored), b1 once
    assert stats.record_open(conn, a[0]) is True
    assert stats.record_open(conn, a[0]) is False
    assert stats.record_open(conn, a[1], machine=True) is False
    assert stats.record_open(conn, a[1]) is True
    assert stats.record_open(conn, b[0]) is True
    # clicks: a1 three times (first from a Windows desktop in FR), a2 once, a3 by a scanner, b1 once
    assert stats.record_click(conn, a[0], sale_a, "desktop", "Windows", "FR") is True
    assert stats.record_click(conn, a[0], sale_a, "mobile", "iOS", "US") is False
    assert stats.record_click(conn, a[0], about_a, "mobile", "iOS", "US") is False
    assert stats.record_click(conn, a[1], about_a, "mobile", "iOS", "US") is True
    assert stats.record_click(conn, a[2], sale_a, "desktop", "Linux", "DE", machine=True) is False
    assert stats.record_click(conn, b[0], sale_b, "tablet", "Android", None) is True
    # unsubscribes, bounces, complaints: each counts once
    assert stats.record_unsubscribe(conn, a[1]) is True
    assert stats.record_unsubscribe(conn, a[1]) is False
    assert stats.record_bounce(conn, a[3], "soft") is True
    assert stats.record_bounce(conn, a[3], "hard") is False
    assert stats.record_bounce(conn, b[2], "hard") is True
    assert stats.record_complaint(conn, a[4]) is True
    assert stats.record_complaint(conn, a[4]) is False

    result = stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])
    variants = world["campaign"]["variants"]
    assert result["aggregate"] == {"delivered": 8, "opened": 3, "clicked": 3, "bounced": 2, "unsubscribed": 1,
                                   "complained": 1}
    assert result["variant_stats"] == [
        {"variant_id": variants["A"], "delivered": 5, "opened": 2, "clicked": 2, "bounced": 1, "unsubscribed": 1,
         "complained": 1},
        {"variant_id": variants["B"], "delivered": 3, "opened": 1, "clicked": 1, "bounced": 1, "unsubscribed": 0,
         "complained": 0},
    ]
    assert result["clicks_by_country"] == [{"country": "FR", "click_count": 1}, {"country": "US", "click_count": 1},
                                           {"country": "Unknown", "click_count": 1}]
    assert result["clicks_by_device_type"] == [{"device_type": "desktop", "click_count": 1},
                                               {"device_type": "mobile", "click_count": 1},
                                               {"device_type": "tablet", "click_count": 1}]
    assert result["clicks_by_os"] == [{"operating_system": "Android", "click_count": 1},
                                      {"operating_system": "Windows", "click_count": 1},
                                      {"operating_system": "iOS", "click_count": 1}]
    assert result["delivered_by_provider"] == [
        {"service_provider": "Gmail", "delivery_count": 3}, {"service_provider": "Outlook", "delivery_count": 2},
        {"service_provider": "Other", "delivery_count": 1}, {"service_provider": "Yahoo", "delivery_count": 1},
        {"service_provider": "iCloud", "delivery_count": 1}]
    assert result["link_activity"] == [
        {"url": "https://shop.example/sale", "total_clicks": 3, "unique_clicks": 2},
        {"url": "https://shop.example/about", "total_clicks": 2, "unique_clicks": 2},
    ]


def test_contact_statistics_follow_the_events(conn: Any, world: dict) -> None:
    campaign, sale = world["campaign"], world["links_a"]["https://shop.example/sale"]
    person = factories.contact(conn, world["ws"], "ann@gmail.com")
    [m] = stats.add_messages(conn, campaign["id"], campaign["variants"]["A"], [(person["id"], "ann@gmail.com")])
    stats.record_delivery(conn, m, at="2026-11-20T10:00:00.000Z")
    stats.record_delivery(conn, m, at="2026-11-20T10:00:01.000Z")
    stats.record_open(conn, m, at="2026-11-20T11:00:00.000Z")
    stats.record_open(conn, m, at="2026-11-20T12:00:00.000Z")
    stats.record_open(conn, m, machine=True, at="2026-11-20T13:00:00.000Z")
    stats.record_click(conn, m, sale, "desktop", "Windows", "FR", at="2026-11-20T11:30:00.000Z")
    stats.record_click(conn, m, sale, "desktop", "Windows", "FR", machine=True, at="2026-11-20T14:00:00.000Z")
    stats.record_bounce(conn, m, "soft")
    shown = records.get_contact(conn, world["ws"], person["id"])
    assert shown["statistics"] == {"total_opens": 2, "total_clicks": 1, "total_bounces": 1, "total_delivered": 1}
    assert shown["last_opened_at"] == "2026-11-20T12:00:00.000Z"
    assert shown["last_clicked_at"] == "2026-11-20T11:30:00.000Z"


def test_failed_messages_are_never_delivered_and_delivered_ones_never_fail(conn: Any, world: dict) -> None:
    a = world["a"]
    assert stats.record_failure(conn, a[0], "550 rejected") is True
    assert stats.record_delivery(conn, a[0]) is False
    assert stats.record_failure(conn, a[0], "550 again") is False
    assert stats.record_delivery(conn, a[1], "Gmail", smtp_message_id="abc@mkt.example") is True
    assert stats.record_failure(conn, a[1], "550 late") is False
    result = stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])
    assert result["aggregate"]["delivered"] == 1
    assert stats.message_for_smtp_id(conn, "<abc@mkt.example>") == a[1]
    assert stats.message_for_smtp_id(conn, "other@mkt.example") is None


def test_the_delivery_provider_can_be_given_by_the_sender(conn: Any, world: dict) -> None:
    stats.record_delivery(conn, world["a"][4], "Gmail")  # example.com hosted by Google, the sender says
    result = stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])
    assert result["delivered_by_provider"] == [{"service_provider": "Gmail", "delivery_count": 1}]


def test_unknown_messages_record_nothing(conn: Any, world: dict) -> None:
    link = world["links_a"]["https://shop.example/sale"]
    assert stats.record_delivery(conn, 999_999) is False
    assert stats.record_open(conn, 999_999) is False
    assert stats.record_click(conn, 999_999, link, "desktop", "Windows", "FR") is False
    assert stats.record_unsubscribe(conn, 999_999) is False
    assert stats.record_bounce(conn, 999_999, "hard") is False
    assert stats.record_complaint(conn, 999_999) is False
    assert stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])["aggregate"] == ZERO


def test_a_click_on_another_variants_link_is_refused_and_writes_nothing(conn: Any, world: dict) -> None:
    with pytest.raises(MktError) as exc:
        stats.record_click(conn, world["a"][0], world["links_b"]["https://shop.example/sale"], "desktop", "Mac OS X",
                           "GB")
    assert (exc.value.status, exc.value.message) == (404, "The link does not belong to this message's campaign.")
    result = stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])
    assert result["aggregate"]["clicked"] == 0 and result["clicks_by_country"] == []


def test_a_bounce_kind_must_be_hard_or_soft(conn: Any, world: dict) -> None:
    with pytest.raises(MktError) as exc:
        stats.record_bounce(conn, world["a"][0], "complaint")
    assert (exc.value.status, exc.value.message) == (400, "A bounce is 'hard' or 'soft'.")


def test_device_os_and_country_are_normalised(conn: Any, world: dict) -> None:
    a, link = world["a"], world["links_a"]["https://shop.example/sale"]
    stats.record_click(conn, a[0], link, "smart-tv", "", "")
    stats.record_click(conn, a[1], link, "spider", "  ", None)
    result = stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])
    assert result["clicks_by_device_type"] == [{"device_type": "other", "click_count": 2}]
    assert result["clicks_by_os"] == [{"operating_system": "Other", "click_count": 2}]
    assert result["clicks_by_country"] == [{"country": "Unknown", "click_count": 2}]


def test_breakdowns_sort_by_count_then_name_and_stop_at_ten(conn: Any, workspace: dict) -> None:
    ws = workspace["id"]
    campaign = factories.email_campaign(conn, ws)
    countries = [f"C{i:02d}" for i in range(12)]
    # C00 gets 3 first clicks, C01 and C02 2 each, the other nine 1 each (ties by name)
    plan = ["C01", "C02", "C00", "C01", "C00", "C02", "C00", *countries[3:]]
    providers = [f"user{i}@{d}" for i, d in enumerate(["gmail.com"] * 4 + ["aol.com"] * 2 + ["example.com"] * 3)]
    messages = factories.email_recipients(conn, ws, campaign, [f"r{i}@x{i}.example" for i in range(len(plan))]
                                          + providers)
    link = stats.register_links(conn, campaign["id"], campaign["variants"]["A"], ["https://x.example/"])
    [link_id] = link.values()
    for message, country in zip(messages, plan):
        stats.record_click(conn, message, link_id, "mobile", f"OS {country}", country)
    for message in messages[len(plan):]:
        stats.record_delivery(conn, message)
    result = stats.get_campaign_statistics(conn, ws, campaign["id"])
    expected = [("C00", 3), ("C01", 2), ("C02", 2), *((c, 1) for c in countries[3:10])]
    assert [(r["country"], r["click_count"]) for r in result["clicks_by_country"]] == expected
    assert [(r["operating_system"], r["click_count"]) for r in result["clicks_by_os"]] == \
        [(f"OS {c}", n) for c, n in expected]
    assert result["clicks_by_device_type"] == [{"device_type": "mobile", "click_count": 16}]
    assert result["delivered_by_provider"] == [
        {"service_provider": "Gmail", "delivery_count": 4}, {"service_provider": "Other", "delivery_count": 3},
        {"service_provider": "Yahoo", "delivery_count": 2}]
    assert result["aggregate"]["clicked"] == 16 and result["aggregate"]["delivered"] == 9
    assert result["link_activity"] == [{"url": "https://x.example/", "total_clicks": 16, "unique_clicks": 16}]


def test_adding_a_recipient_twice_keeps_one_message(conn: Any, workspace: dict) -> None:
    ws = workspace["id"]
    campaign = factories.email_campaign(conn, ws)
    contact = factories.contact(conn, ws, "dup@gmail.com")
    first = stats.add_messages(conn, campaign["id"], campaign["variants"]["A"], [(contact["id"], "dup@gmail.com")])
    again = stats.add_messages(conn, campaign["id"], campaign["variants"]["A"],
                               [(contact["id"], "dup@gmail.com")] * 2)
    assert again == first * 2
    assert stats.register_links(conn, campaign["id"], campaign["variants"]["A"], ["https://a/", "https://a/"]) == \
        stats.register_links(conn, campaign["id"], campaign["variants"]["A"], ["https://a/"])


def test_deliveries_in_a_batch_count_each_message_once(conn: Any, world: dict) -> None:
    a, b = world["a"], world["b"]
    stats.record_failure(conn, a[5], "550")
    assert stats.record_deliveries(conn, [*a, *b, a[0], 999_999]) == 8
    assert stats.record_deliveries(conn, a) == 0
    result = stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])
    assert result["aggregate"]["delivered"] == 8
    assert [v["delivered"] for v in result["variant_stats"]] == [5, 3]
    assert sum(p["delivery_count"] for p in result["delivered_by_provider"]) == 8


# SQLite's trace callback and EXPLAIN QUERY PLAN: the file's query plans. On PostgreSQL the same
# indexes exist (the schema comparison of tests/platform/test_engines.py), and its planner picks
# by statistics, so a plan on a table of ten rows says nothing about ten million.
@pytest.mark.sqlite_only
def test_reading_never_touches_the_messages_and_lookups_use_indexes(conn: Any, world: dict) -> None:
    """What keeps the read constant at 10M messages: only counter, breakdown and link rows,
    each found by its key; the sender's and tracker's lookups are index seeks."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        stats.get_campaign_statistics(conn, world["ws"], world["campaign"]["id"])
    finally:
        conn.set_trace_callback(None)
    queries = [q for q in seen if q.lstrip().upper().startswith("SELECT")]
    assert len(queries) == 4 and not any("email_messages" in q or "email_clicks" in q for q in queries)
    for query in queries:
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + query))  # parameters expanded
        assert "SCAN email_" not in plan and "SCAN campaign" not in plan, plan
    lookups = {
        "SELECT id FROM email_messages WHERE smtp_message_id = ?": "email_messages_smtp_id",
        "SELECT id FROM email_messages WHERE token = ?": "email_messages_token",
        "SELECT id FROM email_messages WHERE campaign_id = ? AND status = ? ORDER BY id LIMIT 100":
            "email_messages_status",
        "SELECT 1 FROM email_clicks WHERE message_id = ? AND link_id = ? AND machine = 0": "email_clicks_message",
        "SELECT id FROM email_messages WHERE contact_id = ? ORDER BY id DESC LIMIT 1": "email_messages_contact",
    }
    for query, index in lookups.items():
        params = (None,) * query.count("?")
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + query, params))
        assert f"USING INDEX {index}" in plan or f"USING COVERING INDEX {index}" in plan, (query, plan)


def test_campaigns_do_not_share_numbers_and_the_last_delivery_is_found(conn: Any, world: dict) -> None:
    ws, first = world["ws"], world["campaign"]
    later = factories.email_campaign(conn, ws, "Summer")
    person = factories.contact(conn, ws, "a1@gmail.com")  # the upsert finds a1's contact
    [again] = stats.add_messages(conn, later["id"], later["variants"]["A"], [(person["id"], "a1@gmail.com")])
    assert stats.last_message_to(conn, ws, "A1@gmail.com") is None
    stats.record_delivery(conn, world["a"][0])
    assert stats.last_message_to(conn, ws, "a1@gmail.com") == world["a"][0]
    stats.record_delivery(conn, again)
    stats.record_open(conn, again)
    assert stats.last_message_to(conn, ws, "a1@gmail.com") == again
    other = factories.workspace(conn, "Other")
    assert stats.last_message_to(conn, other["id"], "a1@gmail.com") is None
    assert stats.get_campaign_statistics(conn, ws, later["id"])["aggregate"] == {**ZERO, "delivered": 1, "opened": 1}
    assert stats.get_campaign_statistics(conn, ws, first["id"])["aggregate"] == {**ZERO, "delivered": 1}


def test_progress_counters_include_recipients_and_failures(conn: Any, world: dict) -> None:
    cid = world["campaign"]["id"]
    assert stats.campaign_counters(conn, cid) == {"recipients": 9, **ZERO, "failed": 0}
    stats.record_failure(conn, world["a"][0], "550")
    stats.record_deliveries(conn, world["b"])
    assert stats.campaign_counters(conn, cid) == {"recipients": 9, **ZERO, "delivered": 3, "failed": 1}
    assert stats.campaign_counters(conn, "0" * 24) == {"recipients": 0, **ZERO, "failed": 0}


def test_ties_are_listed_in_code_point_order_whatever_the_databases_collation(conn: Any, workspace: dict) -> None:
    """Breakdowns and links with equal counts come in SQLite's order (BINARY: "Outlook" before
    "iPhone", "a_b" before "ab") on both engines. On PostgreSQL the columns are given a
    dictionary collation first, as a database created with en_US.UTF-8 has, which sorts
    "iPhone" before "Outlook"; the top-N cut of a breakdown depends on this order too."""
    from marketing_cli.storage import dialect

    if dialect.postgresql(conn):
        conn.execute('ALTER TABLE email_campaign_breakdowns ALTER COLUMN key TYPE TEXT COLLATE "en-x-icu"')
        conn.execute('ALTER TABLE email_links ALTER COLUMN url TYPE TEXT COLLATE "en-x-icu"')
    campaign = factories.campaign(conn, workspace["id"])
    variant = conn.execute("SELECT id FROM campaign_variants WHERE campaign_id = ?", (campaign["id"],)).fetchone()[0]
    oses = ["iPhone", "Outlook", "a_b", "ab", "Zeta", "zeta"]
    urls = [f"https://example.com/{name}" for name in oses]
    for key, url in zip(oses, urls):
        conn.execute("INSERT INTO email_campaign_breakdowns (campaign_id, dimension, key, count) VALUES (?, 'os', ?, 3)",
                     (campaign["id"], key))
        conn.execute("INSERT INTO email_links (campaign_id, variant_id, url, total_clicks, unique_clicks)"
                     " VALUES (?, ?, ?, 2, 1)", (campaign["id"], variant, url))
    answer = stats.get_campaign_statistics(conn, workspace["id"], campaign["id"])
    shown = [row["operating_system"] for row in answer["clicks_by_os"]]
    assert shown == sorted(oses)[:len(shown)] and shown[:2] == ["Outlook", "Zeta"]
    assert [row["url"] for row in answer["link_activity"]] == sorted(urls)

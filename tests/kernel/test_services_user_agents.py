"""User-Agent classification: real User-Agent strings of each device class, each OS family
named as ua-parser names it, and the machine opens and clicks that can be recognised."""

from __future__ import annotations

import pytest

from marketing_cli.kernel import user_agents
from marketing_cli.kernel.user_agents import DEVICE_TYPES, classify

HUMANS = [
    # desktop
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 "
     "Safari/537.36", "desktop", "Windows"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 "
     "Safari/537.36 Edg/124.0.0.0", "desktop", "Windows"),
    ("Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17531; Pro)", "desktop", "Windows"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)",
     "desktop", "Mac OS X"),  # Apple Mail on a Mac, privacy protection off
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 "
     "Safari/605.1.15", "desktop", "Mac OS X"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", "desktop", "Linux"),
    ("Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", "desktop", "Ubuntu"),
    ("Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 "
     "Safari/537.36", "desktop", "Chrome OS"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Thunderbird/115.10.1",
     "desktop", "Linux"),
    # mobile
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "Version/17.5 Mobile/15E148 Safari/604.1", "mobile", "iOS"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "Mobile/15E148", "mobile", "iOS"),  # Apple Mail on an iPhone, privacy protection off
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 "
     "Mobile Safari/537.36", "mobile", "Android"),
    ("Mozilla/5.0 (Linux; Android 14; SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) "
     "SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36", "mobile", "Android"),
    ("Mozilla/5.0 (Windows Phone 10.0; Android 6.0.1; Microsoft; Lumia 950) AppleWebKit/537.36 (KHTML, like "
     "Gecko) Chrome/52.0.2743.116 Mobile Safari/537.36 Edge/15.14977", "mobile", "Windows Phone"),
    # tablet
    ("Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 "
     "Mobile/15E148 Safari/604.1", "tablet", "iOS"),
    ("Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 "
     "Safari/537.36", "tablet", "Android"),  # Galaxy Tab: Android without "Mobile"
    ("Mozilla/5.0 (Linux; Android 14; Tablet; rv:125.0) Gecko/125.0 Firefox/125.0", "tablet", "Android"),
    ("Mozilla/5.0 (Linux; Android 11; KFTRWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/124.3.1 like "
     "Chrome/124.0.6367.82 Safari/537.36", "tablet", "Android"),  # Kindle Fire
    # other
    ("Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) 76.0.3809.146/6.0 TV "
     "Safari/537.36", "other", "Tizen"),
    ("Mozilla/5.0 (PlayStation; PlayStation 5/2.26) AppleWebKit/605.1.15 (KHTML, like Gecko)", "other", "Other"),
    ("SomeMailClient/1.0", "other", "Other"),
]

MACHINES = [
    ("", "no User-Agent"),
    ("   ", "blank"),
    ("-", "dash, as logs write a missing one"),
    ("Mozilla/5.0", "Apple Mail Privacy Protection"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 "
     "Safari/537.36 Edg/120.0.0.0 BingPreview/1.0b", "Microsoft BingPreview link scanner"),
    ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "crawler"),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "crawler"),
    ("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "link expander"),
    ("python-requests/2.31.0", "HTTP library"),
    ("curl/8.4.0", "HTTP client"),
    ("Go-http-client/1.1", "HTTP library"),
    ("Apache-HttpClient/4.5.14 (Java/17.0.1)", "HTTP library"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 "
     "Safari/537.36", "headless browser"),
]


@pytest.mark.parametrize(("ua", "device_type", "os_family"), HUMANS)
def test_people(ua: str, device_type: str, os_family: str) -> None:
    assert classify(ua) == (device_type, os_family, False)


@pytest.mark.parametrize(("ua", "why"), MACHINES)
def test_machines(ua: str, why: str) -> None:
    result = classify(ua)
    assert result.machine is True, why
    assert result.device_type == "other"


def test_machine_keeps_the_os_ua_parser_saw() -> None:
    assert classify(MACHINES[4][0]).os_family == "Windows"  # BingPreview runs a Windows Edge
    assert classify("Mozilla/5.0").os_family == "Other"


@pytest.mark.parametrize("ua", [
    "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)",
    "YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html",
])
def test_mail_image_proxies_are_the_person_opening(ua: str) -> None:
    # Gmail and Yahoo fetch images through their proxy when the message is opened.
    assert classify(ua) == ("other", "Other", False)


def test_none_is_a_machine_and_every_device_type_is_a_contract_key() -> None:
    assert classify(None) == ("other", "Other", True)
    assert {classify(ua).device_type for ua, _, _ in HUMANS} == set(DEVICE_TYPES)


def test_results_are_memoised_and_long_strings_cut() -> None:
    ua = HUMANS[0][0]
    user_agents._classify.cache_clear()
    classify(ua)
    classify(ua)
    assert user_agents._classify.cache_info().hits == 1
    padded = ua + " " * 400
    assert classify(padded + "A" * 1000) == classify(padded + "A" * 5000) == ("desktop", "Windows", False)
    assert user_agents._classify.cache_info().hits == 2  # both cut to the same 512 characters


def test_named_tuple_unpacks() -> None:
    device_type, os_family, machine = classify(HUMANS[9][0])
    assert (device_type, os_family, machine) == ("mobile", "iOS", False)


def test_any_text_is_classified_without_error() -> None:
    import random

    rng = random.Random(7)
    for _ in range(300):
        text = "".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randrange(0, 60)))
        assert classify(text).device_type in DEVICE_TYPES
    assert classify("Mozilla/5.0 \ud800 (Windows NT 10.0)").os_family == "Windows"  # a lone surrogate
    assert classify("Mozilla/5.0 (Windows NT 10.0) Ünïcödé/1.0").os_family == "Windows"

"""Device type, OS family and "machine" flag of an open or a click, from its User-Agent.

    classify(user_agent) -> Classification(device_type, os_family, machine)

Parsing is ua-parser's (the maintained uap-core rules; `ua-parser[regex]` installs its Rust
matcher, about 0.05 ms a string against 2 ms for the pure-Python fallback), and results
are memoised per string (an LRU of 4,096: a campaign's clicks repeat a few hundred
distinct User-Agents). Strings are cut at 512 characters before parsing.

device_type, one of `desktop`, `mobile`, `tablet`, `other` (the keys of
`clicks_by_device_type`), from ua-parser's device and OS:
- tablet: device iPad or Kindle, a device ua-parser names a tablet (brand
  `Generic_Android_Tablet`, family `Generic Tablet`...), or Android without the `Mobile`
  token (Android browsers put `Mobile` in phone User-Agents only);
- mobile: device iPhone or iPod, or a phone OS (iOS, Android, Windows Phone, BlackBerry,
  KaiOS...), or a User-Agent with the `Mobile` token;
- desktop: a desktop OS (Windows, Mac OS X, Linux and its distributions, Chrome OS, the BSDs);
- other: everything else (TVs, consoles, unknown clients, machines).

os_family is ua-parser's OS family as it names it (`Windows`, `iOS`, `Android`,
`Mac OS X`, `Linux`, `Ubuntu`, `Chrome OS`...), `Other` when it knows none.

machine is True when the request is known to come from software fetching on the
recipient's behalf rather than from the recipient. Signals, in order:
1. no User-Agent (empty, blanks, or `-`): every mail client and browser sends one;
2. exactly `Mozilla/5.0`: Apple Mail Privacy Protection. With MPP on, Apple's proxies
   fetch every remote image of a message when it is delivered to the device, whether or
   not it is read, through the iCloud Private Relay egress network, with this bare
   User-Agent. (Its addresses are Apple's relay ranges; the classification here uses the
   User-Agent only, so an MPP open counts as a machine open whatever the address);
3. ua-parser's device family `Spider`: crawlers and link expanders it knows (bingbot,
   Googlebot, BingPreview, Slackbot...);
4. link scanners by their product token, whatever ua-parser makes of the rest:
   `BingPreview` (Microsoft's link previews);
5. HTTP libraries and headless browsers, by ua-parser's family (python-requests, curl,
   Wget, Go-http-client, Java, Apache-HttpClient, okhttp, axios, HeadlessChrome...),
   which is what ad-hoc security scanners run.
Not machines: the image proxies of Gmail (`GoogleImageProxy`, through ggpht.com) and Yahoo
(`YahooMailProxy`) fetch a message's images when the person opens it (then cache them),
so their request is that person's open: they count, as device `other` and OS `Other`
(the proxy hides the reader's device). Counting them as machines would make every Gmail
and Yahoo open invisible.
Not recognisable from the User-Agent: Microsoft Defender "Safe Links" and similar gateway
scanners that fetch links with an ordinary browser User-Agent from cloud addresses; their
clicks count as human ones.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

DEVICE_TYPES = ("desktop", "mobile", "tablet", "other")
MAX_LENGTH = 512

APPLE_MPP_USER_AGENT = "Mozilla/5.0"
OPEN_PROXY_TOKENS = ("GoogleImageProxy", "YahooMailProxy")  # fetch on the person's open
PROXY_TOKENS = ("BingPreview",)
MACHINE_FAMILIES = frozenset({
    "BingPreview",
    "Python Requests", "Python-urllib", "curl", "Wget", "Go-http-client", "Java", "Apache-HttpClient",
    "okhttp", "axios", "HeadlessChrome", "PhantomJS",
})
TABLET_DEVICES = frozenset({"iPad", "Kindle", "Kindle Fire", "Generic Tablet"})
TABLET_BRANDS = frozenset({"Generic_Android_Tablet"})
PHONE_DEVICES = frozenset({"iPhone", "iPod"})
MOBILE_OSES = frozenset({
    "iOS", "Android", "Windows Phone", "Windows Mobile", "BlackBerry OS", "BlackBerry Tablet OS", "KaiOS",
    "Symbian OS", "Symbian^3", "Firefox OS", "HarmonyOS",
})
DESKTOP_OSES = frozenset({
    "Windows", "Mac OS X", "macOS", "Linux", "Ubuntu", "Debian", "Fedora", "Red Hat", "SUSE", "openSUSE",
    "Linux Mint", "Arch Linux", "Gentoo", "Mandriva", "Kubuntu", "Chrome OS", "Chromecast OS", "FreeBSD",
    "OpenBSD", "NetBSD", "Solaris",
})


class Classification(NamedTuple):
    device_type: str
    os_family: str
    machine: bool


def classify(user_agent: str | None) -> Classification:
    """(device_type, os_family, machine) of one User-Agent header value (see the module docstring)."""
    text = (user_agent or "").strip()[:MAX_LENGTH]
    if not text.isascii():  # lone surrogates would make the parser's UTF-8 encoding fail
        text = text.encode("utf-8", "replace").decode("utf-8")
    return _classify(text)


@lru_cache(maxsize=4096)
def _classify(text: str) -> Classification:
    if text in ("", "-"):
        return Classification("other", "Other", True)
    if text == APPLE_MPP_USER_AGENT:
        return Classification("other", "Other", True)
    if any(token in text for token in OPEN_PROXY_TOKENS):
        return Classification("other", "Other", False)
    import ua_parser

    parsed = ua_parser.parse(text).with_defaults()
    os_family = parsed.os.family or "Other"
    machine = (parsed.device.family == "Spider" or parsed.user_agent.family in MACHINE_FAMILIES
               or any(token in text for token in PROXY_TOKENS))
    if machine:
        return Classification("other", os_family, True)
    return Classification(_device_type(text, parsed.device, os_family), os_family, False)


def _device_type(text: str, device: object, os_family: str) -> str:
    family = getattr(device, "family", "Other")
    brand = getattr(device, "brand", None)
    if family in TABLET_DEVICES or brand in TABLET_BRANDS or "Tablet" in family:
        return "tablet"
    if os_family == "Android" and "Mobile" not in text:
        return "tablet"
    if family in PHONE_DEVICES or os_family in MOBILE_OSES or "Mobile" in text:
        return "mobile"
    if os_family in DESKTOP_OSES:
        return "desktop"
    return "other"

"""UTC time, one way everywhere: RFC 3339 strings with milliseconds and a trailing Z."""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def format_ts(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def now() -> str:
    return format_ts(utcnow())


def parse_ts(text: str) -> datetime:
    """Parse an RFC 3339 timestamp; raises ValueError when it is not one."""
    if not isinstance(text, str) or "T" not in text.upper():
        raise ValueError(text)
    value = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(text)
    return value.astimezone(timezone.utc)

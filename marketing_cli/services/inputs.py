"""Checks on decoded request bodies, shared by every service.

Both faces hand services plain JSON values (the CLI builds them from options), so the
type checks live here: a member of the wrong JSON type is a 400 naming the member, never
a 500 further down.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.errors import MktError

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
    float: "a number",
}
_MISSING = object()


def type_error(member: str, expected: type) -> MktError:
    return MktError(400, f"The member '{member}' must be {_TYPE_NAMES[expected]}.")


def is_type(value: Any, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, expected)


def require_object(body: Any, message: str) -> dict[str, Any]:
    """The body must be a JSON object; otherwise the endpoint's own parse message."""
    if not isinstance(body, dict):
        raise MktError(400, message)
    return body


def member(body: dict[str, Any], name: str, expected: type, *, path: str | None = None) -> Any:
    """body[name] when present and not null, checked against `expected`; None otherwise."""
    value = body.get(name)
    if value is None:
        return None
    if not is_type(value, expected):
        raise type_error(path or name, expected)
    return value


def int_list(body: dict[str, Any], name: str, *, path: str | None = None) -> list[int] | None:
    """An optional array of integers (null or absent gives None)."""
    value = member(body, name, list, path=path)
    if value is None:
        return None
    for item in value:
        if not is_type(item, int):
            raise MktError(400, f"The member '{path or name}' must be an array of integers.")
    return value

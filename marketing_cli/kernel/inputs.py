"""The one decoder of what users send, and the checks on decoded values.

Both faces hand services plain JSON values: the API decodes request bodies with
`decode_json`, the CLI decodes JSON options with the same function and checks every
argument with `check_text`. Text that is not valid Unicode (a lone surrogate written as
`\\ud800` in JSON, or a byte that is not UTF-8 in argv) is a 400 naming the member here,
before any service sees it; a member of the wrong JSON type is a 400 naming the member,
never a 500 further down.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable
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


def required_text(value: Any, path: str, *, missing: str, too_long: str, max_length: int) -> str:
    """A required text member (a name): trimmed; blank or absent is `missing`, longer than
    `max_length` after trimming is `too_long`, another JSON type names the member."""
    if value is not None and not isinstance(value, str):
        raise type_error(path, str)
    text = (value or "").strip()
    if not text:
        raise MktError(400, missing)
    if len(text) > max_length:
        raise MktError(400, too_long)
    return text


def int_list(body: dict[str, Any], name: str, *, path: str | None = None) -> list[int] | None:
    """An optional array of integers (null or absent gives None)."""
    value = member(body, name, list, path=path)
    if value is None:
        return None
    for item in value:
        if not is_type(item, int):
            raise MktError(400, f"The member '{path or name}' must be an array of integers.")
    return value


NOT_UNICODE = "The member '{member}' is not valid Unicode text."
# PostgreSQL's text cannot hold U+0000, so neither engine takes it: one answer on both.
HOLDS_NUL = "The member '{member}' holds the NUL character (\\u0000), which text may not contain."
NOT_UNICODE_ARGUMENT = "The argument '{argument}' is not valid UTF-8 text."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_EXACT_INT = 2**53  # beyond it a float no longer holds every whole number


def _number(text: str) -> int | float:
    """A JSON number with a fraction or exponent: a whole one (`3.0`, `1e3`) is the integer it
    equals. JSON and JSON Schema do not tell 3.0 from 3 ("integer" admits both), so an ID or a
    count written either way means the same; a fraction stays a float."""
    value = float(text)
    if value.is_integer() and abs(value) < _EXACT_INT:
        return int(value)
    return value


def parse_json(raw: bytes | str) -> Any:
    """Parse JSON text strictly: ValueError (or RecursionError) when it is not JSON.

    NaN and Infinity are refused: they are not JSON, and the encoder cannot write them.
    """
    return json.loads(raw, parse_constant=_reject_constant, parse_float=_number)


def decode_json(raw: bytes | str, invalid_message: str) -> Any:
    """A request body: not JSON is MktError(400, invalid_message); text holding a lone
    surrogate (which SQLite and the encoder can store or write neither) is a 400 naming
    the member."""
    try:
        value = parse_json(raw)
    except (ValueError, RecursionError):
        raise MktError(400, invalid_message) from None
    check_unicode(value)
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_string(text: str, where: str) -> None:
    if not _encodable(text):
        raise MktError(400, NOT_UNICODE.format(member=where))
    if "\x00" in text:
        raise MktError(400, HOLDS_NUL.format(member=where))


def check_unicode(value: Any, path: str = "body") -> None:
    """Every string (keys included) of a decoded JSON value must be encodable as UTF-8 and
    free of U+0000."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            _check_string(item, where)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_string(key, where)
                stack.append((child, key if where == "body" else f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))


def check_text(argument: str) -> str:
    """A command-line argument must be UTF-8 (argv bytes that are not arrive as surrogates)."""
    if not _encodable(argument):
        shown = argument.encode("utf-8", "backslashreplace").decode("ascii", "replace")
        raise MktError(400, NOT_UNICODE_ARGUMENT.format(argument=shown))
    return argument


# --- strict input: members and parameters nobody declared ---------------------------------
#
# A typo must never be read as "no filter" (CONTRACT section 4): a member or query parameter
# that the operation does not declare is refused, naming it, before any service sees the
# request. What is declared comes from one JSON Schema per operation (api/schemas/), the
# same one the OpenAPI document publishes with `additionalProperties: false`.

UNKNOWN_MEMBER = "Unknown member '{member}'"
UNKNOWN_PARAMETER = "Unknown query parameter '{parameter}'"


def _is_object_schema(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def closed(schema: Any) -> Any:
    """`schema` with `additionalProperties: false` on every object schema that lists its
    properties and says nothing of others, at every depth. An object schema without
    `properties` (contact field values keyed by merge tag, event properties, editor JSON)
    stays open: what it may hold is the workspace's, checked by the services."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: closed(value) if key in _SUBSCHEMAS else value for key, value in schema.items()}
    if "properties" in schema:
        result["properties"] = {name: closed(sub) for name, sub in schema["properties"].items()}
        if _is_object_schema(schema) and "additionalProperties" not in schema:
            result["additionalProperties"] = False
    return result


_SUBSCHEMAS = ("items", "allOf", "anyOf", "oneOf", "if", "then", "else", "not")


def check_members(value: Any, schema: dict[str, Any], path: str = "") -> None:
    """MktError(400, "Unknown member 'x'") for the first member of `value` that a closed
    object of `schema` (see `closed`) does not list; nested members are named with dots and
    array indexes (`variants[0].subjet`), as the type errors name them. Only the members are
    checked here: their types and values are the services' to judge."""
    for branch in schema.get("anyOf", ()) or schema.get("oneOf", ()):
        if _admits(branch, value):  # the branch of the value's JSON type (an object, or a list of them)
            check_members(value, branch, path)
            return
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties = schema["properties"]
        if schema.get("additionalProperties") is False:
            for name in value:
                if name not in properties:
                    raise MktError(400, UNKNOWN_MEMBER.format(member=f"{path}.{name}" if path else name))
        for name, child in value.items():
            if name in properties:
                check_members(child, properties[name], f"{path}.{name}" if path else name)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            check_members(item, schema["items"], f"{path}[{index}]")


def _admits(schema: dict[str, Any], value: Any) -> bool:
    """Whether `value` is of the branch's JSON type and, for an object, carries the values its
    `const` members name (a discriminator such as a flow step's `"type": "wait"`)."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if isinstance(value, dict) and "object" in kinds:
        return all(value.get(name, sub["const"]) == sub["const"]
                   for name, sub in schema.get("properties", {}).items() if isinstance(sub, dict) and "const" in sub)
    return isinstance(value, list) and "array" in kinds


def check_parameters(names: Iterable[str], declared: Container[str]) -> None:
    """MktError(400, "Unknown query parameter 'x'") for the first name not declared."""
    for name in names:
        if name not in declared:
            raise MktError(400, UNKNOWN_PARAMETER.format(parameter=name))

"""Check tool arguments against the JSON Schema subset the tool catalogue uses.

Supported keywords: ``type`` (object, string, integer, number, boolean, array), ``properties``,
``required``, ``additionalProperties`` (``false`` rejects unknown keys, anything else drops them:
unknown keys are never passed on), ``default``, ``enum``, ``minimum``/``maximum``,
``minLength``/``maxLength``, ``pattern``, ``format`` (``uuid``, ``date-time``), ``items`` and
``minItems``/``maxItems``.

Two leniencies on top of the schema: ``null`` for an optional property counts as "not given"
(clients generated from typed signatures send it), and an integral float (``5.0``) is an integer.
Strings never carry NUL characters (PostgreSQL cannot store them).
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

__all__ = ["ArgumentError", "validate"]

_TYPE_NAMES = {
    "object": "an object",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
}


class ArgumentError(ValueError):
    """An argument that does not fit the tool's input schema; ``field`` is its path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def validate(schema: dict[str, Any], value: Any) -> dict[str, Any]:
    """The arguments with defaults filled in and unknown keys dropped; raises ArgumentError."""
    checked = _check(schema, value, "arguments")
    assert isinstance(checked, dict)
    return checked


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return key if path == "arguments" else f"{path}.{key}"


@lru_cache(maxsize=64)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _check(schema: dict[str, Any], value: Any, path: str) -> Any:
    kind = schema.get("type")
    if kind is not None:
        value = _check_type(kind, value, path)
    if "enum" in schema and value not in schema["enum"]:
        raise ArgumentError(path, f"must be one of {schema['enum']}")
    if isinstance(value, dict):
        return _check_object(schema, value, path)
    if isinstance(value, list):
        return _check_array(schema, value, path)
    if isinstance(value, str):
        return _check_string(schema, value, path)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ArgumentError(path, f"must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ArgumentError(path, f"must be at most {schema['maximum']}")
    return value


def _check_type(kind: str, value: Any, path: str) -> Any:
    ok = {
        "object": isinstance(value, dict),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "integer": (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, float) and value.is_integer()),
    }[kind]
    if not ok:
        raise ArgumentError(path, f"must be {_TYPE_NAMES[kind]}, got {_json_type(value)}")
    if kind == "integer":
        return int(value)
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _check_object(schema: dict[str, Any], value: dict[str, Any], path: str) -> dict[str, Any]:
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    unknown = sorted(set(value) - set(properties))
    if unknown and schema.get("additionalProperties") is False:
        raise ArgumentError(_join(path, unknown[0]), "unknown argument")
    checked: dict[str, Any] = {}
    for key, sub in properties.items():
        given = value.get(key)
        if given is None:
            if key in required:
                raise ArgumentError(_join(path, key), "is required")
            if "default" in sub:
                checked[key] = sub["default"]
            continue
        checked[key] = _check(sub, given, _join(path, key))
    return checked


def _check_array(schema: dict[str, Any], value: list[Any], path: str) -> list[Any]:
    if "minItems" in schema and len(value) < schema["minItems"]:
        raise ArgumentError(path, f"must have at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise ArgumentError(path, f"must have at most {schema['maxItems']} items")
    items = schema.get("items")
    if items is None:
        return value
    return [_check(items, item, _join(path, i)) for i, item in enumerate(value)]


def _check_string(schema: dict[str, Any], value: str, path: str) -> Any:
    if "\x00" in value:
        raise ArgumentError(path, "must not contain NUL characters")
    if "minLength" in schema and len(value) < schema["minLength"]:
        if schema["minLength"] == 1:
            raise ArgumentError(path, "must not be empty")
        raise ArgumentError(path, f"must be at least {schema['minLength']} characters long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise ArgumentError(path, f"must be at most {schema['maxLength']} characters long")
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        message = schema.get("errorMessage") or f"must match {schema['pattern']}"
        raise ArgumentError(path, message)
    match schema.get("format"):
        case "uuid":
            try:
                return UUID(value)
            except ValueError:
                raise ArgumentError(path, "must be a UUID") from None
        case "date-time":
            return _parse_datetime(value, path)
    return value


def _parse_datetime(value: str, path: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ArgumentError(path, "must be an ISO-8601 date-time") from None
    return parsed  # a time without a zone is taken as UTC by MemoryFilters

"""Request bodies checked before Litestar parses them: a nesting limit (deep JSON would exhaust
Python's recursion while decoding) and strict types (Litestar converts leniently, so ``"k": "5"``
would pass as 5 and ``"known_at": 0`` as the epoch; a whole number such as ``5.0`` is an integer,
as in JSON Schema). Runs as a guard, after authentication."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import numpy as np
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from knowmind.api.errors import field_of_message
from knowmind.errors import InvalidInputError

__all__ = ["MAX_JSON_DEPTH", "json_too_deep", "strict_body_guard"]

MAX_JSON_DEPTH = 64
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_EXACT_INTEGERS = 2**53  # every whole float up to this size is an exact integer


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects nest deeper than ``limit`` (brackets inside strings do not
    count). Linear in the body; most bodies are answered by counting brackets alone."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return bool(steps.size) and int(np.cumsum(steps).max()) > limit


def _body_type(handler: BaseRouteHandler) -> Any | None:
    data = handler.parsed_fn_signature.parameters.get("data")
    return None if data is None else data.annotation


async def strict_body_guard(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    if not isinstance(connection, Request) or connection.method not in _BODY_METHODS:
        return
    body = await connection.body()
    if not body:
        return
    if json_too_deep(body):
        raise InvalidInputError("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    target = _body_type(handler)
    if target is None:
        return
    try:
        msgspec.json.decode(body, type=target, strict=True)
    except msgspec.ValidationError as error:
        _check_with_whole_numbers(body, target, error)
    except msgspec.DecodeError:
        return  # not JSON at all: the handler's own parsing says so


def _check_with_whole_numbers(body: bytes, target: Any, error: msgspec.ValidationError) -> None:
    """JSON has numbers, not integers and floats: ``8.0`` is the integer 8 (JSON Schema says
    so too), which msgspec's strict mode refuses. Retried with whole numbers as integers, the
    body passes or the first error stands (Litestar's lenient decoding then reads 8.0 as 8)."""
    try:
        plain = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return  # not JSON at all: the handler's own parsing says so
    try:
        msgspec.convert(_whole_numbers(plain), target, strict=True)
    except msgspec.ValidationError:
        field, message = field_of_message(str(error))
        raise InvalidInputError(field or "body", message) from None


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    return value

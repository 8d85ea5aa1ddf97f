"""Request bodies checked before Litestar parses them, as the README promises: strict.

- JSON only under a JSON content type (``application/json``, ``application/*+json``): 415
  otherwise (form, multipart and ``text/plain`` bodies were read as JSON).
- A nesting limit (deep JSON would exhaust Python's recursion while decoding): 422.
- A key twice in one object: 400 naming it (which one counts would be the parser's guess).
- Strict types: Litestar converts leniently, so ``"k": "5"`` would pass as 5, ``"known_at": 0``
  as the epoch and ``"k": 5.0`` as 5; here an integer is spelled as one: 422 naming the field.
- Unknown fields: 422 naming them, for every body built on ``StrictBody``. Bodies that take
  unknown keys by design say so (knowmind's ``POST /api/documents``, whose client may send more
  in a later version); MCP tool arguments are checked by ``knowmind.mcp.validation``.

Runs as a guard, after authentication, on every route that takes a body (``data``)."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import msgspec.inspect as mi
import numpy as np
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import HTTPException
from litestar.handlers.base import BaseRouteHandler
from litestar.status_codes import HTTP_415_UNSUPPORTED_MEDIA_TYPE
from msgspec import Struct

from knowmind.api.errors import field_of_message
from knowmind.errors import InvalidInputError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "MAX_JSON_DEPTH",
    "DuplicateKeyError",
    "StrictBody",
    "duplicate_key",
    "json_too_deep",
    "strict_body_guard",
]

MAX_JSON_DEPTH = 64
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# a string (a key when a colon follows) or an object's brace; brackets and scalars are skipped
_KEY_OR_BRACE = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"(\s*:)?|[{}]', re.DOTALL)
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json$")
_UNKNOWN_FIELD = "unknown field"


D = TypeVar("D", bound="DataclassInstance")


class StrictBody(Struct, forbid_unknown_fields=True):
    """A request body that refuses unknown fields (422 naming them)."""

    def into(self, kind: type[D], **given: Any) -> D:
        """The service's request (a dataclass) this body asks for: each field of ``kind`` that
        the body has by the same name, as it is, and ``given`` for the rest and for those that
        must be converted first (filters, relations)."""
        names = {f.name for f in dataclasses.fields(kind)}
        shared = {name: getattr(self, name) for name in self.__struct_fields__ if name in names}
        return kind(**(shared | given))


class DuplicateKeyError(InvalidInputError):
    """A JSON object with a key twice: ambiguous, so refused before it is read (400)."""

    status_code = 400


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects nest deeper than ``limit`` (brackets inside strings do not
    count). Linear in the body; most bodies are answered by counting brackets alone."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return bool(steps.size) and int(np.cumsum(steps).max()) > limit


def duplicate_key(body: bytes) -> str | None:
    """The first key that appears twice in one object of a well-formed JSON document, or None.
    One pass over its strings and braces (numbers and the strings' insides are skipped by the
    regular expression), so a body of a million numbers costs no more than reading it."""
    open_objects: list[set[str]] = []
    for match in _KEY_OR_BRACE.finditer(body):
        token = match.group(0)
        if token == b"{":
            open_objects.append(set())
        elif token == b"}":
            if open_objects:
                open_objects.pop()
        elif match.group(2) is not None and open_objects:
            raw = match.group(1)  # "a" and "\\u0061" are the same key
            key = msgspec.json.decode(b'"' + raw + b'"', type=str) if b"\\" in raw else raw.decode()
            if key in open_objects[-1]:
                return key
            open_objects[-1].add(key)
    return None


def _body_type(handler: BaseRouteHandler) -> Any | None:
    data = handler.parsed_fn_signature.parameters.get("data")
    return None if data is None else data.annotation


def _require_json(connection: Request[Any, Any, Any]) -> None:
    media_type = connection.content_type[0].strip().lower()
    if not _JSON_TYPE.match(media_type):
        said = media_type or "no Content-Type"
        raise HTTPException(
            status_code=HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            detail=f"Content-Type: the body must be JSON (application/json), not {said}",
        )


async def strict_body_guard(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    if not isinstance(connection, Request) or connection.method not in _BODY_METHODS:
        return
    body = await connection.body()
    if not body:
        return
    target = _body_type(handler)
    if target is not None:
        _require_json(connection)
    if json_too_deep(body):
        raise InvalidInputError("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if target is None:
        return
    try:
        msgspec.json.decode(body, type=target, strict=True)
        problem = None
    except msgspec.ValidationError as error:
        problem = error
    except msgspec.DecodeError:
        return  # not JSON at all: the handler's own parsing says so
    if problem is not None and not _well_formed(body):
        return  # the handler's own parsing says where the JSON breaks
    repeated = duplicate_key(body)
    if repeated is not None:
        raise DuplicateKeyError(repeated, "this key appears twice in one JSON object")
    if problem is not None:
        raise _invalid(body, target, str(problem))


def _well_formed(body: bytes) -> bool:
    try:
        msgspec.json.decode(body)
    except msgspec.DecodeError:
        return False
    return True


def _invalid(body: bytes, target: Any, message: str) -> InvalidInputError:
    field, detail = field_of_message(message)
    if _UNKNOWN_FIELD in message:
        unknown = _unknown_keys(body, target, field.rsplit(".", 1)[0] if "." in field else "")
        if len(unknown) > 1:
            names = ", ".join(f"`{name}`" for name in unknown)
            detail = f"Object contains unknown fields {names}"
    return InvalidInputError(field or "body", detail)


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _unknown_keys(body: bytes, target: Any, path: str) -> list[str]:
    """Every key the object at ``path`` (msgspec's ``relations[0]``) has and its struct does
    not take, in body order (msgspec names only the first); [] when that cannot be told."""
    try:
        value: Any = msgspec.json.decode(body)
        info: Any = mi.type_info(target)
        for name, index in _SEGMENT.findall(path):
            info = _container(info)
            if index:
                value, info = value[int(index)], info.item_type
            else:
                fields = {field.encode_name: field.type for field in info.fields}
                value, info = value[name], fields[name]
        struct = _container(info)
        known = {field.encode_name for field in struct.fields}
        return [key for key in value if key not in known]
    except (msgspec.DecodeError, LookupError, AttributeError, TypeError, ValueError):
        return []


def _container(info: Any) -> Any:
    """The struct or list type behind metadata and ``| None``."""
    while True:
        if isinstance(info, mi.Metadata):
            info = info.type
        elif isinstance(info, mi.UnionType):
            info = next(t for t in info.types if isinstance(t, mi.StructType | mi.ListType))
        else:
            return info

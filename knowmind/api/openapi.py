"""The OpenAPI document made complete: every status a route can answer, with its body.

Litestar documents a handler's success status and a generic 400; the error statuses here follow
from what the handler declares: a scope (the auth guard: 401, 403, 429), parameters or a body
(422, the field named), a body (413 over the size limit; a JSON body the strict-body guard reads:
415 when it is not JSON, 400 for a key twice), a path id (404), the database or the embedding
queue (503, and 429 for a tenant's full share). A handler's ``opt`` adds the rest:
``"errors": (409,)`` statuses only it knows; ``"also": {200: "..."}`` a second success status
with the same body (``204`` and those in ``"empty"`` without one); ``"error_body"`` (or
``"error_bodies"`` per status) another error body; ``"request_body"`` and ``"response"`` the
bodies of a handler that reads and writes them itself. Litestar's generic 400 is dropped: 400
means a duplicate key (or, where a handler says so, MCP's JSON-RPC errors). Request bodies are
documented as msgspec decodes them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
from litestar import Litestar
from litestar.handlers.http_handlers import HTTPRouteHandler
from litestar.openapi.spec import (
    Components,
    OpenAPIFormat,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Reference,
    RequestBody,
    Schema,
)
from litestar.routes import HTTPRoute

from knowmind.api.field_docs import FIELDS, PARAMETERS, SCHEMA_FIELDS

__all__ = ["ERROR_DESCRIPTIONS", "document_statuses", "jsonrpc_request_body", "jsonrpc_response"]

ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "A key twice in one JSON object (`field` names it); MCP: not a valid JSON-RPC 2.0 "
    "message, or an unsupported MCP-Protocol-Version",
    401: "Missing, unknown or revoked bearer token",
    403: "The token lacks the scope this route needs",
    404: "Nothing with this id in the token's tenant",
    409: "Conflicts with what is stored (the detail says what)",
    413: "Request body over the server's size limit",
    415: "The body is not JSON: send it as application/json",
    422: "Invalid input; `field` names the offending field",
    429: "Rate limit, the tenant's share of the embedding queue or its quota on queued "
    "background work exhausted (the detail names which); see Retry-After",
    503: "Database unavailable or the server saturated; see Retry-After",
}
_RETRY_AFTER = {429, 503}
_ERROR_REFS = {
    "default": Reference(ref="#/components/schemas/Error"),
    # the knowmind-compatible routes answer errors as knowmind's clients expect them
    "knowmind": Reference(ref="#/components/schemas/KnowmindError"),
    # MCP answers what it refuses itself as a JSON-RPC error
    "jsonrpc": Reference(ref="#/components/schemas/JsonRpcError"),
}
_ERROR_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    required=["status_code", "detail"],
    properties={
        "status_code": Schema(type=OpenAPIType.INTEGER, description="the HTTP status"),
        "detail": Schema(type=OpenAPIType.STRING, description="what went wrong, for a person"),
        "field": Schema(type=OpenAPIType.STRING, description="the offending field (422, 409)"),
        "id": Schema(
            type=OpenAPIType.STRING,
            format=OpenAPIFormat.UUID,
            description="409: the id of what exists already (a tenant of that name)",
        ),
    },
)

_KNOWMIND_ERROR_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    required=["error"],
    properties={"error": Schema(type=OpenAPIType.STRING, description="what went wrong")},
)
_JSONRPC_VERSION = Schema(type=OpenAPIType.STRING, enum=["2.0"], description="always 2.0")
_JSONRPC_ERROR_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    required=["jsonrpc", "id", "error"],
    properties={
        "jsonrpc": _JSONRPC_VERSION,
        "id": Schema(
            one_of=[
                Schema(type=OpenAPIType.STRING),
                Schema(type=OpenAPIType.NUMBER),
                Schema(type=OpenAPIType.NULL),
            ],
            description="the request's id (null when it could not be read)",
        ),
        "error": Schema(
            type=OpenAPIType.OBJECT,
            required=["code", "message"],
            properties={
                "code": Schema(
                    type=OpenAPIType.INTEGER,
                    description="JSON-RPC error code, e.g. -32602 invalid params, -32001 "
                    "unauthorized, -32029 rate limited",
                ),
                "message": Schema(type=OpenAPIType.STRING, description="what went wrong"),
            },
            description="why the request failed",
        ),
    },
)


def document_statuses(app: Litestar) -> None:
    """Complete the app's OpenAPI document in place (call once, before it is served)."""
    schema = app.openapi_schema
    if schema.components is None:
        schema.components = Components()
    bodies: set[type] = set()
    for route, handler in _handlers(app):
        item = (schema.paths or {}).get(route.path_format)
        if item is None:
            continue
        for method in handler.http_methods:
            operation = getattr(item, method.lower(), None)
            if isinstance(operation, Operation):
                _complete(operation, handler)
                _describe(operation, handler)
        if "response_type" in handler.opt:  # a handler that answers in more than one form
            bodies.add(handler.opt["response_type"])
        data = handler.parsed_fn_signature.parameters.get("data")
        if data is not None and isinstance(data.annotation, type):
            bodies.add(data.annotation)
    schema.components.schemas = {
        **(schema.components.schemas or {}),
        **_request_schemas(bodies),
        "Error": _ERROR_SCHEMA,
        "KnowmindError": _KNOWMIND_ERROR_SCHEMA,
        "JsonRpcError": _JSONRPC_ERROR_SCHEMA,
    }
    for name, component in schema.components.schemas.items():
        if isinstance(component, Schema):
            _describe_fields(component, SCHEMA_FIELDS.get(name, {}))


def _handlers(app: Litestar) -> Iterator[tuple[HTTPRoute, HTTPRouteHandler]]:
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                if handler.include_in_schema:
                    yield route, handler


def _request_schemas(bodies: set[type]) -> dict[str, Schema]:
    """The request bodies' schemas as msgspec decodes them (strictly): Litestar's own drop the
    constraints of list items (``list[ClassName]`` became a list of any strings)."""
    ordered = sorted(bodies, key=lambda t: t.__name__)
    _, components = msgspec.json.schema_components(ordered, ref_template=_REF_TEMPLATE)
    return {name: _to_spec(node) for name, node in components.items()}


_REF_TEMPLATE = "#/components/schemas/{name}"
_SPEC_KEYS = {
    "anyOf": "any_of",
    "oneOf": "one_of",
    "allOf": "all_of",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
    "uniqueItems": "unique_items",
    "exclusiveMinimum": "exclusive_minimum",
    "exclusiveMaximum": "exclusive_maximum",
    "multipleOf": "multiple_of",
    "additionalProperties": "additional_properties",
    "minProperties": "min_properties",
    "maxProperties": "max_properties",
    "propertyNames": "property_names",
    "not": "schema_not",
}


def _to_spec(node: Any) -> Any:
    """A JSON Schema (msgspec's output) as Litestar's OpenAPI spec objects."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return Reference(ref=node["$ref"])
    fields: dict[str, Any] = {}
    for key, value in node.items():
        name = _SPEC_KEYS.get(str(key), str(key))
        if key == "type":
            value = (
                [OpenAPIType(t) for t in value] if isinstance(value, list) else OpenAPIType(value)
            )
        elif key == "format":
            value = OpenAPIFormat(value)
        elif key == "properties":
            value = {prop: _to_spec(sub) for prop, sub in value.items()}
        elif key in ("anyOf", "oneOf", "allOf"):
            value = [_to_spec(sub) for sub in value]
        elif key in ("items", "additionalProperties", "propertyNames", "not"):
            value = _to_spec(value)
        fields[name] = value
    return Schema(**fields)


def _complete(operation: Operation, handler: HTTPRouteHandler) -> None:
    if "request_body" in handler.opt:  # a handler that reads its body itself
        operation.request_body = handler.opt["request_body"]
    responses = dict(operation.responses or {})
    if "response" in handler.opt:  # ... or writes its own
        responses[str(handler.status_code or 200)] = handler.opt["response"]
    declared = set(handler.opt.get("errors", ()))
    responses.pop("400", None)  # Litestar's generic one; ours are added below
    success = next(
        (
            r
            for code, r in responses.items()
            if code.startswith("2") and not isinstance(r, Reference)
        ),
        None,
    )
    if success is not None and success.content and "response_type" in handler.opt:
        ref = Reference(ref=_REF_TEMPLATE.format(name=handler.opt["response_type"].__name__))
        success.content["application/json"] = OpenAPIMediaType(schema=ref)
    if success is not None and success.content and handler.opt.get("event_stream"):
        # the same answer as server-sent events when the body asks to stream it
        event = Schema(
            type=OpenAPIType.OBJECT,
            required=["data"],
            properties={
                "event": Schema(
                    type=OpenAPIType.STRING,
                    description="token (a piece of the answer), then done (the whole result)",
                ),
                "data": Schema(
                    type=OpenAPIType.STRING,
                    description="token: the piece of text; done: the answer as JSON (AnswerOut)",
                ),
            },
        )
        success.content["text/event-stream"] = OpenAPIMediaType(schema=event)
    also: Mapping[int, str] = handler.opt.get("also", {})
    empty = {204, *handler.opt.get("empty", ())}
    for status, description in also.items():
        content = None if status in empty or success is None else success.content
        responses[str(status)] = OpenAPIResponse(description=description, content=content)
    error_body = handler.opt.get("error_body", "default")
    bodies: Mapping[int, str] = handler.opt.get("error_bodies", {})
    for status in sorted(_error_statuses(operation, handler) | declared):
        body = _ERROR_REFS[bodies.get(status, error_body)]
        responses.setdefault(str(status), _error_response(status, body))
    operation.responses = responses


def _error_statuses(operation: Operation, handler: HTTPRouteHandler) -> set[int]:
    statuses = {503}
    if handler.opt.get("scope") is not None:
        statuses |= {401, 403, 429}
    parameters = list(operation.parameters or [])
    if parameters or operation.request_body is not None:
        statuses.add(422)
    if operation.request_body is not None:
        statuses.add(413)
    if handler.parsed_fn_signature.parameters.get("data") is not None:
        statuses |= {400, 415}  # the strict-body guard: a key twice; not JSON
    if any(getattr(p, "param_in", None) == "path" for p in parameters):
        statuses.add(404)
    return statuses


def _error_response(status: int, body: Reference) -> OpenAPIResponse:
    headers: dict[str, OpenAPIHeader | Reference] | None = None
    if status in _RETRY_AFTER:
        retry = OpenAPIHeader(schema=Schema(type=OpenAPIType.INTEGER), description="seconds")
        headers = {"Retry-After": retry}
    return OpenAPIResponse(
        description=ERROR_DESCRIPTIONS[status],
        headers=headers,
        content={"application/json": OpenAPIMediaType(schema=body)},
    )


def jsonrpc_response() -> OpenAPIResponse:
    """A JSON-RPC 2.0 response: ``result``, or ``error`` (also for an unknown method or a
    tool's refusal); as JSON, or as one server-sent event when the client accepts only that."""
    body = Schema(
        type=OpenAPIType.OBJECT,
        required=["jsonrpc", "id"],
        properties={
            "jsonrpc": _JSONRPC_VERSION,
            "id": _JSONRPC_ERROR_SCHEMA.properties["id"],  # type: ignore[index]
            "result": Schema(type=OpenAPIType.OBJECT, description="the method's result"),
            "error": _JSONRPC_ERROR_SCHEMA.properties["error"],  # type: ignore[index]
        },
    )
    return OpenAPIResponse(
        description="The JSON-RPC response",
        content={
            "application/json": OpenAPIMediaType(schema=body),
            "text/event-stream": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
        },
    )


def jsonrpc_request_body() -> RequestBody:
    """A JSON-RPC 2.0 request (with ``id``) or notification (without), as MCP sends them; an
    unknown method is answered in a 200 with a JSON-RPC error."""
    message: dict[str, Any] = {
        "jsonrpc": _JSONRPC_VERSION,
        "id": Schema(
            one_of=[Schema(type=OpenAPIType.STRING), Schema(type=OpenAPIType.NUMBER)],
            description="the request's id, echoed in the response (none: a notification)",
        ),
        "method": Schema(
            type=OpenAPIType.STRING,
            min_length=1,
            description="e.g. initialize, tools/list, tools/call",
        ),
        "params": Schema(
            one_of=[Schema(type=OpenAPIType.OBJECT), Schema(type=OpenAPIType.NULL)],
            description="the method's parameters (tools/call: name and arguments)",
        ),
    }
    body = Schema(type=OpenAPIType.OBJECT, required=["jsonrpc", "method"], properties=message)
    return RequestBody(required=True, content={"application/json": OpenAPIMediaType(schema=body)})


def _describe(operation: Operation, handler: HTTPRouteHandler) -> None:
    """An operation's summary and description from its handler (one rule for all): what the
    decorator says, else the docstring — its first sentence the summary, the whole of it the
    description; the parameters from ``field_docs.PARAMETERS``."""
    doc = _markdown(handler.fn.__doc__ or "")
    operation.summary = handler.summary or _first_sentence(doc) or None
    operation.description = handler.description or doc or None
    for parameter in operation.parameters or []:
        if not isinstance(parameter, Reference) and not parameter.description:
            parameter.description = PARAMETERS.get(parameter.name)


def _markdown(docstring: str) -> str:
    """A docstring as Markdown: paragraphs kept, lines inside one joined, ``x`` as `x`."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    text = "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
    return text.replace("``", "`")


def _first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (not one inside ``e.g.``)."""
    match = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", text)
    return (text[: match.start()] if match else text.split("\n\n")[0]).strip()


def _describe_fields(schema: Schema, table: Mapping[str, str]) -> None:
    """Describe each property that has no description of its own: by ``table`` (the schema's
    fields), else by ``field_docs.FIELDS`` (a name that means the same everywhere)."""
    for name, prop in (schema.properties or {}).items():
        if not prop.description:
            own = _variant_description(prop)
            prop.description = own or table.get(name) or FIELDS.get(name)


def _variant_description(prop: Schema | Reference) -> str | None:
    """The description of an optional field's non-null variant (``Annotated[T, Meta(...)] |
    None`` puts it there, not on the field)."""
    variants = [] if isinstance(prop, Reference) else (prop.any_of or prop.one_of or [])
    return next((v.description for v in variants if v.description), None)

"""MCP over JSON-RPC 2.0, independent of HTTP: one incoming message in, one reply (or none) out.

The server is stateless: ``tools/call`` works without a prior ``initialize``, and every
request carries its own bearer token (checked by the HTTP layer before a message gets here).

Choices where the protocol leaves room:

* a tool call whose token lacks the tool's scope is answered as a tool result with
  ``isError: true`` (the model sees why), not as a JSON-RPC error;
* every tool result, errors included, is one text item holding a JSON object: clients parse the
  text as JSON. Errors look like ``{"error": "<field>: <message>", "field": "<field>"}``;
* JSON-RPC batches are refused (protocol 2025-06-18 removed them) by the HTTP layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from knowmind import __version__
from knowmind.errors import InvalidInputError, KnowmindError
from knowmind.mcp.tools import TOOLS, ToolServices, listed_tools
from knowmind.mcp.validation import ArgumentError, validate
from knowmind.services.auth import Principal, scope_refusal, user_bound_refusal

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PROTOCOL_VERSION",
    "Incoming",
    "MCPDispatcher",
    "ProtocolError",
    "error_reply",
    "parse_message",
]

PROTOCOL_VERSION = "2025-06-18"
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

_INSTRUCTIONS = (
    "knowmind is long-term memory and a knowledge graph. Before answering about people, "
    "projects, customers or past decisions, call knowmind_recall_memories; store durable facts "
    "with knowmind_store_memory and correct them with knowmind_update_fact. "
    "knowmind_get_schema lists the relation types."
)

log = structlog.get_logger(__name__)
RequestId = str | int | float


class ProtocolError(Exception):
    def __init__(self, code: int, message: str, request_id: RequestId | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class Incoming:
    """A well-formed message. ``is_request``: it has an id and expects a reply."""

    method: str | None
    params: dict[str, Any]
    request_id: RequestId | None
    is_request: bool


def error_reply(request_id: RequestId | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def parse_message(body: bytes) -> Incoming:
    """Decode one JSON-RPC message; raises ProtocolError (parse error or invalid request)."""
    try:
        message = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}") from None
    if isinstance(message, list):
        raise ProtocolError(
            INVALID_REQUEST, f"JSON-RPC batches are not supported (protocol {PROTOCOL_VERSION})"
        )
    if not isinstance(message, dict):
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: expected a JSON object")
    request_id = message.get("id")
    valid_id = isinstance(request_id, str | int | float) and not isinstance(request_id, bool)
    echo = request_id if valid_id else None
    if message.get("jsonrpc") != "2.0":
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"', echo)
    if "id" in message and not valid_id:
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: id must be a string or number")
    method = message.get("method")
    if method is None:
        if "result" in message or "error" in message:  # a response to us: nothing to answer
            return Incoming(None, {}, echo, is_request=False)
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: method is missing", echo)
    if not isinstance(method, str):
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: method must be a string", echo)
    params = message.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ProtocolError(INVALID_PARAMS, "Invalid params: params must be an object", echo)
    return Incoming(method, params, echo, is_request="id" in message)


def _tool_result(payload: Any, is_error: bool = False) -> dict[str, Any]:
    text = msgspec.json.encode(payload).decode()
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _tool_error(message: str, **extra: Any) -> dict[str, Any]:
    return _tool_result({"error": message, **extra}, is_error=True)


class MCPDispatcher:
    def __init__(self, tools: ToolServices) -> None:
        self.tools = tools

    async def reply(self, message: Incoming, principal: Principal) -> dict[str, Any] | None:
        """The JSON-RPC reply to a request; None for notifications and responses."""
        if not message.is_request:
            return None
        try:
            result = await self._dispatch(message, principal)
        except ProtocolError as exc:
            return error_reply(message.request_id, exc.code, exc.message)
        return {"jsonrpc": "2.0", "id": message.request_id, "result": result}

    async def _dispatch(self, message: Incoming, principal: Principal) -> dict[str, Any]:
        match message.method:
            case "initialize":
                return {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "knowmind", "title": "knowmind", "version": __version__},
                    "instructions": _INSTRUCTIONS,
                }
            case "ping":
                return {}
            case "tools/list":
                return {"tools": listed_tools()}
            case "tools/call":
                return await self._call(message.params, principal)
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {message.method}")

    async def _call(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: name must be a string")
        tool = TOOLS.get(name)
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        refusal = scope_refusal(principal, tool.spec.scope)
        if refusal is None and tool.spec.tenant_wide:
            refusal = user_bound_refusal(principal)
        if refusal:
            return _tool_error(refusal, required_scope=tool.spec.scope)
        try:
            checked = validate(tool.spec.input_schema, arguments)
            payload = await tool.run(self.tools, principal, checked)
        except (ArgumentError, InvalidInputError) as exc:
            return _tool_error(str(exc), field=exc.field)
        except KnowmindError as exc:
            return _tool_error(str(exc))
        except Exception as exc:
            log.exception("mcp.tool_failed", tool=tool.spec.name, error_type=type(exc).__name__)
            raise ProtocolError(INTERNAL_ERROR, "Internal error") from None
        return _tool_result(payload)

"""``POST /api/mcp/v1``: MCP "streamable HTTP" (protocol 2025-06-18) in front of the services.

Stateless: no ``Mcp-Session-Id`` is issued, so there is no session to resume or delete, and
``GET`` (a server-initiated stream) and ``DELETE`` answer 405. Each POST carries one JSON-RPC
message and its bearer token; the token goes through the same checks as REST's
(``knowmind.services.access``: authentication, the invalid-token lockout and the per-token rate,
answered 401 or 429 with ``Retry-After``), the scope is checked per tool
(``knowmind.mcp.protocol``).

Answers are ``application/json`` unless the client prefers ``text/event-stream``: it accepts
only the event stream, or gives it a higher q-value than JSON. The SDK clients send
``Accept: application/json, text/event-stream`` (a tie) and get JSON; SSE answers are one
``message`` event carrying the reply, then the stream ends.

HTTP statuses: 200 for every reply to a request (JSON-RPC errors included), 202 with an empty
body for notifications and responses, 400 for malformed JSON, an invalid request, a batch or an
unsupported ``MCP-Protocol-Version`` header (body: a JSON-RPC error), 401 without a valid token,
429 (with ``Retry-After``) past the token's rate or while invalid tokens are locked out; the
bodies of 401 and 429 are JSON-RPC errors too (codes ``UNAUTHORIZED``, ``TOO_MANY_REQUESTS``).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, get, post, route
from litestar.di import NamedDependency
from litestar.status_codes import (
    HTTP_200_OK,
    HTTP_202_ACCEPTED,
    HTTP_400_BAD_REQUEST,
    HTTP_401_UNAUTHORIZED,
    HTTP_405_METHOD_NOT_ALLOWED,
    HTTP_429_TOO_MANY_REQUESTS,
)

from knowmind import __version__
from knowmind.api.guards import caller_of, retry_after
from knowmind.api.openapi import jsonrpc_request_body, jsonrpc_response
from knowmind.mcp.protocol import (
    INVALID_REQUEST,
    PROTOCOL_VERSION,
    MCPDispatcher,
    ProtocolError,
    error_reply,
    parse_message,
)
from knowmind.mcp.tools import ToolServices, listed_tools
from knowmind.services.access import AccessControl, AccessRefused
from knowmind.services.answer import AnswerService
from knowmind.services.documents import DocumentService
from knowmind.services.graph import GraphService
from knowmind.services.health import HealthService
from knowmind.services.memories import MemoryService
from knowmind.services.recall import RecallService

__all__ = ["MCPController", "provide_tools"]

UNAUTHORIZED = -32001
TOO_MANY_REQUESTS = -32029  # implementation-defined server error (-32000 to -32099)
#: Revisions whose wire format these answers fit; other ``MCP-Protocol-Version`` values get 400.
ACCEPTED_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
_JSON = "application/json"
_SSE = "text/event-stream"
_CHALLENGE = 'Bearer realm="knowmind"'


def _q_values(accept: str) -> list[tuple[str, float]]:
    ranges = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media:
            ranges.append((media.lower(), q))
    return ranges


def _quality(ranges: list[tuple[str, float]], media: str) -> float:
    """The q of the most specific range matching ``media`` (0 when none does)."""
    kind = media.split("/")[0]
    best: tuple[int, float] = (-1, 0.0)
    for candidate, q in ranges:
        specificity = {media: 2, f"{kind}/*": 1, "*/*": 0}.get(candidate, -1)
        if specificity > best[0]:
            best = (specificity, q)
    return best[1]


def wants_event_stream(accept: str | None) -> bool:
    """SSE only when the client prefers it to JSON (ties and absent headers: JSON)."""
    if not accept:
        return False
    ranges = _q_values(accept)
    return _quality(ranges, _SSE) > _quality(ranges, _JSON)


def _json_response(
    body: dict[str, Any], status: int = HTTP_200_OK, headers: dict[str, str] | None = None
) -> Response[bytes]:
    return Response(
        msgspec.json.encode(body), status_code=status, media_type=_JSON, headers=headers
    )


def _reply(body: dict[str, Any], sse: bool) -> Response[bytes]:
    if not sse:
        return _json_response(body)
    event = b"event: message\ndata: " + msgspec.json.encode(body) + b"\n\n"
    return Response(
        event,
        status_code=HTTP_200_OK,
        media_type=_SSE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _refused(refused: AccessRefused) -> Response[bytes]:
    """401 or 429 (the endpoint needs no scope itself, so there is no 403 here)."""
    if refused.status == HTTP_429_TOO_MANY_REQUESTS:
        body = error_reply(None, TOO_MANY_REQUESTS, refused.detail)
        headers = retry_after(refused.retry_after_s)
        return _json_response(body, HTTP_429_TOO_MANY_REQUESTS, headers)
    body = error_reply(None, UNAUTHORIZED, refused.detail)
    return _json_response(body, HTTP_401_UNAUTHORIZED, {"WWW-Authenticate": _CHALLENGE})


def provide_tools(
    memories: NamedDependency[MemoryService],
    recall: NamedDependency[RecallService],
    documents: NamedDependency[DocumentService],
    graph: NamedDependency[GraphService],
    health: NamedDependency[HealthService],
    answers: NamedDependency[AnswerService],
) -> ToolServices:
    """The ``tools`` dependency: the services the MCP tools call, from the app's own."""
    return ToolServices(memories, recall, documents, graph, health, answers)


class MCPController(Controller):
    path = "/api/mcp/v1"
    tags = ["mcp"]

    @post(
        "/",
        status_code=HTTP_200_OK,
        summary="MCP message (JSON-RPC 2.0)",
        opt={
            "errors": (400, 401, 429),
            "error_bodies": {400: "jsonrpc", 401: "jsonrpc", 429: "jsonrpc"},
            "also": {202: "a notification or response: accepted, no reply"},
            "empty": (202,),
            "request_body": jsonrpc_request_body(),
            "response": jsonrpc_response(),
        },
    )
    async def message(
        self,
        request: Request[Any, Any, Any],
        access: NamedDependency[AccessControl],
        tools: NamedDependency[ToolServices],
    ) -> Response[bytes]:
        """Speaks MCP (JSON-RPC 2.0, streamable HTTP) with the bearer token as on REST:
        `initialize`, `tools/list`, `tools/call` (without `initialize` too: the server is
        stateless). Answers JSON, or one server-sent event when the client prefers
        `text/event-stream`."""
        try:
            principal = await access.admit(
                request.headers.get("authorization"), caller_of(request, access)
            )
        except AccessRefused as refused:
            return _refused(refused)
        request.state.principal = principal  # the access log names the tenant
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in ACCEPTED_VERSIONS:
            supported = ", ".join(sorted(ACCEPTED_VERSIONS))
            body = error_reply(
                None,
                INVALID_REQUEST,
                f"Unsupported MCP-Protocol-Version {version!r}; supported: {supported}",
            )
            return _json_response(body, HTTP_400_BAD_REQUEST)
        try:
            incoming = parse_message(await request.body())
        except ProtocolError as exc:
            body = error_reply(exc.request_id, exc.code, exc.message)
            return _json_response(body, HTTP_400_BAD_REQUEST)
        reply = await MCPDispatcher(tools).reply(incoming, principal)
        if reply is None:
            return Response(b"", status_code=HTTP_202_ACCEPTED)
        return _reply(reply, wants_event_stream(request.headers.get("accept")))

    @get("/", status_code=HTTP_200_OK, include_in_schema=False)
    async def discovery(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        """Public discovery for ``Accept: application/json`` (knowmind's clients read the
        server's name, version, protocol version and tools without a token). Otherwise MCP's
        GET, the stream of server-initiated messages: there is none, 405."""
        accept = (request.headers.get("accept") or "").lower()
        if "application/json" not in accept or "text/event-stream" in accept:
            return _method_not_allowed()
        body = {
            "name": "knowmind",
            "version": __version__,
            "protocolVersion": PROTOCOL_VERSION,
            "tools": listed_tools(),
        }
        return _json_response(body)

    @route(
        "/",
        http_method=["DELETE"],
        status_code=HTTP_405_METHOD_NOT_ALLOWED,
        include_in_schema=False,
    )
    async def no_session(self) -> Response[bytes]:
        """Stateless: there is no session to end."""
        return _method_not_allowed()


def _method_not_allowed() -> Response[bytes]:
    body = error_reply(None, INVALID_REQUEST, "Method Not Allowed: use POST")
    return _json_response(body, HTTP_405_METHOD_NOT_ALLOWED, {"Allow": "POST"})

"""Every REST request the clients send, built once for both: a :class:`Call` names the method,
the path, the type the answer decodes to and the request's body or query. ``Knowmind`` runs a
call blocking, ``AsyncKnowmind`` awaits it; neither builds a request itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

import msgspec

from knowmind.client import types as records
from knowmind.contract.responses import EntitySearchOut, RelationsOut, UnlinkOut

__all__ = ["Call", "json_body"]

T = TypeVar("T")


def _typed(kind: type[T]) -> Callable[[bytes], T]:
    return lambda content: msgspec.json.decode(content, type=kind)


def _nothing(_: bytes) -> None:
    """An answer without a body (204)."""


def _object(content: bytes) -> dict[str, Any]:
    return msgspec.json.decode(content, type=dict[str, Any])


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    decode: Callable[[bytes], T]  # a successful answer's body as the caller's type
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)

    def request(self) -> dict[str, Any]:
        """The keyword arguments of ``httpx.Client.request``."""
        body = {} if self.json is None else {"json": self.json}
        return {"params": self.params, **body}


def json_body(value: dict[str, Any]) -> dict[str, Any]:
    """A request body: UUIDs and datetimes as strings, ``None`` fields left out."""
    built: dict[str, Any] = msgspec.to_builtins({k: v for k, v in value.items() if v is not None})
    return built


def _flag(value: bool) -> str:
    return "true" if value else "false"


# -- memories -----------------------------------------------------------------------------------


def remember(content: str, wait: bool, fields: dict[str, Any]) -> Call[records.Remembered]:
    body = json_body({"content": content, **fields})
    return Call("POST", "/v1/memories", _typed(records.Remembered), body, {"wait": _flag(wait)})


def remember_many(items: list[dict[str, Any]]) -> Call[records.BatchResult]:
    return Call(
        "POST",
        "/v1/memories/batch",
        _typed(records.BatchResult),
        {"items": [json_body(i) for i in items]},
    )


def memory(memory_id: UUID | str) -> Call[records.Memory]:
    return Call("GET", f"/v1/memories/{memory_id}", _typed(records.Memory))


def memory_page(
    page_size: int, cursor: str | None, filters: dict[str, Any]
) -> Call[records.MemoryPage]:
    params = {"limit": page_size, "cursor": cursor, **filters}
    return Call("GET", "/v1/memories", _typed(records.MemoryPage), params=json_body(params))


def history(memory_id: UUID | str) -> Call[records.History]:
    return Call("GET", f"/v1/memories/{memory_id}/history", _typed(records.History))


def supersede(
    memory_id: UUID | str, new_content: str, new_title: str | None, update_reason: str | None
) -> Call[records.Remembered]:
    body = {"new_content": new_content, "new_title": new_title, "update_reason": update_reason}
    return Call(
        "POST", f"/v1/memories/{memory_id}/supersede", _typed(records.Remembered), json_body(body)
    )


def delete_memory(memory_id: UUID | str) -> Call[None]:
    return Call("DELETE", f"/v1/memories/{memory_id}", _nothing)


def erase_memory(memory_id: UUID | str) -> Call[records.Receipt]:
    return Call(
        "DELETE", f"/v1/memories/{memory_id}", _typed(records.Receipt), params={"erase": "true"}
    )


def erase_user(user_id: str) -> Call[records.Receipt]:
    return Call("DELETE", f"/v1/users/{user_id}", _typed(records.Receipt))


# -- recall and answers -------------------------------------------------------------------------


def recall(query: str, k: int, min_score: float, options: dict[str, Any]) -> Call[records.Recall]:
    body = json_body({"query": query, "k": k, "min_score": min_score, **options})
    return Call("POST", "/v1/recall", _typed(records.Recall), body)


def recall_at_time(
    query: str, as_of: datetime | str, k: int, options: dict[str, Any]
) -> Call[records.Recall]:
    """What was valid at ``as_of`` (relative times in the query read from it, unless
    ``reference_time`` says otherwise)."""
    return recall(query, k, 0.0, {**options, "as_of": as_of})


def answer(question: str, stream: bool, options: dict[str, Any]) -> Call[records.Answer]:
    body = json_body({"question": question, **options, "stream": stream or None})
    return Call("POST", "/v1/answer", _typed(records.Answer), body)


# -- documents and jobs -------------------------------------------------------------------------


def upload_document(
    content: str, title: str | None, wait: bool, fields: dict[str, Any]
) -> Call[records.Document]:
    body = json_body({"content": content, "title": title, **fields})
    return Call("POST", "/v1/documents", _typed(records.Document), body, {"wait": _flag(wait)})


def delete_document(document_id: UUID | str) -> Call[None]:
    return Call("DELETE", f"/v1/documents/{document_id}", _nothing)


def erase_document(document_id: UUID | str) -> Call[records.Receipt]:
    return Call(
        "DELETE", f"/v1/documents/{document_id}", _typed(records.Receipt), params={"erase": "true"}
    )


def job(job_id: UUID | str) -> Call[records.Job]:
    return Call("GET", f"/v1/jobs/{job_id}", _typed(records.Job))


# -- the graph ----------------------------------------------------------------------------------


def upsert_entity(name: str, entity_class: str, fields: dict[str, Any]) -> Call[records.Entity]:
    body = json_body({"name": name, "entity_class": entity_class, **fields})
    return Call("POST", "/v1/entities", _typed(records.Entity), body)


def entities(q: str, limit: int, entity_class: str | None) -> Call[list[records.EntityHit]]:
    params = json_body({"q": q, "limit": limit, "entity_class": entity_class})
    return Call("GET", "/v1/entities", _entity_hits, params=params)


def _entity_hits(content: bytes) -> list[records.EntityHit]:
    return msgspec.json.decode(content, type=EntitySearchOut).results


def entity(entity_id: UUID | str) -> Call[records.Entity]:
    return Call("GET", f"/v1/entities/{entity_id}", _typed(records.Entity))


def _link_body(from_id: UUID | str, to_id: UUID | str, rel_type: str) -> dict[str, Any]:
    return json_body({"from_id": from_id, "to_id": to_id, "rel_type": rel_type})


def link(
    from_id: UUID | str, to_id: UUID | str, rel_type: str, confidence: float
) -> Call[records.Link]:
    body = _link_body(from_id, to_id, rel_type) | {"confidence": confidence}
    return Call("POST", "/v1/relations", _typed(records.Link), body)


def unlink(from_id: UUID | str, to_id: UUID | str, rel_type: str) -> Call[int]:
    """How many edges went (the edge and its inverse; 0: there was none)."""
    body = _link_body(from_id, to_id, rel_type)
    return Call("DELETE", "/v1/relations", _removed, body)


def _removed(content: bytes) -> int:
    return msgspec.json.decode(content, type=UnlinkOut).removed


def relations(node_id: UUID | str, closed: bool) -> Call[list[records.Relation]]:
    path = f"/v1/nodes/{node_id}/relations"
    return Call("GET", path, _relations, params={"closed": _flag(closed)})


def _relations(content: bytes) -> list[records.Relation]:
    return msgspec.json.decode(content, type=RelationsOut).relations


def schema() -> Call[dict[str, Any]]:
    return Call("GET", "/v1/schema", _object)


def add_predicate(
    name: str, subject_classes: list[str], object_classes: list[str], fields: dict[str, Any]
) -> Call[dict[str, Any]]:
    body = {"name": name, "subject_classes": subject_classes, "object_classes": object_classes}
    return Call("POST", "/v1/schema/predicates", _object, json_body({**body, **fields}))


# -- the tenant ---------------------------------------------------------------------------------


def stats() -> Call[dict[str, Any]]:
    return Call("GET", "/v1/stats", _object)


def capabilities() -> Call[dict[str, Any]]:
    return Call("GET", "/v1/capabilities", _object)


def settings() -> Call[records.TenantSettings]:
    return Call("GET", "/v1/settings", _typed(records.TenantSettings))


def change_settings(changes: dict[str, Any]) -> Call[records.TenantSettings]:
    """``changes``: the settings to change; ``None`` resets one to the server's default."""
    return Call(
        "PATCH", "/v1/settings", _typed(records.TenantSettings), msgspec.to_builtins(changes)
    )


def create_token(scopes: list[str], user_id: str | None) -> Call[records.Token]:
    return Call(
        "POST",
        "/v1/tokens",
        _typed(records.Token),
        json_body({"scopes": scopes, "user_id": user_id}),
    )


def export_tenant(tenant_id: UUID | str, filters: dict[str, Any]) -> Call[list[dict[str, Any]]]:
    """``filters``: user_id, agent_id, session_id, occurred_after, occurred_before."""
    params = {k: str(v) if isinstance(v, UUID) else v for k, v in filters.items() if v is not None}
    params = {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in params.items()}
    return Call("GET", f"/v1/admin/tenants/{tenant_id}/export", _json_lines, params=params)


def _json_lines(content: bytes) -> list[dict[str, Any]]:
    """A JSON Lines body, one object a line."""
    return [_object(line) for line in content.splitlines() if line.strip()]

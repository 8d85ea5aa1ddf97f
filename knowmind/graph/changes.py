"""A change to mirror into the graph database, as written to the outbox by PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

__all__ = ["GraphChange"]


@dataclass(frozen=True, slots=True)
class GraphChange:
    tenant_id: UUID
    op: str  # "upsert_node" | "delete_node" | "upsert_edge" | "delete_edge"
    payload: dict[str, Any]

"""How a connection is scoped to one tenant for row-level security."""

from __future__ import annotations

from uuid import UUID

__all__ = ["set_tenant_sql"]


def set_tenant_sql(tenant_id: UUID) -> str:
    """``SET LOCAL`` of the tenant for the current transaction (Citus forwards it to its
    workers; ``set_config`` it does not). The id is a UUID, so its text is safe to inline."""
    return f"SET LOCAL app.tenant_id = '{UUID(str(tenant_id))}'"

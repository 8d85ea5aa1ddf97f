"""How a connection is scoped to one tenant, and within it to one end user, for row-level
security.

A principal bound to an end user (a user-bound token) acts in a ``UserScope``: its tenant's id
(a ``UUID``, equal to and hashed like the tenant id, so everything keyed by tenant treats it as
the tenant) that also names the user. Every connection opened for it (``Database.tenant_tx``,
``tenant_snapshot``, ``read``) sets ``app.user_id`` beside ``app.tenant_id``, and the policies of
migration 0021 hold that session to the user's rows and the tenant's shared ones. The scope
travels wherever the tenant id does (recall stages, enhancers, the graph reader), so no read
path has to remember it.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

__all__ = ["UserScope", "set_tenant_sql", "set_user_sql", "user_of"]


class UserScope(UUID):
    """A tenant id that carries the end user its sessions are held to."""

    __slots__ = ("user_id",)
    user_id: str

    def __init__(self, tenant_id: UUID, user_id: str) -> None:
        if not user_id or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in user_id):
            raise ValueError("a user id is a non-empty text without control characters")
        super().__init__(int=tenant_id.int)
        object.__setattr__(self, "user_id", user_id)

    def __reduce__(self) -> tuple[Any, ...]:
        return (UserScope, (UUID(int=self.int), self.user_id))

    def __repr__(self) -> str:
        return f"UserScope({str(self)!r}, user_id={self.user_id!r})"


def user_of(tenant_id: UUID) -> str | None:
    """The end user a tenant id is scoped to (``UserScope``); None: the whole tenant."""
    return tenant_id.user_id if isinstance(tenant_id, UserScope) else None


def set_tenant_sql(tenant_id: UUID) -> str:
    """``SET LOCAL`` of the tenant for the current transaction (Citus forwards it to its
    workers; ``set_config`` it does not). The id is a UUID, so its text is safe to inline."""
    return f"SET LOCAL app.tenant_id = '{UUID(str(tenant_id))}'"


def set_user_sql(user_id: str | None) -> str:
    """``SET LOCAL`` of the end user for the current transaction ('' for none). The id is
    quoted as a string literal (quotes doubled; no control characters reach here)."""
    literal = (user_id or "").replace("'", "''")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in literal):
        raise ValueError("a user id has no control characters")
    return f"SET LOCAL app.user_id = '{literal}'"

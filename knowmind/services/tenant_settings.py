"""A tenant's own settings: its language model and whether answers may expand a question into
several phrasings. Unset, a setting takes the server's default; a tenant admin token changes
them (``PATCH /v1/settings``), every change in the audit log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from knowmind.db.engine import Database
from knowmind.errors import NotFoundError
from knowmind.services.audit import record
from knowmind.services.auth import Principal, tenant_of
from knowmind.store import tenants as tenant_store

__all__ = ["TenantSettings", "TenantSettingsService"]


@dataclass(frozen=True, slots=True)
class TenantSettings:
    llm_model: str | None = None  # None: the server's model
    multi_query: bool = True  # answers may rephrase a question (multi_query, auto)
    extraction_prompt: str | None = None  # the LLM graph extractor's; None: the built-in one

    @classmethod
    def of(cls, stored: dict[str, Any]) -> TenantSettings:
        known = {k: v for k, v in stored.items() if k in cls.__dataclass_fields__}
        return cls(**known)


class TenantSettingsService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, who: Principal) -> TenantSettings:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            return TenantSettings.of(await tenant_store.tenant_settings(conn, tenant))

    async def update(self, who: Principal, changes: dict[str, Any]) -> TenantSettings:
        """``changes``: the settings to set; a None value resets one to the default."""
        tenant = tenant_of(who)
        known = set(TenantSettings.__dataclass_fields__)
        changes = {k: v for k, v in changes.items() if k in known}
        async with self.db.owner_tx() as conn:
            stored = await tenant_store.update_tenant_settings(conn, tenant, changes)
            if stored is None:
                raise NotFoundError(f"tenant {tenant} not found")
            await record(conn, who, "tenant.settings", tenant, [], {"changed": sorted(changes)})
        return TenantSettings.of(stored)

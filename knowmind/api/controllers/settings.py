"""The calling tenant's own settings: ``GET /v1/settings`` (read), ``PATCH /v1/settings``
(tenant admin)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, get, patch
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK
from msgspec import UNSET, Meta, Struct, UnsetType

from knowmind.api.outputs import response
from knowmind.contract.limits import CHUNK_PLACEHOLDER, EXTRACTION_PROMPT_MAX_CHARS, ModelName
from knowmind.contract.responses import TenantSettingsOut
from knowmind.errors import InvalidInputError
from knowmind.services.answer import AnswerService
from knowmind.services.auth import Principal
from knowmind.services.tenant_settings import TenantSettingsService

__all__ = ["SettingsController"]


class TenantSettingsIn(Struct, forbid_unknown_fields=True):
    """Only the keys given change; ``null`` resets a setting to the server's default."""

    llm_model: ModelName | UnsetType | None = UNSET
    multi_query: bool | UnsetType | None = UNSET
    extraction_prompt: (
        Annotated[
            str,
            Meta(
                max_length=EXTRACTION_PROMPT_MAX_CHARS,
                description=f"must contain {CHUNK_PLACEHOLDER} where the chunk's text goes",
            ),
        ]
        | UnsetType
        | None
    ) = UNSET


class SettingsController(Controller):
    path = "/v1/settings"
    tags = ["settings"]

    @get("/", opt={"scope": "read"})
    async def read(
        self,
        tenant_settings: NamedDependency[TenantSettingsService],
        principal: NamedDependency[Principal],
    ) -> TenantSettingsOut:
        """Read the tenant's settings.

        The tenant's settings (unset ones show the default)."""
        return response(await tenant_settings.get(principal), TenantSettingsOut)

    @patch("/", opt={"scope": "admin", "tenant_wide": True}, status_code=HTTP_200_OK)
    async def change(
        self,
        data: JSONBody[TenantSettingsIn],
        answers: NamedDependency[AnswerService],
        tenant_settings: NamedDependency[TenantSettingsService],
        principal: NamedDependency[Principal],
    ) -> TenantSettingsOut:
        """Change the tenant's settings.

        Change the tenant's settings: ``llm_model`` (a model this server can use),
        ``multi_query`` (answers may rephrase a question into several), ``extraction_prompt``
        (the LLM graph extractor's prompt, with ``__CHUNK__`` where the text goes)."""
        changes = {k: v for k, v in msgspec.structs.asdict(data).items() if v is not UNSET}
        prompt = changes.get("extraction_prompt")
        if prompt is not None and CHUNK_PLACEHOLDER not in prompt:
            raise InvalidInputError(
                "extraction_prompt", f"must contain {CHUNK_PLACEHOLDER} where the chunk goes"
            )
        model = changes.get("llm_model")
        if model is not None:
            problem = answers.model_problem(model)
            if problem:
                raise InvalidInputError("llm_model", problem)
        return response(await tenant_settings.update(principal, changes), TenantSettingsOut)

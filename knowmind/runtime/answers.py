"""The answers subsystem: answers over recall and the language model, and the tenants' own
settings (their model among them)."""

from __future__ import annotations

from dataclasses import dataclass

from knowmind.db.engine import Database
from knowmind.runtime.models import ModelParts
from knowmind.runtime.recall import RecallParts
from knowmind.services.answer import AnswerService
from knowmind.services.tenant_settings import TenantSettingsService

__all__ = ["AnswerParts", "build_answers"]


@dataclass(frozen=True, slots=True)
class AnswerParts:
    service: AnswerService
    tenant_settings: TenantSettingsService


def build_answers(db: Database, models: ModelParts, recall: RecallParts) -> AnswerParts:
    service = AnswerService(
        db, recall.service, models.embedder, models.llm, models.llm_problem, models.llm_setup
    )
    return AnswerParts(service, service.tenant_settings)

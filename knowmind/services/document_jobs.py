"""Large documents in the background: the request is answered 202 with a job at once, the job
worker embeds and stores the document (taking its turns in the fair embedding queue), and
``GET /v1/jobs/{id}`` shows the outcome (the document id, or why it was not stored).

The job carries the document itself (its payload is the draft: ``document_payload``), so a
worker that dies mid-way leaves the job to be claimed again; storing is one transaction and an
upload of the same content is ``unchanged``, so a repeated run cannot store it twice."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from knowmind.services.auth import Principal
from knowmind.services.documents import DocumentDraft, DocumentService
from knowmind.services.graph import InlineRelation

__all__ = ["DocumentIngestJob"]


def _draft_of(payload: dict[str, Any]) -> DocumentDraft:
    replace = payload.get("replace_document_id")
    return DocumentDraft(
        content=payload["content"],
        title=payload.get("title"),
        source=payload.get("source"),
        relations=tuple(InlineRelation(**r) for r in payload.get("relations") or ()),
        replace_document_id=UUID(replace) if replace else None,
        build_tree=bool(payload.get("build_tree")),
    )


class DocumentIngestJob:
    """The job handler: stores the document as a synchronous upload would have."""

    def __init__(self, documents: DocumentService) -> None:
        self.documents = documents

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]:
        who = Principal(tenant_id, frozenset({"write"}), language=payload["language"])
        done = await self.documents.upload(
            who, _draft_of(payload), background=False, base_version=payload.get("base_version")
        )
        return {
            "document_id": str(done.id) if done.id else None,
            "memory_id": str(done.memory_id) if done.memory_id else None,
            "chunks": done.chunks,
            "status": done.status,
            "extraction_job_id": str(done.job_id) if done.job_id else None,
            "tree_job_id": str(done.tree_job_id) if done.tree_job_id else None,
            "tree_note": done.tree_note,
        }

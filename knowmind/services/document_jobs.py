"""Large documents in the background: the request is answered 202 with a job at once, the job
worker embeds and stores the document in steps, and ``GET /v1/jobs/{id}`` shows the outcome
(the document id, or why it was not stored) and, meanwhile, the progress.

The job carries the document itself (its payload is the draft: ``document_payload``). It runs in
steps, so that the worker can give other tenants' jobs their turns in between: the first step
checks what an upload checks before embedding (stored already: ``unchanged``; the document
changed since the job was accepted: ``superseded``) and chunks the document; each next step
embeds a batch of ``STEP_CHUNKS`` chunks (taking its turn in the fair embedding queue) and keeps
their vectors as one of the job's parts (``job_parts``); the last one stores the document in one
transaction, as a synchronous upload would have. A worker that dies mid-way leaves the job and
its parts: whoever takes it over resumes at the first batch not embedded yet. A cancelled job
(its tenant or document erased) is gone with its parts, and a step of it cannot write a part."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np

from knowmind.contract.drafts import RelationIn
from knowmind.services.auth import Principal
from knowmind.services.documents import (
    DocumentDraft,
    DocumentPlan,
    DocumentResult,
    DocumentService,
)
from knowmind.store import jobs as job_store
from knowmind.store.jobs import JobRow, JobStep

__all__ = ["STEP_CHUNKS", "DocumentIngestJob"]

# Chunks embedded per step: a few seconds of the model thread on a small host, so another
# tenant's job waits for at most about that long before its turn.
STEP_CHUNKS = 16


def _draft_of(payload: dict[str, Any]) -> DocumentDraft:
    replace = payload.get("replace_document_id")
    return DocumentDraft(
        content=payload["content"],
        title=payload.get("title"),
        source=payload.get("source"),
        relations=tuple(RelationIn(**r) for r in payload.get("relations") or ()),
        replace_document_id=UUID(replace) if replace else None,
        build_tree=bool(payload.get("build_tree")),
    )


def _result(done: DocumentResult) -> dict[str, Any]:
    return {
        "document_id": str(done.id) if done.id else None,
        "memory_id": str(done.memory_id) if done.memory_id else None,
        "chunks": done.chunks,
        "status": done.status,
        "extraction_job_id": str(done.job_id) if done.job_id else None,
        "tree_job_id": str(done.tree_job_id) if done.tree_job_id else None,
        "tree_note": done.tree_note,
    }


class DocumentIngestJob:
    """The job handler: stores the document as a synchronous upload would have, in steps."""

    def __init__(self, documents: DocumentService, step_chunks: int = STEP_CHUNKS) -> None:
        self.documents = documents
        self.step_chunks = step_chunks

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]:
        """All steps at once (outside the worker)."""
        who = _principal(tenant_id, payload)
        done = await self.documents.upload(
            who, _draft_of(payload), background=False, base_version=payload.get("base_version")
        )
        return _result(done)

    async def step(self, job: JobRow, state: dict[str, Any]) -> JobStep:
        """One step; ``state`` is kept by the worker between this job's steps (in memory: the
        plan and the vectors so far, read back from the job's parts after a takeover)."""
        documents = self.documents
        who = _principal(job.tenant_id, job.payload)
        base_version = job.payload.get("base_version")
        plan: DocumentPlan | None = state.get("plan")
        if plan is None:
            planned = await documents.plan_job(who, _draft_of(job.payload), base_version)
            if isinstance(planned, DocumentResult):
                return JobStep(done=True, result=_result(planned))
            plan = planned
            state["plan"] = plan
            state["parts"] = await self._parts(job)
        parts: list[np.ndarray] = state["parts"]
        embedded = sum(len(p) for p in parts)
        total = len(plan.texts)
        if embedded < total:
            batch = plan.texts[embedded : embedded + self.step_chunks]
            vectors = await documents.embedder.embed_passages(batch, str(job.tenant_id))
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            async with documents.db.tenant_tx(job.tenant_id) as conn:
                data = vectors.tobytes()
                await job_store.put_job_part(conn, job.tenant_id, job.id, len(parts), data)
            parts.append(vectors)
            progress = {"chunks": total, "embedded": embedded + len(batch)}
            return JobStep(done=False, progress=progress)  # storing is a step of its own
        embeddings = np.concatenate(parts) if parts else np.zeros((0, documents.embedder.dim))
        done = await documents.store_job(who, plan, embeddings, base_version)
        return JobStep(done=True, result=_result(done))

    async def _parts(self, job: JobRow) -> list[np.ndarray]:
        """The vectors earlier steps of this job stored (a job taken over after a crash)."""
        dim = self.documents.embedder.dim
        async with self.documents.db.tenant_tx(job.tenant_id) as conn:
            stored = await job_store.job_parts(conn, job.tenant_id, job.id)
        return [np.frombuffer(data, dtype=np.float32).reshape(-1, dim) for data in stored]


def _principal(tenant_id: UUID, payload: dict[str, Any]) -> Principal:
    return Principal(tenant_id, frozenset({"write"}), language=payload["language"])

"""Documents: Markdown-aware chunking, upsert by title (or by id), client-side embeddings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import msgspec
import numpy as np
import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.contract.drafts import RelationIn
from knowmind.contract.limits import require_visible
from knowmind.errors import ConflictError, InvalidInputError, NotFoundError
from knowmind.graph.postgres import remove_node_edges
from knowmind.ingest.markdown import chunk_markdown
from knowmind.ingest.pipeline import passage_text
from knowmind.linking.names import normalise_name
from knowmind.models.aliases import canonical_model
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.memories import content_sha256
from knowmind.services.recipe import MemoryWriter
from knowmind.store import documents as document_store
from knowmind.store import jobs as job_store
from knowmind.store import memories as memory_store
from knowmind.store import summaries as summary_store

__all__ = [
    "INGEST_DOCUMENT_JOB",
    "SUMMARY_TREE_JOB",
    "ClientChunk",
    "DocumentDraft",
    "DocumentPlan",
    "DocumentResult",
    "DocumentService",
    "document_payload",
]

log = structlog.get_logger(__name__)

DOCUMENT_MEMORY_TYPE = "reference"
INGEST_DOCUMENT_JOB = "ingest_document"  # handled by services.document_jobs
SUMMARY_TREE_JOB = "build_summary_tree"  # handled by services.summary_tree


@dataclass(frozen=True, slots=True)
class ClientChunk:
    content: str
    embedding: list[float]
    kind: str | None = None  # a tagged statement (contract.limits.STATEMENT_KINDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentDraft:
    content: str
    title: str | None = None
    source: str | None = None
    relations: tuple[RelationIn, ...] = ()
    replace_document_id: UUID | None = None
    chunks: tuple[ClientChunk, ...] = ()
    build_tree: bool = False  # a RAPTOR summary tree, built by a job after the upload
    embedding_model: str | None = None


@dataclass(frozen=True, slots=True)
class DocumentResult:
    id: UUID | None  # None while "accepted": the job's result names the document
    memory_id: UUID | None
    chunks: int
    # "created" | "replaced" | "unchanged" | "accepted" (stored by a job) | "superseded" (a
    # job's document changed since it was accepted: nothing stored)
    status: str
    job_id: UUID | None = None  # extraction, or for "accepted" the job that stores it
    embedded_by: str = "server"  # or "client": the client's chunk embeddings were used
    # why client chunk embeddings were not used (the server embedded instead); None otherwise
    embedding_note: str | None = None
    tree_job_id: UUID | None = None  # build_tree: the job building the summary tree
    tree_note: str | None = None  # build_tree: why no tree is built


def document_payload(draft: DocumentDraft, language: str) -> dict[str, Any]:
    """A server-embedded draft as the payload of an ``INGEST_DOCUMENT_JOB``."""
    replace = draft.replace_document_id
    return {
        "title": draft.title,
        "content": draft.content,
        "source": draft.source,
        "relations": [msgspec.structs.asdict(r) for r in draft.relations],
        "replace_document_id": str(replace) if replace else None,
        "language": language,
        "build_tree": draft.build_tree,
    }


@dataclass(eq=False)
class DocumentService(MemoryWriter):
    #: why this server cannot build summary trees (None: it can)
    tree_unavailable: str | None = dataclasses.field(default="no language model", kw_only=True)

    async def upload(
        self,
        who: Principal,
        draft: DocumentDraft,
        *,
        background: bool = False,
        base_version: int | None = None,
    ) -> DocumentResult:
        """Store a document; a document with the same title (or ``replace_document_id``) is
        replaced atomically and keeps its id. ``background``: a document of more than
        ``ingest.async_document_chunks`` chunks is only checked and handed to a job
        (``accepted``); the job stores it as this call would have, unless the document changed
        since (``base_version``: the version it was accepted against; 0 = none) — then it
        answers ``superseded`` and stores nothing: the newer upload wins."""
        tenant = tenant_of(who)
        title, norm_title, sha = _identity(draft)
        # a document that will surely be handed to a job: its bytes count for the quota now
        queued = background and not draft.chunks and self._surely_large(draft)
        async with self.db.tenant_tx(tenant) as conn:  # stored already: nothing to embed
            await self.graph.check_inline_relations(conn, tenant, draft.relations)
            unchanged = await self._unchanged(conn, tenant, draft, norm_title, title, sha)
            if unchanged is None:  # refused before any work when the queue is at its quota
                size = len(draft.content.encode()) if queued else 0
                await self.quota.check(conn, tenant, payload_bytes=size)
        if unchanged is not None:
            return unchanged
        if background and not draft.chunks:  # client chunks: a knowmind upload, stored now
            contents = self._server_chunks(draft)
            if 0 < self.ingest.async_document_chunks < len(contents):
                return await self._accept(who, draft, norm_title, len(contents))
        chunks = await self._chunks(draft, title, str(tenant))
        return await self._store(
            who, draft, (title, norm_title, sha), chunks, base_version, check_quota=True
        )

    async def plan_job(
        self, who: Principal, draft: DocumentDraft, base_version: int | None
    ) -> DocumentPlan | DocumentResult:
        """A document job's first step: what ``upload`` checks before embedding, and the
        chunks to embed; a result instead when nothing is left to do (stored already, or the
        document changed since the job was accepted: ``superseded``)."""
        tenant = tenant_of(who)
        title, norm_title, sha = _identity(draft)
        async with self.db.tenant_tx(tenant) as conn:
            unchanged = await self._unchanged(conn, tenant, draft, norm_title, title, sha)
            if unchanged is not None:
                return unchanged
            existing = await self._existing(conn, tenant, draft, norm_title, lock=False)
        if base_version is not None and (existing.version if existing else 0) != base_version:
            return DocumentResult(existing.id if existing else None, None, 0, "superseded")
        contents = self._server_chunks(draft)
        texts = [passage_text(title, c) for c in contents]
        return DocumentPlan(draft, (title, norm_title, sha), contents, texts)

    async def store_job(
        self,
        who: Principal,
        plan: DocumentPlan,
        embeddings: np.ndarray,
        base_version: int | None,
    ) -> DocumentResult:
        """A document job's last step: the planned chunks with the embeddings its steps made,
        stored as ``upload`` stores a document (one transaction). Not checked against the
        tenant's quota: the job was, when it was accepted."""
        chunks = _Chunks(plan.contents, embeddings, [None] * len(plan.contents), "server")
        return await self._store(
            who, plan.draft, plan.identity, chunks, base_version, check_quota=False
        )

    def _surely_large(self, draft: DocumentDraft) -> bool:
        """Whether the content is so long that it will be more than ``async_document_chunks``
        chunks (each holds at most about ``chunk_target_chars``)."""
        limit = self.ingest.async_document_chunks
        return limit > 0 and len(draft.content) > 2 * limit * self.ingest.chunk_target_chars

    async def _store(
        self,
        who: Principal,
        draft: DocumentDraft,
        identity: tuple[str, str, bytes],
        chunks: _Chunks,
        base_version: int | None,
        *,
        check_quota: bool,
    ) -> DocumentResult:
        """The write of ``upload``: the document, its memory and chunks, in one transaction."""
        tenant = tenant_of(who)
        title, norm_title, sha = identity
        async with self.db.tenant_tx(tenant, write=True) as conn:
            existing = await self._existing(conn, tenant, draft, norm_title, lock=True)
            current = existing.version if existing else 0
            if base_version is not None and current != base_version:
                return DocumentResult(existing.id if existing else None, None, 0, "superseded")
            if existing and existing.content_sha256 == sha and existing.title == title:
                ids = await memory_store.memory_ids_of_document(conn, tenant, existing.id)
                return DocumentResult(existing.id, ids[0] if ids else None, 0, "unchanged")
            document_id = await self._claim(conn, tenant, existing, title, norm_title, draft, sha)
            memory = _document_memory(draft, title)
            stored = await self.write(
                conn,
                who,
                memory,
                sha,
                chunks.contents,
                chunks.embeddings,
                relations=draft.relations,
                kinds=chunks.kinds,
                document_id=document_id,
            )
            assert stored is not None  # document memories are not deduplicated by sha
            tree_job, tree_note = await self._tree(conn, who, document_id, draft, existing)
            if check_quota:  # its extraction (and tree) job: within the quota, or undone
                await self.quota.check(conn, tenant, jobs=1 + bool(tree_job), written=True)
        self.on_job_enqueued()
        note = self._refusal(draft)
        if note:
            log.info("documents.client_embeddings_refused", reason=note)
        status = "replaced" if existing else "created"
        return DocumentResult(
            document_id, stored.id, stored.chunks, status, stored.job_id, chunks.embedded_by,
            note, tree_job, tree_note,
        )  # fmt: skip

    async def _tree(
        self,
        conn: AsyncConnection,
        who: Principal,
        document_id: UUID,
        draft: DocumentDraft,
        existing: document_store.DocumentRow | None,
    ) -> tuple[UUID | None, str | None]:
        """A replaced document's old summary tree goes (it summarised the old text); with
        ``build_tree`` a job builds the new one, in the upload's transaction."""
        tenant = tenant_of(who)
        if existing is not None:
            await summary_store.delete_document_tree(conn, tenant, document_id)
        if not draft.build_tree:
            return None, None
        if self.tree_unavailable is not None:
            return None, f"no summary tree: {self.tree_unavailable}"
        payload = {"document_id": str(document_id), "language": who.language}
        return await job_store.enqueue_job(conn, tenant, SUMMARY_TREE_JOB, payload), None

    async def _unchanged(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        draft: DocumentDraft,
        norm_title: str,
        title: str,
        sha: bytes,
    ) -> DocumentResult | None:
        """The stored document, when it has this title and content already."""
        existing = await self._existing(conn, tenant, draft, norm_title, lock=False)
        if existing is None or existing.content_sha256 != sha or existing.title != title:
            return None
        ids = await memory_store.memory_ids_of_document(conn, tenant, existing.id)
        return DocumentResult(existing.id, ids[0] if ids else None, 0, "unchanged")

    async def _existing(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        draft: DocumentDraft,
        norm_title: str,
        *,
        lock: bool,
    ) -> document_store.DocumentRow | None:
        if draft.replace_document_id is not None:
            found = await document_store.find_document(
                conn, tenant, document_id=draft.replace_document_id, lock=lock
            )
            if found is None:
                raise NotFoundError(f"replace_document_id: no document {draft.replace_document_id}")
            holder = await document_store.find_document(conn, tenant, norm_title=norm_title)
            if holder is not None and holder.id != found.id:
                raise ConflictError(
                    "title: another document has this title; replace that one instead",
                    field="title",
                )
            return found
        return await document_store.find_document(conn, tenant, norm_title=norm_title, lock=lock)

    async def _claim(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        existing: document_store.DocumentRow | None,
        title: str,
        norm_title: str,
        draft: DocumentDraft,
        sha: bytes,
    ) -> UUID:
        """The document id to write under: a new row, or the old one emptied of its content."""
        if existing is None:
            document_id = await document_store.insert_document(
                conn,
                tenant,
                title=title,
                norm_title=norm_title,
                source=draft.source,
                sha256=sha,
            )
            if document_id is None:
                raise ConflictError(f"a document titled {title!r} is being uploaded right now")
            return document_id
        ontology = await self.graph.ontology(conn, tenant)
        memory_ids = await memory_store.memory_ids_of_document(conn, tenant, existing.id)
        await memory_store.lock_memories(conn, tenant, memory_ids)
        for memory_id in memory_ids:
            await remove_node_edges(conn, tenant, ontology, memory_id)
            await memory_store.delete_memory(conn, tenant, memory_id)  # chunks, mentions too
        await document_store.update_document(
            conn,
            tenant,
            existing.id,
            title=title,
            norm_title=norm_title,
            source=draft.source,
            sha256=sha,
        )
        return existing.id

    async def _accept(
        self, who: Principal, draft: DocumentDraft, norm_title: str, chunks: int
    ) -> DocumentResult:
        """Hand the document to a job, after the checks a client should hear at once."""
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant, write=True) as conn:
            # 404 / 409 now; and the version the job may replace (a newer upload wins)
            existing = await self._existing(conn, tenant, draft, norm_title, lock=False)
            payload = document_payload(draft, who.language)
            payload["base_version"] = existing.version if existing else 0
            if existing is not None:  # erasing that document cancels the job
                payload["document_id"] = str(existing.id)
            job_id = await job_store.enqueue_job(conn, tenant, INGEST_DOCUMENT_JOB, payload)
            size = job_store.payload_size(payload)
            await self.quota.check(conn, tenant, payload_bytes=size, written=True)
        self.on_job_enqueued()
        return DocumentResult(None, None, chunks, "accepted", job_id)

    def _client_embedded(self, draft: DocumentDraft) -> bool:
        """Whether the client's chunk embeddings are usable: our model and dimension."""
        return bool(draft.chunks) and self._refusal(draft) is None

    def _refusal(self, draft: DocumentDraft) -> str | None:
        """Why the client's chunk embeddings cannot be stored beside ours; None if they can."""
        if not draft.chunks:
            return None
        ours = self.embedder.model_id
        if draft.embedding_model is None:
            return f"client chunks came without embeddingModel; re-embedded with {ours}"
        if canonical_model(draft.embedding_model) != canonical_model(ours):
            return (
                f"client embeddings are from {draft.embedding_model}, this server's model is "
                f"{ours}; re-embedded"
            )
        sizes = sorted({len(c.embedding) for c in draft.chunks})
        if sizes != [self.embedder.dim]:
            return (
                f"client embeddings have {sizes} dimensions, {ours} has "
                f"{self.embedder.dim}; re-embedded"
            )
        return None

    def _server_chunks(self, draft: DocumentDraft) -> list[str]:
        return chunk_markdown(
            draft.content, self.ingest.chunk_target_chars, self.ingest.chunk_overlap_chars
        ) or [draft.content.strip()]

    async def _chunks(self, draft: DocumentDraft, title: str, owner: str) -> _Chunks:
        """Client chunks with their embeddings when they were made with our model and
        dimension; otherwise the server chunks the Markdown and embeds it, with the client's
        tagged statements (``owner``: the tenant, for its turn in the embedding queue)."""
        if self._client_embedded(draft):
            vectors = np.asarray([c.embedding for c in draft.chunks], dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            return _Chunks(
                [c.content for c in draft.chunks],
                vectors / np.maximum(norms, 1e-12),
                [c.kind for c in draft.chunks],
                "client",
            )
        statements = [c for c in draft.chunks if c.kind is not None]
        contents = self._server_chunks(draft) + [c.content for c in statements]
        kinds = [None] * (len(contents) - len(statements)) + [c.kind for c in statements]
        texts = [passage_text(title, c) for c in contents]
        vectors = await self.embedder.embed_passages(texts, owner)
        return _Chunks(contents, vectors, kinds, "server")


@dataclass(frozen=True, slots=True)
class DocumentPlan:
    """What a document job stores: the draft, its (title, normalised title, sha256), its
    chunks and the passage texts their embeddings are made of."""

    draft: DocumentDraft
    identity: tuple[str, str, bytes]
    contents: list[str]
    texts: list[str]


def _identity(draft: DocumentDraft) -> tuple[str, str, bytes]:
    """The draft checked: its title (given or from the content), normalised title, sha256."""
    require_visible(draft.content, "content")
    if draft.title is not None and not draft.title.strip():
        raise InvalidInputError("title", "must not be blank")
    title = (draft.title or _title_from(draft.content)).strip()
    return title, normalise_name(title) or title.lower(), content_sha256(draft.content)


@dataclass(frozen=True, slots=True)
class _Chunks:
    """What a document is stored as: chunk texts, their vectors and statement kinds."""

    contents: list[str]
    embeddings: np.ndarray
    kinds: list[str | None]
    embedded_by: str  # "client" or "server"


def _title_from(content: str) -> str:
    for line in content.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:200]
    return "Untitled"


def _document_memory(draft: DocumentDraft, title: str) -> memory_store.Draft:
    """The memory that holds a document's text (its chunks are the document's)."""
    return memory_store.Draft(
        title=title, content=draft.content, memory_type=DOCUMENT_MEMORY_TYPE, source=draft.source
    )

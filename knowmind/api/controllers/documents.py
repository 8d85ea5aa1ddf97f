"""Documents: ours (``/v1/documents``) and knowmind's REST upload (``/api/documents``)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import Controller, Request, Response, delete, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import (
    HTTP_200_OK,
    HTTP_201_CREATED,
    HTTP_202_ACCEPTED,
    HTTP_204_NO_CONTENT,
)

from knowmind.api.document_schemas import DocumentIn, KnowmindDocumentIn
from knowmind.api.errors import error_response, exception_handlers
from knowmind.api.guards import TENANT_WRITE
from knowmind.api.outputs import document_result
from knowmind.contract.responses import DocumentOut
from knowmind.services.auth import Principal
from knowmind.services.documents import ClientChunk, DocumentDraft, DocumentResult, DocumentService
from knowmind.services.erasure import ErasureService

__all__ = ["DocumentController", "KnowmindUploadController"]

Documents = NamedDependency[DocumentService]
Who = NamedDependency[Principal]
#: Both uploads: 404 when the document to replace is not the tenant's, 409 when its title is
#: another document's or a document of that title is being uploaded right now.
_STORE_DOCUMENT = {**TENANT_WRITE, "errors": (404, 409)}

_STATUS = {"created": HTTP_201_CREATED, "accepted": HTTP_202_ACCEPTED}


def document_out(result: DocumentResult) -> Response[DocumentOut]:
    body = DocumentOut(
        **document_result(result),
        embedded_by=result.embedded_by,
        embedding_note=result.embedding_note,
    )
    return Response(body, status_code=_STATUS.get(result.status, HTTP_200_OK))


class DocumentController(Controller):
    path = "/v1/documents"
    tags = ["documents"]

    @post(
        "/",
        opt={
            **_STORE_DOCUMENT,
            "also": {
                200: "replaced, or unchanged: this content is stored already",
                202: "accepted: a large document, stored by the job `job_id` (poll it)",
            },
        },
    )
    async def upload(
        self,
        data: JSONBody[DocumentIn],
        documents: Documents,
        principal: Who,
        wait: Annotated[
            bool, QueryParameter(description="store a large document before answering")
        ] = False,
    ) -> Response[DocumentOut]:
        """Store a document.

        Store a document (Markdown or text); the same title replaces the old version,
        which keeps its document id. A large one is stored in the background (202 and a
        job to poll) unless ``?wait=true``."""
        draft = data.into(DocumentDraft, relations=tuple(data.relations))
        return document_out(await documents.upload(principal, draft, background=not wait))

    @delete(
        "/{document_id:uuid}",
        opt={**TENANT_WRITE, "also": {204: "deleted (without erase=true: no receipt)"}},
        status_code=HTTP_200_OK,
    )
    async def remove(
        self,
        document_id: FromPath[UUID],
        erasure: NamedDependency[ErasureService],
        principal: Who,
        erase: Annotated[bool, QueryParameter(description="GDPR erasure with receipt")] = False,
    ) -> Response[Any]:
        """Delete a document.

        The document goes with every trace (its memory, chunks, mentions, the edges it drew) in one
        transaction: 204, or with `?erase=true` 200 and the receipt of what was removed."""
        receipt = await erasure.erase_document(principal, document_id)
        if erase:
            return Response(receipt, status_code=HTTP_200_OK)
        return Response(None, status_code=HTTP_204_NO_CONTENT)


def _knowmind_error(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, str]]:
    """knowmind's clients expect ``{"error": "..."}`` with a non-2xx status."""
    response = error_response(request, error)
    detail = response.content.get("detail", "error")
    return Response({"error": str(detail)}, status_code=response.status_code)


class KnowmindUploadController(Controller):
    path = "/api/documents"
    tags = ["knowmind compatibility"]
    # Override every app-level handler (Litestar picks the most specific class across layers).
    exception_handlers = {kind: _knowmind_error for kind in exception_handlers}

    @post(
        "/",
        opt={
            **_STORE_DOCUMENT,
            "also": {200: "unchanged: this content is stored already"},
            "error_body": "knowmind",
        },
    )
    async def upload(
        self, data: JSONBody[KnowmindDocumentIn], documents: Documents, principal: Who
    ) -> Response[dict[str, Any]]:
        """Upload a document in knowmind's own format.

        knowmind's REST upload, answered as its clients read it (``chunksWritten``,
        ``embeddingProvider``, ``unchanged``/``duplicate``). Client chunk embeddings are used
        only when ``embeddingModel`` names this server's model (or an export of it:
        models/aliases.py) and the dimensions match; otherwise ``embeddingNote`` says why the
        server embedded instead."""
        draft = DocumentDraft(
            content=data.content,
            title=data.title,
            replace_document_id=data.replace_document_id,
            chunks=tuple(ClientChunk(c.content, c.embedding, c.kind) for c in data.chunks or []),
            embedding_model=data.embedding_model,
        )
        result = await documents.upload(principal, draft)
        unchanged = result.status == "unchanged"
        body = {
            "id": str(result.id),
            "documentId": str(result.id),
            "chunks": result.chunks,
            "chunksWritten": result.chunks,
            "status": result.status,
            "unchanged": unchanged,
            "duplicate": unchanged,
            "embeddedBy": result.embedded_by,
            "embeddingProvider": result.embedded_by,
            "embeddingModel": documents.embedder.model_id
            if result.embedded_by == "server"
            else data.embedding_model,
            "embeddingNote": result.embedding_note,
        }
        status = HTTP_201_CREATED if result.status == "created" else HTTP_200_OK
        return Response(body, status_code=status)

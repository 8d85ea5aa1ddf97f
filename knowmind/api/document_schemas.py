"""Bodies of the document endpoints: ours (/v1/documents) and knowmind's REST upload."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import msgspec
from msgspec import Meta, Struct

from knowmind.api.strict_body import StrictBody
from knowmind.contract.drafts import RelationIn
from knowmind.contract.limits import (
    STATEMENT_KINDS,
    Content,
    FilledContent,
    FilledTitle,
    RelationCount,
    ShortText,
    require_visible,
)

__all__ = ["DocumentIn", "KnowmindChunk", "KnowmindDocumentIn"]


class DocumentIn(StrictBody):
    content: FilledContent
    title: FilledTitle | None = None
    source: ShortText | None = None
    relations: Annotated[list[RelationIn], RelationCount] = msgspec.field(default_factory=list)
    replace_document_id: UUID | None = None
    build_tree: Annotated[
        bool,
        Meta(
            description="also build a RAPTOR summary tree in the background (answer method "
            "raptor; needs a language model)"
        ),
    ] = False

    def __post_init__(self) -> None:
        require_visible(self.content, "content")
        require_visible(self.title, "title")


class KnowmindChunk(Struct):
    """A chunk the client embedded; ``metadata.type`` tags a statement it extracted from the
    user's words (``preference``, ``fact``, ``update``), stored with that kind. Unknown keys
    are ignored, as in the whole upload (see KnowmindDocumentIn)."""

    content: Content
    embedding: Annotated[list[float], Meta(min_length=1, max_length=8192)]
    metadata: dict[str, Any] | None = None

    @property
    def kind(self) -> str | None:
        kind = (self.metadata or {}).get("type")
        return kind if kind in STATEMENT_KINDS else None


class KnowmindDocumentIn(Struct, rename="camel"):
    """knowmind's ``POST /api/documents`` body (camelCase keys). Unlike our own bodies it
    ignores unknown keys, by design: it is knowmind's wire format, which its clients may extend
    (documented in the README). Types, limits and visible content are checked as everywhere."""

    content: FilledContent
    title: FilledTitle | None = None
    chunks: Annotated[list[KnowmindChunk], Meta(max_length=10000)] | None = None
    embedding_model: Annotated[str, Meta(max_length=200)] | None = None
    replace_document_id: UUID | None = None

    def __post_init__(self) -> None:
        require_visible(self.content, "content")
        require_visible(self.title, "title")

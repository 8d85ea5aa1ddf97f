"""What the server answers, as typed objects (unknown fields are ignored: a newer server may add
some without breaking an older client). The records the REST API answers with are defined once
for both (``knowmind.contract.responses``, msgspec only) and named here as the SDK always named
them: ``Answer``, ``Passage``, ``Conversation``, ``Document``, ``Entity``, ``FactUpdate``,
``History``, ``HistoryEvent``, ``Hit``, ``Job``, ``Link``, ``Memory``, ``MemoryPage``,
``NamedNode``, ``Recall``, ``Relation``, ``Remembered``, ``Speaker``, ``TenantSettings``,
``Token`` and ``Turn`` are the OpenAPI document's ``AnswerOut``, ``AnswerPassage``,
``ConversationOut``, ``DocumentOut``, ``EntityOut``, ``FactUpdateOut``, ``MemoryHistoryOut``,
``HistoryEventOut``, ``RecallHit``, ``JobOut``, ``LinkOut``, ``MemoryOut``, ``MemoryList``,
``NamedNodeOut``, ``RecallOut``, ``RelationOut``, ``RememberOut``, ``SpeakerOut``,
``TenantSettingsOut``, ``TokenOut`` and ``TurnOut``; ``Citation``, ``EntityHit`` and
``NodeRef`` keep their names. ``BatchItem`` and ``BatchResult`` are the SDK's own (an item's
``error`` is a dict here), as are ``Receipt`` and ``AnswerEvent``."""

from __future__ import annotations

from uuid import UUID

import msgspec

from knowmind.contract.responses import AnswerOut as Answer
from knowmind.contract.responses import AnswerPassage as Passage
from knowmind.contract.responses import Citation, EntityHit, NodeRef
from knowmind.contract.responses import ConversationOut as Conversation
from knowmind.contract.responses import DocumentOut as Document
from knowmind.contract.responses import EntityOut as Entity
from knowmind.contract.responses import FactUpdateOut as FactUpdate
from knowmind.contract.responses import HistoryEventOut as HistoryEvent
from knowmind.contract.responses import JobOut as Job
from knowmind.contract.responses import LinkOut as Link
from knowmind.contract.responses import MemoryHistoryOut as History
from knowmind.contract.responses import MemoryList as MemoryPage
from knowmind.contract.responses import MemoryOut as Memory
from knowmind.contract.responses import NamedNodeOut as NamedNode
from knowmind.contract.responses import RecallHit as Hit
from knowmind.contract.responses import RecallOut as Recall
from knowmind.contract.responses import RelationOut as Relation
from knowmind.contract.responses import RememberOut as Remembered
from knowmind.contract.responses import SpeakerOut as Speaker
from knowmind.contract.responses import TenantSettingsOut as TenantSettings
from knowmind.contract.responses import TokenOut as Token
from knowmind.contract.responses import TurnOut as Turn

__all__ = [
    "Answer",
    "AnswerEvent",
    "BatchItem",
    "BatchResult",
    "Citation",
    "Conversation",
    "Document",
    "Entity",
    "EntityHit",
    "FactUpdate",
    "History",
    "HistoryEvent",
    "Hit",
    "Job",
    "KnowmindAPIError",
    "Link",
    "Memory",
    "MemoryPage",
    "NamedNode",
    "NodeRef",
    "Passage",
    "Recall",
    "Receipt",
    "Relation",
    "Remembered",
    "Speaker",
    "TenantSettings",
    "Token",
    "Turn",
]


class KnowmindAPIError(Exception):
    """An answer that is not a success: the status, the server's detail and the field it names
    (422, 409)."""

    def __init__(self, status: int, detail: str, field: str | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.field = field


class BatchItem(msgspec.Struct):
    index: int
    status: str  # "created" | "unchanged" | "error"
    id: UUID | None = None
    chunks: int = 0
    job_id: UUID | None = None
    error: dict[str, str] | None = None


class BatchResult(msgspec.Struct):
    created: int
    unchanged: int
    failed: int
    results: list[BatchItem]


class Receipt(msgspec.Struct):
    """What an erasure removed (``erase_memory``, ``erase_document``, ``erase_user``): counts
    per kind (memories, chunks, vectors, tsvectors, mentions, edges, entities, jobs, …)."""

    erased: dict[str, int]
    graph_mirror: dict[str, int] = msgspec.field(default_factory=dict)
    audit_id: int | None = None
    user_id: str | None = None


class AnswerEvent(msgspec.Struct):
    """One event of ``answer_stream``: ``token`` with a piece of ``text``, then ``done`` with
    the whole ``result``."""

    event: str  # "token" | "done"
    text: str = ""
    result: Answer | None = None

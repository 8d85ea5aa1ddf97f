"""knowmind's Python client: ``Knowmind`` (blocking) and ``AsyncKnowmind`` (asyncio) over the
REST API, typed results, retries with backoff on 429/503, pagination helpers.

    from knowmind.client import Knowmind

    with Knowmind("http://127.0.0.1:8080", "kmt_…") as km:
        km.remember("Anna Schmidt leitet das Projekt Nordlicht.", tags=["people"])
        for hit in km.recall("Wer leitet Nordlicht?").results:
            print(hit.score, hit.content)

It needs only ``httpx`` and ``msgspec`` and imports nothing of the server.
"""

from knowmind.client.aio import AsyncKnowmind
from knowmind.client.http import RetryPolicy
from knowmind.client.sync import Knowmind
from knowmind.client.types import (
    Answer,
    AnswerEvent,
    BatchItem,
    BatchResult,
    Conversation,
    Document,
    Entity,
    EntityHit,
    History,
    Hit,
    Job,
    KnowmindAPIError,
    Link,
    Memory,
    MemoryPage,
    Recall,
    Receipt,
    Relation,
    Remembered,
    Speaker,
    TenantSettings,
    Token,
    Turn,
)

__all__ = [
    "Answer",
    "AnswerEvent",
    "AsyncKnowmind",
    "BatchItem",
    "BatchResult",
    "Conversation",
    "Document",
    "Entity",
    "EntityHit",
    "History",
    "Hit",
    "Job",
    "Knowmind",
    "KnowmindAPIError",
    "Link",
    "Memory",
    "MemoryPage",
    "Recall",
    "Receipt",
    "Relation",
    "Remembered",
    "RetryPolicy",
    "Speaker",
    "TenantSettings",
    "Token",
    "Turn",
]

"""knowmind's Python client: ``Knowmind`` (blocking) and ``AsyncKnowmind`` (asyncio) over the
REST API, typed results, retries with backoff on 429/503, pagination helpers.

    from knowmind.client import Knowmind

    with Knowmind("http://127.0.0.1:8080", "kmt_…") as km:
        km.remember("Anna Schmidt leitet das Projekt Nordlicht.", tags=["people"])
        for hit in km.recall("Wer leitet Nordlicht?").results:
            print(hit.score, hit.content)

It needs only ``httpx`` and ``msgspec`` and imports nothing of the server.
"""

from knowmind.client.http import AsyncKnowmind, Knowmind, RetryPolicy
from knowmind.client.types import (
    BatchItem,
    BatchResult,
    Conversation,
    Document,
    Hit,
    Job,
    KnowmindAPIError,
    Memory,
    MemoryPage,
    Recall,
    Remembered,
    Speaker,
    Turn,
)

__all__ = [
    "AsyncKnowmind",
    "BatchItem",
    "BatchResult",
    "Conversation",
    "Document",
    "Hit",
    "Job",
    "Knowmind",
    "KnowmindAPIError",
    "Memory",
    "MemoryPage",
    "Recall",
    "Remembered",
    "RetryPolicy",
    "Speaker",
    "Turn",
]

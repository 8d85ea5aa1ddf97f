"""The body of ``GET /v1/memories/{id}/history`` (``contract.responses.MemoryHistoryOut``) from
the service's history: the memory's supersessions (by hand: ``update_fact``; automatic: a
single-valued fact it stated changed) and automatic fact updates."""

from __future__ import annotations

from knowmind.api.outputs import response
from knowmind.contract.responses import MemoryHistoryOut
from knowmind.services.facts import MemoryHistory

__all__ = ["history_out"]


def history_out(history: MemoryHistory) -> MemoryHistoryOut:
    return response(history, MemoryHistoryOut)

"""Time stage ``time``: a question that names a time ("last week", "im Mai 2023", "vor zwei
Jahren", "before June 2023") is answered from the memories whose event time (``occurred_at``)
falls in the window it names, nearest to the question first.

The window is resolved once per recall against the question's reference time (the request's
``reference_time``, else its ``as_of``, else now; ``recall.timeframe``) and shared through the
stage context: the ranker reads it too (whether each candidate lies in it, and how far off).
A "when"/"wann" question that names no time is answered from the memories whose text states
one ("yesterday", "last May", "for three years now"; ``memories.states_time``), nearest to the
question first: the turn that says when something happened often shares few words with the
question. Any other question makes no query.
"""

from __future__ import annotations

from dataclasses import replace

from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.recall.vector import VectorStage

__all__ = ["TimeStage"]


class TimeStage:
    name = "time"

    def __init__(self, vector: VectorStage) -> None:
        self.vector = vector

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        window = ctx.time_window
        if query.explain:
            ctx.explain["time_window"] = None if window is None else window.explain()
        ctx.signals[self.name] = {"window": float(window is not None)}
        if window is None:
            if not ctx.asks_when:
                return []
            stating = replace(query.filters, states_time=True)
            return await self.vector.nearest(query, ctx, stating)
        filters = query.filters
        start = max(window.start, filters.occurred_after or window.start)
        end = min(window.end, filters.occurred_before or window.end)
        if start >= end:
            return []
        within = replace(filters, occurred_after=start, occurred_before=end)
        return await self.vector.nearest(query, ctx, within)

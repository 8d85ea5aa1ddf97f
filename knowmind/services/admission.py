"""Admission of CPU-bound work: at most ``slots`` requests run at once, the rest wait in turn,
tenants round-robin.

A recall is CPU work (the stages' PostgreSQL backends and the fusion in Python); on a machine
with few cores, letting every arriving recall start at once only makes them share the cores:
each one then takes as long as all of them together, and the unlucky ones much longer (the p95
grows faster than the load). Admitting as many as the cores can run and queueing the others
keeps each admitted recall near its single-client latency and makes the wait a fair queue.
Waiters are served one tenant at a time in rotation, so a tenant sending many recalls at once
waits behind its own requests, not in front of another tenant's single one.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

__all__ = ["FairGate"]


class FairGate:
    """``slots`` holders at once; waiters queued per key and admitted key by key in turn."""

    def __init__(self, slots: int) -> None:
        if slots <= 0:
            raise ValueError("slots must be positive")
        self.slots = slots
        self._running = 0
        self._waiting: OrderedDict[Hashable, deque[asyncio.Future[None]]] = OrderedDict()

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    @asynccontextmanager
    async def admit(self, key: Hashable) -> AsyncIterator[None]:
        """Hold a slot for the body; waits (in ``key``'s turn) while all are taken."""
        await self._acquire(key)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, key: Hashable) -> None:
        if self._running < self.slots and not self._waiting:
            self._running += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()  # admitted just as the caller went away: pass the slot on
            else:
                self._forget(key, turn)
            raise

    def _release(self) -> None:
        self._running -= 1
        while self._waiting and self._running < self.slots:
            key, queue = next(iter(self._waiting.items()))
            turn = queue.popleft()
            if queue:
                self._waiting.move_to_end(key)  # the next waiter of this key queues anew
            else:
                del self._waiting[key]
            if not turn.done():
                self._running += 1
                turn.set_result(None)

    def _forget(self, key: Hashable, turn: asyncio.Future[None]) -> None:
        queue = self._waiting.get(key)
        if queue is not None and turn in queue:
            queue.remove(turn)
            if not queue:
                del self._waiting[key]

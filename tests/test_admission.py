"""The recall admission gate: at most ``slots`` at once, waiters admitted tenant by tenant in
turn, a waiter that goes away neither holds nor loses a slot."""

from __future__ import annotations

import asyncio

import pytest

from knowmind.services.admission import FairGate


async def _hold(gate: FairGate, key: str, log: list[str], release: asyncio.Event) -> None:
    async with gate.admit(key):
        log.append(key)
        await release.wait()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_slots_bound_how_many_run_at_once():
    gate = FairGate(2)
    log: list[str] = []
    release = asyncio.Event()
    tasks = [asyncio.ensure_future(_hold(gate, f"t{i}", log, release)) for i in range(5)]
    await _settle()
    assert gate.running == 2 and gate.waiting == 3 and log == ["t0", "t1"]
    release.set()
    await asyncio.gather(*tasks)
    assert gate.running == 0 and gate.waiting == 0 and len(log) == 5


async def test_waiters_are_admitted_tenant_by_tenant_in_turn():
    """A tenant that queued six recalls does not go ahead of another tenant's single one."""
    gate = FairGate(1)
    order: list[str] = []

    async def one(key: str) -> None:
        async with gate.admit(key):
            order.append(key)

    blocker = asyncio.Event()
    first = asyncio.ensure_future(_hold(gate, "busy", [], blocker))
    await _settle()
    tasks = [asyncio.ensure_future(one("a")) for _ in range(6)]
    await _settle()
    tasks += [asyncio.ensure_future(one("b")), asyncio.ensure_future(one("c"))]
    await _settle()
    blocker.set()
    await asyncio.gather(first, *tasks)
    assert order[:3] == ["a", "b", "c"]
    assert order.count("a") == 6


async def test_a_cancelled_waiter_leaves_the_queue_and_the_slot_passes_on():
    gate = FairGate(1)
    release = asyncio.Event()
    holder = asyncio.ensure_future(_hold(gate, "a", [], release))
    await _settle()
    gone = asyncio.ensure_future(_hold(gate, "b", [], release))
    log: list[str] = []
    stays = asyncio.ensure_future(_hold(gate, "c", log, asyncio.Event()))
    await _settle()
    gone.cancel()
    await _settle()
    assert gate.waiting == 1
    release.set()
    await holder
    await _settle()
    assert log == ["c"] and gate.running == 1
    stays.cancel()
    await asyncio.gather(stays, gone, return_exceptions=True)
    assert gate.running == 0 and gate.waiting == 0


async def test_a_waiter_cancelled_as_it_is_admitted_passes_its_slot_on():
    gate = FairGate(1)
    release = asyncio.Event()
    holder = asyncio.ensure_future(_hold(gate, "a", [], release))
    await _settle()
    late = asyncio.ensure_future(_hold(gate, "b", [], asyncio.Event()))
    log: list[str] = []
    next_one = asyncio.ensure_future(_hold(gate, "c", log, asyncio.Event()))
    await _settle()
    release.set()
    await holder  # "b" is admitted (its turn resolved) but has not run yet
    late.cancel()
    await _settle()
    assert log == ["c"] and gate.running == 1
    next_one.cancel()
    await asyncio.gather(late, next_one, return_exceptions=True)
    assert gate.running == 0


def test_slots_must_be_positive():
    with pytest.raises(ValueError, match="slots"):
        FairGate(0)

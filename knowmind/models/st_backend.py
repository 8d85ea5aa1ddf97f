"""sentence-transformers models (optional ``ml`` extra), e.g. intfloat/multilingual-e5-large."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SentenceTransformerEmbedder"]

E5_QUERY_PREFIX = "query: "
E5_PASSAGE_PREFIX = "passage: "


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by hub name or local path, with the e5 prefixes."""

    def __init__(self, name_or_path: str, threads: int = 2, batch_size: int = 32) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise RuntimeError(
                "KNOWMIND_EMBEDDER=sentence-transformers:... needs the 'ml' extra "
                "(pip install 'knowmind[ml]')"
            ) from exc
        torch.set_num_threads(max(1, threads))
        self._model = SentenceTransformer(name_or_path, device="cpu")
        self._batch_size = batch_size
        self.model_id = name_or_path
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if not dim:
            raise RuntimeError(f"model {name_or_path!r} does not report an embedding dimension")
        self.dim = int(dim)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([E5_QUERY_PREFIX + t for t in texts])

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([E5_PASSAGE_PREFIX + t for t in texts])

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)

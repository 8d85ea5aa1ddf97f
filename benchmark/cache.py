"""An on-disk embedding cache keyed by (model id, kind, sha256 of the text): reruns don't embed."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from knowmind.models.base import Embedder

__all__ = ["CachingEmbedder"]


class CachingEmbedder:
    """Wraps an embedder (same interface); misses are embedded in one call and stored."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )
        self.hits = self.misses = 0

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "query", self.inner.embed_queries)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "passage", self.inner.embed_passages)

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\0{kind}\0{text}".encode()).hexdigest()

    def _embed(self, texts: Sequence[str], kind: str, embed) -> np.ndarray:
        keys = [self._key(kind, t) for t in texts]
        found = (
            dict(
                self._db.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(keys))})",
                    keys,
                ).fetchall()
            )
            if keys
            else {}
        )
        missing = [i for i, key in enumerate(keys) if key not in found]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = embed([texts[i] for i in missing])
            rows = [
                (keys[i], vectors[j].astype(np.float32).tobytes()) for j, i in enumerate(missing)
            ]
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self._db.commit()
            found.update(rows)
        return (
            np.stack([np.frombuffer(found[key], dtype=np.float32) for key in keys])
            if keys
            else np.empty((0, self.dim), dtype=np.float32)
        )

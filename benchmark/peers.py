"""Peer retrieval systems a user might pick instead of knowmind, on the same texts and vectors.

Both peers get the benchmark's precomputed vectors (the documents' passage vectors and each
query's query vector) and embed nothing themselves, so they run offline and differ from knowmind
only in how they index and fuse. Both search the vectors exactly (no approximate index), so
ANN recall plays no part. Install them with the ``bench`` extra.

- ``txtai-bb25``: txtai hybrid search, BM25 scoring with ``normalize="bb25"`` (Bayesian BM25
  calibration, which switches txtai's fusion to log-odds conjunction) plus dense cosine.
- ``lancedb-hybrid``: LanceDB's native full-text index (stemmed for the dataset's language)
  plus cosine vector search, fused with ``RRFReranker`` (k=60).
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["LanceDBHybrid", "PeerDoc", "PeerSystem", "TxtaiBB25", "available_peers"]

# txtai prepends these to every text that reaches its vector model: "passage: " to documents
# when indexing and "query: " to queries when searching (txtai's e5 ``instructions`` setting).
# Our embedder has already applied e5's prefixes to the vectors we were given, so here the
# prefixes only label each text: the transform below looks "passage: <doc>" up among the
# documents' vectors and "query: <query>" among the current query's, so a query can never get
# a passage vector (or the reverse), even when a query's text equals a document's.
# Documents with identical text share one key, and so one vector (the last one given).
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "

# Language of the dataset -> LanceDB stemmer language; None (mixed pools such as XQuAD de+en,
# and any other value) means no stemming and no stop-word list, like PostgreSQL's "simple".
LANCEDB_LANGUAGES = {"german": "German", "english": "English"}


@dataclass(frozen=True)
class PeerDoc:
    id: str
    title: str
    text: str


class PeerSystem(Protocol):
    name: str

    def index(self, docs: Sequence[PeerDoc], vectors: np.ndarray, language: str) -> None: ...

    def search(self, query: str, query_vector: np.ndarray, k: int) -> list[str]: ...

    def close(self) -> None:
        """Free the index (memory, temporary files); the peer is not searched again."""


def doc_text(doc: PeerDoc) -> str:
    """The text both peers index for full-text search: the same string our vectors embed."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _as_matrix(vectors: np.ndarray, n: int) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise ValueError(f"expected {n} vectors, got an array of shape {matrix.shape}")
    return matrix


class TxtaiBB25:
    """txtai hybrid: BM25 (terms index, BB25-normalized) + dense cosine on external vectors."""

    name = "txtai-bb25"

    def __init__(self) -> None:
        self._embeddings: Any = None
        self._vectors: dict[str, np.ndarray] = {}

    def _transform(self, texts: Sequence[str]) -> np.ndarray:
        # KeyError on a text we hold no vector for: txtai must never embed anything itself.
        return np.stack([self._vectors[text] for text in texts])

    def index(self, docs: Sequence[PeerDoc], vectors: np.ndarray, language: str) -> None:
        from txtai import Embeddings

        self.close()
        matrix = _as_matrix(vectors, len(docs))
        self._vectors = {PASSAGE_PREFIX + doc_text(d): v for d, v in zip(docs, matrix, strict=True)}
        transform = self._transform

        # A plain function: txtai calls anything else (e.g. a bound method) to build one.
        def lookup(texts: Sequence[str]) -> np.ndarray:
            return transform(texts)

        # `language` is not used: txtai's BM25 tokenizer is language-independent (Unicode
        # words, lower-cased) and has no stemmer.
        self._embeddings = Embeddings(
            method="external",
            transform=lookup,
            instructions={"query": QUERY_PREFIX, "data": PASSAGE_PREFIX},
            hybrid=True,
            scoring={"method": "bm25", "terms": True, "normalize": "bb25"},
            backend="faiss",
            faiss={"components": "IDMap,Flat"},  # exact inner product on normalized vectors
            content=False,
        )
        self._embeddings.index((d.id, doc_text(d), None) for d in docs)

    def search(self, query: str, query_vector: np.ndarray, k: int) -> list[str]:
        if self._embeddings is None:
            raise RuntimeError("index() first")
        key = QUERY_PREFIX + query
        self._vectors[key] = np.asarray(query_vector, dtype=np.float32)
        try:
            hits = self._embeddings.search(query, k)
        finally:
            del self._vectors[key]
        return [str(uid) for uid, _score in hits]

    def close(self) -> None:
        if self._embeddings is not None:
            self._embeddings.close()
        self._embeddings, self._vectors = None, {}


class LanceDBHybrid:
    """LanceDB hybrid: native FTS (stemmed) + cosine vector search, fused by RRF."""

    name = "lancedb-hybrid"

    def __init__(self) -> None:
        self._dir: str | None = None
        self._table: Any = None

    def index(self, docs: Sequence[PeerDoc], vectors: np.ndarray, language: str) -> None:
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS

        self.close()
        matrix = _as_matrix(vectors, len(docs))
        self._dir = tempfile.mkdtemp(prefix="bench-lancedb-")
        data = pa.table(
            {
                "id": pa.array([d.id for d in docs], pa.string()),
                "text": pa.array([doc_text(d) for d in docs], pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(matrix.ravel(), pa.float32()), matrix.shape[1]
                ),
            }
        )
        self._table = lancedb.connect(self._dir).create_table("docs", data=data)
        stemmer = LANCEDB_LANGUAGES.get(language)
        fts = FTS(
            base_tokenizer="simple",
            language=stemmer or "English",
            stem=stemmer is not None,
            remove_stop_words=stemmer is not None,
            lower_case=True,
            ascii_folding=True,
        )
        self._table.create_index("text", config=fts)

    def search(self, query: str, query_vector: np.ndarray, k: int) -> list[str]:
        from lancedb.rerankers import RRFReranker

        if self._table is None:
            raise RuntimeError("index() first")
        rows = (
            self._table.search(query_type="hybrid", vector_column_name="vector", fts_columns="text")
            .vector(np.asarray(query_vector, dtype=np.float32))
            .text(query)
            .distance_type("cosine")
            .rerank(RRFReranker())
            .limit(k)
            .to_list()
        )
        return [str(row["id"]) for row in rows]

    def close(self) -> None:
        self._table = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _missing(*modules: str) -> str | None:
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if absent:
        return f"{', '.join(absent)} not installed (pip install 'knowmind[bench]')"
    return None


def available_peers() -> dict[str, PeerSystem | str]:
    """Peer name -> a fresh instance, or the reason it cannot run here."""
    peers: dict[str, PeerSystem | str] = {}
    for name, factory, modules in (
        (TxtaiBB25.name, TxtaiBB25, ("txtai", "faiss")),
        (LanceDBHybrid.name, LanceDBHybrid, ("lancedb", "pyarrow")),
    ):
        peers[name] = _missing(*modules) or factory()
    return peers

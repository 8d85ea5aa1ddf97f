"""Cross-encoder rerankers: FlagEmbedding's ``FlagReranker`` (production default
``BAAI/bge-reranker-v2-m3``) and sentence-transformers' ``CrossEncoder``.

A reranker that cannot load is never replaced by another method: ``load_reranker`` returns the
reason, ``/v1/capabilities`` shows it, and recalls that wanted reranking say they did without.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from knowmind.models.base import split_spec

__all__ = [
    "AUTO",
    "AUTO_RERANKER",
    "RERANKERS",
    "LoadedReranker",
    "Reranker",
    "RerankerSpecError",
    "check_reranker_spec",
    "load_reranker",
    "parse_spec",
]


class Reranker(Protocol):
    backend: str
    model: str

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Relevance of each passage to the query (higher is better); blocking."""
        ...


class RerankerSpecError(ValueError):
    pass


class FlagRerankerBackend:
    backend = "flag"

    def __init__(self, model: str, threads: int) -> None:
        import torch
        from FlagEmbedding import FlagReranker

        torch.set_num_threads(max(1, threads))
        self.model = model
        self._model = FlagReranker(model, use_fp16=False, devices="cpu")

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        scores = self._model.compute_score([[query, p] for p in passages], normalize=True)
        return [float(s) for s in (scores if isinstance(scores, list) else [scores])]


class CrossEncoderBackend:
    backend = "cross-encoder"

    def __init__(self, model: str, threads: int) -> None:
        import torch
        from sentence_transformers import CrossEncoder

        torch.set_num_threads(max(1, threads))
        self.model = model
        self._model = CrossEncoder(model, device="cpu")

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return [float(s) for s in self._model.predict([(query, p) for p in passages])]


# The rerankers by name: ``KNOWMIND_RERANKER`` is ``none`` or ``<backend>:<model>``.
RERANKERS: dict[str, Callable[[str, int], Reranker]] = {
    "flag": FlagRerankerBackend,
    "cross-encoder": CrossEncoderBackend,
}


@dataclass(frozen=True, slots=True)
class LoadedReranker:
    spec: str
    reranker: Reranker | None
    reason: str | None  # why there is none

    @property
    def active(self) -> bool:
        return self.reranker is not None


def parse_spec(spec: str) -> tuple[str, str] | None:
    if spec == "none":
        return None
    if spec == AUTO:
        spec = AUTO_RERANKER
    parsed = split_spec(spec, dict.fromkeys(RERANKERS, True))
    if parsed is None:
        expected = "'none', 'auto', 'flag:<model>' or 'cross-encoder:<model>'"
        raise RerankerSpecError(f"KNOWMIND_RERANKER={spec!r}: expected {expected}")
    return parsed


#: ``auto``: this reranker when its weights are on the machine, else none (and said so)
AUTO = "auto"
AUTO_RERANKER = "flag:BAAI/bge-reranker-v2-m3"


def check_reranker_spec(spec: str) -> None:
    """Raise :class:`RerankerSpecError` unless ``spec`` is ``none``, ``auto`` or a registered
    reranker."""
    parse_spec(spec)


def _local_model_path(model: str) -> str:
    """A directory, or a hub id already in the local cache; never a download."""
    if Path(model).is_dir():
        return model
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(model, local_files_only=True)
    except Exception as exc:  # LocalEntryNotFoundError and friends
        raise OSError(f"{model} is not in the local model cache") from exc


def load_reranker(spec: str, threads: int = 2) -> LoadedReranker:
    """Load the configured reranker, offline only (weights must be on disk or in the cache)."""
    parsed = parse_spec(spec)
    if parsed is None:
        return LoadedReranker(spec, None, "no reranker configured (KNOWMIND_RERANKER=none)")
    backend, model = parsed
    try:
        path = _local_model_path(model)
        return LoadedReranker(spec, RERANKERS[backend](path, threads), None)
    except ImportError as exc:
        return LoadedReranker(
            spec, None, f"{backend} backend not installed ({exc.name}); install the 'ml' extra"
        )
    except OSError:
        return LoadedReranker(
            spec, None, f"model {model!r} is not available offline (no weights on this host)"
        )
    except Exception as exc:
        return LoadedReranker(
            spec, None, f"model {model!r} failed to load: {type(exc).__name__}: {exc}"[:300]
        )

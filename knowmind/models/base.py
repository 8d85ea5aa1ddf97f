"""The embedder interface every backend implements, and how a model setting names a backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "split_spec"]


def split_spec(spec: str, takes_model: Mapping[str, bool]) -> tuple[str, str] | None:
    """(backend, model) from ``<backend>`` or ``<backend>:<model>``; None unless ``takes_model``
    knows the backend and a model is given exactly when the backend takes one."""
    backend, colon, model = spec.partition(":")
    if backend not in takes_model or takes_model[backend] != bool(model):
        return None
    if bool(colon) != bool(model):  # "name:" with an empty model
        return None
    return backend, model


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of ``dim`` dimensions (blocking calls)."""

    model_id: str
    dim: int

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...

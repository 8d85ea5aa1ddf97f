"""What is active on this host: ``GET /v1/capabilities``. Nothing here is aspirational — each
entry is read from the running components, with the reason when something is missing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from knowmind.ingest.ner import SPACY_MODEL, spacy_recogniser
from knowmind.models.rerank import parse_spec
from knowmind.recall.weighting import default_calibration

if TYPE_CHECKING:
    from knowmind.runtime import Runtime

__all__ = ["describe"]


async def describe(runtime: Runtime) -> dict[str, Any]:
    settings = runtime.settings
    pipeline = runtime.recall.pipeline
    return {
        "embedder": {
            "backend": settings.embedder.split(":", 1)[0],
            "model": runtime.embedder.model_id,
            "dim": runtime.embedder.dim,
        },
        "reranker": _reranker(runtime),
        "graph": {
            "backend": runtime.graph_reader.name,
            "gds": await _gds(runtime),
            "mirror": await runtime.mirror_report(),
        },
        "ner": {
            "rules": "ner" in settings.extractor_list,
            "spacy": _spacy(),
        },
        "extraction": {
            "extractors": settings.extractor_list,
            "llm": {"active": False, "reason": "LLM extraction is not implemented yet"},
        },
        "stages": list(pipeline.stages),
        "fusion": {
            "method": pipeline.fusion,
            "k": pipeline.rrf_k,
            "weights": pipeline.default_weights,
            "calibration": (pipeline.calibration or default_calibration()).source,
        },
    }


def _reranker(runtime: Runtime) -> dict[str, Any]:
    step = runtime.recall.pipeline.rerank
    parsed = parse_spec(step.spec)
    backend, model = parsed if parsed else (None, None)
    if step.loaded is None:
        reason = "loading" if step.configured else "no reranker configured"
    else:
        reason = step.loaded.reason
    return {
        "active": bool(step.loaded and step.loaded.active),
        "backend": backend,
        "model": model,
        "candidates": step.candidates,
        "reason": reason,
    }


def _spacy() -> dict[str, Any]:
    recogniser = spacy_recogniser()
    if recogniser is None:
        return {"active": False, "reason": f"spaCy or {SPACY_MODEL} not installed"}
    return {"active": True, "model": SPACY_MODEL, "languages": ["english"]}


async def _gds(runtime: Runtime) -> bool | None:
    has_gds = getattr(runtime.graph_reader, "has_gds", None)
    return await has_gds() if has_gds else None

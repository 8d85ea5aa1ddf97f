"""The recall subsystem: the stages chosen by name, their pipeline (fusion, reranker, learned
ranker) and the service that admits recalls in turn."""

from __future__ import annotations

from dataclasses import dataclass

from knowmind.db.engine import Database
from knowmind.models.language import language_detector
from knowmind.recall.bm25 import LexicalOptions
from knowmind.recall.pipeline import RecallPipeline
from knowmind.recall.registry import StageParts, build_stages
from knowmind.runtime.graph import GraphParts
from knowmind.runtime.models import ModelParts
from knowmind.services.admission import FairGate
from knowmind.services.recall import RecallService
from knowmind.settings import RecallSettings, available_cores

__all__ = ["RecallParts", "build_recall", "lexical_options"]


@dataclass(frozen=True, slots=True)
class RecallParts:
    pipeline: RecallPipeline
    service: RecallService


def lexical_options(settings: RecallSettings) -> LexicalOptions:
    """The bm25 stage's options from the recall settings."""
    return LexicalOptions(
        k1=settings.bm25_k1,
        b=settings.bm25_b,
        postings_budget=settings.bm25_postings_budget,
        typos=settings.bm25_typos == "on",
        compounds=settings.bm25_compounds == "on",
        query_language=settings.bm25_query_language == "on",
    )


def build_recall(
    settings: RecallSettings, db: Database, models: ModelParts, graph: GraphParts
) -> RecallParts:
    lexical = lexical_options(settings)
    stages = build_stages(
        StageParts(
            graph_reader=graph.reader,
            vector_exact_max_rows=settings.vector_exact_max_rows,
            vector_ef_search=settings.vector_ef_search,
            vector_tenant_ef_search=settings.vector_tenant_ef_search,
            graph_hit_wait_s=settings.graph_hit_wait_seconds,
            lexical=lexical,
            language_detector=language_detector() if lexical.query_language else None,
        )
    )
    pipeline = RecallPipeline(
        db,
        models.embedder,
        stages,
        rrf_k=settings.rrf_k,
        stage_timeout_s=settings.stage_timeout_seconds,
        default_weights=settings.weights,
        rerank=models.rerank,
        fusion=settings.recall_fusion,
        ranker=settings.ranker,
    )
    slots = settings.recall_concurrency or 2 * available_cores()
    return RecallParts(
        pipeline, RecallService(pipeline, settings.recall_candidates, FairGate(slots))
    )

"""The names settings give the registries, checked where the registries are built: stages (and
their weights), the graph backend, the embedder, the reranker and the language model provider.
``Settings`` itself imports no registry; the app factory and ``Runtime.start`` call this first,
so a wrong name fails at start-up, naming its variable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from knowmind.graph.registry import check_graph_backend
from knowmind.models.factory import check_embedder_spec
from knowmind.models.llm_factory import check_llm_provider
from knowmind.models.rerank import check_reranker_spec
from knowmind.recall.registry import check_stage_names
from knowmind.settings import ENV_PREFIX, Settings, SettingsError

__all__ = ["check_registered_names"]


def check_registered_names(settings: Settings) -> None:
    """Raise :class:`SettingsError` naming the variable of the first name no registry knows."""
    checks: list[tuple[str, Callable[[Any], None], Any]] = [
        ("STAGE_WEIGHTS", check_stage_names, settings.recall.weights),
        ("GRAPH_BACKEND", check_graph_backend, settings.graph.graph_backend),
        ("EMBEDDER", check_embedder_spec, settings.models.embedder),
        ("RERANKER", check_reranker_spec, settings.models.reranker),
        ("LLM_PROVIDER", check_llm_provider, settings.models.llm_provider),
    ]
    for variable, check, value in checks:
        try:
            check(value)
        except ValueError as exc:
            message = str(exc)
            prefix = "" if message.startswith(ENV_PREFIX) else f"{ENV_PREFIX}{variable}: "
            raise SettingsError(prefix + message) from exc

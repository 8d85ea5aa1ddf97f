"""Pure functions: chunking, fusion, tokens and scopes, settings."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest

from knowmind.ingest.chunker import chunk_text, split_sentences
from knowmind.recall.fusion import dedupe, reciprocal_rank_fusion
from knowmind.services.auth import Principal, new_token, parse_token
from knowmind.settings import Settings, SettingsError, settings_table
from knowmind.store.vector_search import path_ef_search


def test_sentences_respect_abbreviations_ordinals_and_quotes():
    text = (
        'Dr. Müller arbeitet z.B. bei der Siemens AG. Am 3. Mai kam er. "Das ist Anna." '
        "Sie wohnt in Berlin! Wer weiß?\n\nNeuer Absatz ohne Punkt\n\nJ. R. R. Tolkien schrieb."
    )
    assert split_sentences(text) == [
        "Dr. Müller arbeitet z.B. bei der Siemens AG.",
        "Am 3. Mai kam er.",
        '"Das ist Anna."',
        "Sie wohnt in Berlin!",
        "Wer weiß?",
        "Neuer Absatz ohne Punkt",
        "J. R. R. Tolkien schrieb.",
    ]


def test_chunks_stay_near_the_target_and_overlap_by_whole_sentences():
    sentences = [f"Satz Nummer {i} handelt von etwas anderem." for i in range(100)]
    chunks = chunk_text(" ".join(sentences), target_chars=300, overlap_chars=100)
    assert all(len(c) <= 300 for c in chunks)
    for left, right in itertools.pairwise(chunks):
        assert split_sentences(right)[0] in split_sentences(left)[1:]  # overlap, whole sentences
    joined = " ".join(chunks)
    assert all(s in joined for s in sentences)


def test_overlong_sentence_is_cut_at_whitespace():
    chunks = chunk_text("wort " * 500, target_chars=200, overlap_chars=0)
    assert len(chunks) > 5
    assert all(0 < len(c) <= 200 and not c.startswith(" ") for c in chunks)


def test_short_text_is_one_chunk():
    assert chunk_text("Nur ein Satz.") == ["Nur ein Satz."]


def test_rrf_scores_are_sums_of_reciprocal_ranks():
    fused = reciprocal_rank_fusion({"bm25": ["a", "b", "c"], "vector": ["b", "d"]}, k=60)
    scores = {f.key: f.score for f in fused}
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["d"] == pytest.approx(1 / 62)
    assert [f.key for f in fused] == ["b", "a", "d", "c"]
    assert fused[0].ranks == {"bm25": 2, "vector": 1}


def test_rrf_weights_and_k():
    fused = reciprocal_rank_fusion({"bm25": ["a"], "vector": ["b"]}, k=1, weights={"vector": 2.0})
    assert [(f.key, f.score) for f in fused] == [("b", 1.0), ("a", 0.5)]


def test_dedupe_keeps_first_occurrence():
    assert dedupe(["m1", "m2", "m1", "m3", "m2"]) == ["m1", "m2", "m3"]


def test_tokens_carry_their_tenant():
    tenant = uuid.uuid4()
    token = new_token(tenant)
    assert token.startswith("kmt_")  # the form knowmind's clients accept
    assert parse_token(token) == tenant
    assert new_token(tenant) != token
    assert parse_token("km_" + token.removeprefix("kmt_")) == tenant  # issued before: still valid
    for bad in ("", "km_x_y", "km_" + tenant.hex, f"xx_{tenant.hex}_{'a' * 40}", "kmadmin_abc"):
        assert parse_token(bad) is None


@pytest.mark.parametrize(
    ("granted", "needed", "allowed"),
    [
        ({"read"}, "read", True),
        ({"read"}, "write", False),
        ({"write"}, "read", True),
        ({"write"}, "admin", False),
        ({"admin"}, "write", True),
        (set(), "read", False),
    ],
)
def test_scopes_are_ordered(granted, needed, allowed):
    who = Principal(tenant_id=uuid.uuid4(), scopes=frozenset(granted))
    assert who.allows(needed) is allowed


def test_settings_from_environment():
    settings = Settings.from_env(
        {
            "KNOWMIND_PORT": "9000",
            "KNOWMIND_DATA_DIR": "/srv/km",
            "KNOWMIND_DATABASE_URL": "postgresql://u@h/db",
            "KNOWMIND_DEFAULT_LANGUAGE": "english",
            "KNOWMIND_MAX_BODY_BYTES": "2048",
            "UNRELATED": "x",
        }
    )
    assert settings.server.port == 9000
    assert settings.server.data_dir == Path("/srv/km")
    assert settings.database.database_url == "postgresql://u@h/db"
    assert settings.database.default_language == "english"
    assert settings.server.max_body_bytes == 2048
    assert Settings.from_env({}).database.database_url is None


@pytest.mark.parametrize(
    "env",
    [
        {"KNOWMIND_PORT": "eighty"},
        {"KNOWMIND_LOG_FORMAT": "xml"},
        {"KNOWMIND_CHUNK_TARGET_CHARS": "100", "KNOWMIND_CHUNK_OVERLAP_CHARS": "100"},
        {"KNOWMIND_MAX_BODY_BYTES": "0"},
        {"KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS": "-1"},
        {"KNOWMIND_VECTOR_EXACT_MAX_ROWS": "-5"},
    ],
)
def test_bad_settings_are_refused_with_the_variable_named(env):
    with pytest.raises(SettingsError, match="KNOWMIND_"):
        Settings.from_env(env)


def test_tenant_index_threshold_setting():
    assert Settings.from_env({}).recall.vector_tenant_index_min_rows == 10_000
    env = {"KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS": "0"}
    assert Settings.from_env(env).recall.vector_tenant_index_min_rows == 0
    with pytest.raises(SettingsError, match="KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS"):
        Settings.from_env({"KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS": "-1"})


def test_a_tenants_halfvec_index_gets_its_own_ef_search():
    assert Settings.from_env({}).recall.vector_tenant_ef_search == 100
    with pytest.raises(SettingsError, match="KNOWMIND_VECTOR_TENANT_EF_SEARCH"):
        Settings.from_env({"KNOWMIND_VECTOR_TENANT_EF_SEARCH": "0"})
    assert path_ef_search("tenant-hnsw-halfvec", 200, 100) == 100
    # an index on the column (built by an earlier version, m 16) keeps the shared value
    assert [path_ef_search(p, 200, 100) for p in ("tenant-hnsw", "hnsw", "exact")] == [200] * 3


def test_docs_document_every_setting():
    """docs/settings.md (generated by make docs) names every setting."""
    page = (Path(__file__).parent.parent / "docs" / "settings.md").read_text()
    for line in settings_table().splitlines()[2:]:
        if "`" not in line:
            continue  # a group heading
        variable = line.split("`")[1]
        assert variable in page, variable


def test_stage_weights_setting():
    settings = Settings.from_env({"KNOWMIND_STAGE_WEIGHTS": "vector=1.125, bm25=1,graph=0.9"})
    assert settings.recall.weights == {"vector": 1.125, "bm25": 1.0, "graph": 0.9}
    assert Settings.from_env({}).recall.weights == {}
    with pytest.raises(SettingsError, match="KNOWMIND_STAGE_WEIGHTS"):
        Settings.from_env({"KNOWMIND_STAGE_WEIGHTS": "vector=heavy"})
    with pytest.raises(SettingsError, match="KNOWMIND_GRAPH_BACKEND"):
        Settings.from_env({"KNOWMIND_GRAPH_BACKEND": "neo4j"})  # without KNOWMIND_NEO4J_URL
    with pytest.raises(SettingsError, match="not available"):
        Settings.from_env({"KNOWMIND_EXTRACTORS": "gazetteer,openie"})
    assert (
        Settings.from_env({"KNOWMIND_EXTRACTORS": "gazetteer,llm"}).ingest.extractor_list[1]
        == "llm"
    )
    with pytest.raises(SettingsError, match="__CHUNK__"):
        Settings.from_env({"KNOWMIND_EXTRACTION_PROMPT": "Extract entities."})


def test_settings_groups_keep_the_variable_names():
    settings = Settings.from_env({"KNOWMIND_RERANKER": "none", "KNOWMIND_RRF_K": "42"})
    assert settings.models.reranker == "none" and settings.recall.rrf_k == 42
    changed = settings.with_overrides(chunk_target_chars=500, graph_batch_size=7)
    assert (changed.ingest.chunk_target_chars, changed.graph.graph_batch_size) == (500, 7)
    assert changed.models == settings.models  # other groups untouched
    with pytest.raises(TypeError, match="no_such_setting"):
        settings.with_overrides(no_such_setting=1)


def test_rerank_status_before_and_without_a_model():
    from knowmind.models.rerank import LoadedReranker
    from knowmind.recall.rerank import RerankStep

    off = RerankStep("none").status()
    assert (off.configured, off.active, off.loading) == (False, False, False)
    assert off.reason == "no reranker configured"
    loading = RerankStep("flag:some/model", candidates=7).status()
    assert (loading.configured, loading.loading, loading.reason) == (True, True, "loading")
    assert (loading.backend, loading.model, loading.candidates) == ("flag", "some/model", 7)
    failed = RerankStep("flag:some/model", loaded=LoadedReranker("flag:some/model", None, "gone"))
    assert (failed.status().loading, failed.status().active, failed.status().reason) == (
        False,
        False,
        "gone",
    )


def test_items_are_packed_in_groups_for_one_embedding_call_each():
    from knowmind.ingest.chunker import pack_in_groups

    assert pack_in_groups([], 3, 10) == []
    assert pack_in_groups([(1, 5), (1, 5), (1, 5)], 3, 10) == [range(0, 2), range(2, 3)]
    assert pack_in_groups([(1, 1)] * 4, 3, 100) == [range(0, 3), range(3, 4)]
    # an item larger than a group stands alone, never beside another
    assert pack_in_groups([(1, 1), (5, 50), (1, 1)], 3, 10) == [
        range(0, 1),
        range(1, 2),
        range(2, 3),
    ]

"""The ranker's parts without a database: features, the short list, the model and its calibration
(unit tests; the model here is trained on made-up rows, not the packaged one)."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from benchmark.ranker_fit import Questions, calibration, train
from knowmind.recall.features import FEATURE_NAMES, RankingInput, feature_matrix
from knowmind.recall.fusion import reciprocal_rank_fusion
from knowmind.recall.ranker import LearnedRanker, RankerUnavailableError, build_ranker
from knowmind.recall.ranking import shortlist
from knowmind.store.candidates import CandidateFacts
from knowmind.store.rows import ChunkHit

A, B, C = (uuid.uuid4() for _ in range(3))
NOW = datetime(2026, 12, 6, tzinfo=UTC)


def _facts(memory: uuid.UUID, *, cosine: float, lexemes: set[str], age_days: int, title: str = ""):
    chunk = ChunkHit(
        chunk_id=uuid.uuid5(memory, "chunk"),
        memory_id=memory,
        content="x" * 100,
        title=title or None,
        source=None,
        memory_type="semantic",
        created_at=NOW - timedelta(days=age_days),
    )
    return CandidateFacts(chunk, cosine, frozenset(lexemes))


def _input() -> RankingInput:
    facts = {
        A: _facts(A, cosine=0.9, lexemes={"leit", "projekt"}, age_days=3),
        B: _facts(B, cosine=0.8, lexemes={"projekt"}, age_days=1, title="Jan Becker"),
        C: _facts(C, cosine=0.7, lexemes=set(), age_days=2),
    }
    jan = uuid.uuid4()
    return RankingInput(
        memories=[A, B, C],
        chunks={m: f.chunk.chunk_id for m, f in facts.items()},
        rankings={"vector": [(A, 0.9), (B, 0.8)], "graph": [(C, 0.5), (A, 0.25)]},
        rrf={A: 0.03, B: 0.016, C: 0.016},
        facts={f.chunk.chunk_id: f for f in facts.values()},
        signals={"vector": {"top1": 0.9, "margin": 0.1}},
        evidence={"relations": {C: {"path_hops": 2.0, "path_match": 1.0, "path_final": 1.0}}},
        query_lexemes={"leit": 3.0, "projekt": 1.0},
        query_entities={jan: "Jan Becker"},
        memory_entities={A: {jan: "jan becker"}, B: {jan: "jan becker"}, C: {jan: "jan becker"}},
        question_language="german",
        question_words=frozenset(["wer", "leitet", "das", "projekt", "von", "jan", "becker"]),
    )


def test_features_say_what_each_stage_found_and_nan_where_it_did_not():
    rows = feature_matrix(_input())
    column = {name: rows[:, i] for i, name in enumerate(FEATURE_NAMES)}
    assert rows.shape == (3, len(FEATURE_NAMES))
    assert column["vector_rank"][:2].tolist() == [1.0, 2.0] and math.isnan(column["vector_rank"][2])
    assert column["graph_score"].tolist()[0] == 0.5 and column["graph_rank"][2] == 1.0
    assert column["coverage"].tolist() == [1.0, 0.25, 0.0]  # idf-weighted share of lexemes
    assert column["coverage_plain"].tolist() == [1.0, 0.5, 0.0]
    assert column["cosine_gap"].tolist() == pytest.approx([0.0, -0.1, -0.2])
    assert column["entity_overlap"].tolist() == [1.0, 1.0, 1.0]
    assert column["titled_entity"].tolist() == [0.0, 1.0, 0.0]
    assert column["title_overlap"][1] == 1.0 and math.isnan(column["title_overlap"][0])
    # all three mention Jan Becker (a link counts a third); A and B are the vector stage's
    # first hits, each linked to the other, C to both
    assert column["hit_links"].tolist() == pytest.approx([1 / 3, 1 / 3, 2 / 3])
    # B is about Jan Becker (its title), whom the first hit A mentions
    assert column["bridge"].tolist() == [0.0, 1.0, 0.0]
    assert column["recency"].tolist() == [1.0, 0.0, 0.5]
    assert column["path_final"][2] == 1.0 and math.isnan(column["path_final"][0])
    assert column["q_vector_top1"].tolist() == [0.9] * 3
    assert math.isnan(column["language_same"][0])  # the memories' languages are unknown here
    assert column["states_time"].tolist() == [0.0, 0.0, 0.0]  # "xxx…" names no time


def test_the_short_list_keeps_every_stages_first_finds_however_low_fusion_put_them():
    graph_find = uuid.uuid4()
    crowd = [uuid.uuid4() for _ in range(60)]
    rankings = {
        "bm25": [(m, 1.0) for m in crowd],
        "vector": [(m, 1.0) for m in crowd],
        "graph": [(graph_find, 1.0)],
    }
    fused = reciprocal_rank_fusion({s: [m for m, _ in r] for s, r in rankings.items()})
    assert [f.key for f in fused].index(graph_find) > 50
    head = shortlist(fused, rankings, size=50, per_stage=10)
    assert graph_find in {f.key for f in head}
    assert len(head) == 51


def _made_up(n_questions: int = 60, seed: int = 1) -> Questions:
    """Questions of 10 candidates; the relevant one has the best cosine half of the time and a
    relation path always (a model must learn to read both)."""
    rng = np.random.default_rng(seed)
    x, label, group, rows = [], [], [], []
    cos, path = FEATURE_NAMES.index("cosine"), FEATURE_NAMES.index("path_final")
    for q in range(n_questions):
        for i in range(10):
            row = np.full(len(FEATURE_NAMES), np.nan)
            row[cos] = rng.uniform(0.6, 0.8)
            relevant = i == q % 10
            if relevant:
                row[path] = 1.0
                row[cos] += 0.2 * (q % 2)
            x.append(row)
            label.append(int(relevant))
        group.append(10)
        rows.append({"dataset": "made-up", "id": str(q), "kind": "", "split": "dev"})
    n = len(label)
    return Questions(np.array(x), np.array(label), np.zeros(n), np.ones(n), group, rows)


def test_a_trained_model_ranks_by_the_evidence_and_its_scores_are_calibrated():
    data = _made_up()
    model = train(data, rounds=30, params={
        "objective": "lambdarank", "min_data_in_leaf": 5, "num_threads": 1,
        "deterministic": True, "verbosity": -1, "seed": 1,
    })  # fmt: skip
    raw = model.predict(data.x)
    meta = {
        "features": list(FEATURE_NAMES),
        "calibration": calibration(raw, (data.label > 0).astype(float)),
    }
    ranker = LearnedRanker(model.model_to_string(), meta)
    held_out = _made_up(20, seed=2)
    ranked = ranker.rank(held_out.x, np.zeros(len(held_out.label)))
    tops = [int(np.argmax(ranked.raw[q * 10 : q * 10 + 10])) for q in range(20)]
    assert tops == [q % 10 for q in range(20)]
    assert np.all((ranked.probability >= 0) & (ranked.probability <= 1))
    relevant = held_out.label > 0
    assert ranked.probability[relevant].min() > ranked.probability[~relevant].max()


def test_calibration_is_monotone_and_matches_the_relevant_share():
    rng = np.random.default_rng(3)
    raw = rng.normal(size=4000)
    relevant = (rng.uniform(size=4000) < 1 / (1 + np.exp(-2 * raw))).astype(float)
    calib = calibration(raw, relevant)
    assert all(b >= a for a, b in zip(calib["y"], calib["y"][1:], strict=False))
    high = np.interp(raw, calib["x"], calib["y"]) >= 0.5
    assert relevant[high].mean() >= 0.5


def test_a_model_trained_on_other_features_is_refused_with_the_command_that_mends_it():
    with pytest.raises(RankerUnavailableError, match="make train-ranker"):
        LearnedRanker("", {"features": ["cosine"], "calibration": {"x": [0], "y": [0]}})
    with pytest.raises(RankerUnavailableError, match="unknown ranker"):
        build_ranker("magic")


def test_the_fused_order_ranker_keeps_the_fused_scores():
    fused = np.array([1.0, 0.5])
    ranked = build_ranker("rrf").rank(np.zeros((2, len(FEATURE_NAMES))), fused)
    assert ranked.raw.tolist() == [1.0, 0.5] and ranked.probability.tolist() == [1.0, 0.5]

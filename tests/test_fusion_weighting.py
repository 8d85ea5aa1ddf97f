"""Per-query stage weights and the fusion methods (pure functions, hand-computed values)."""

from __future__ import annotations

import math

import pytest

from knowmind.recall.fusion import convex_fusion, reciprocal_rank_fusion
from knowmind.recall.weighting import (
    MAX_ODDS,
    Calibration,
    StageModel,
    default_calibration,
    list_signals,
    stage_weights,
)
from knowmind.settings import Settings, SettingsError

MODELS = {
    "vector": StageModel(-10.0, {"margin": 200.0}, {"margin": 0.05}),
    "bm25": StageModel(-2.0, {"matched_share": 4.0}, {"matched_share": 0.5}),
}
CALIBRATION = Calibration(MODELS, sharpness=1.0, depth_floor=5)


def test_probability_is_the_logistic_of_the_weighted_signals():
    p, parts = MODELS["bm25"].probability({"matched_share": 1.0})
    assert p == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert parts == {"matched_share": 4.0}
    # a signal the stage did not report takes the model's default
    p_default, _ = MODELS["bm25"].probability({})
    assert p_default == pytest.approx(0.5)


def test_weight_is_the_odds_and_a_weak_stage_contributes_fewer_candidates():
    signals = {"vector": {"margin": 0.07}, "bm25": {"matched_share": 0.1}}
    chosen = stage_weights(signals, {"vector": 50, "bm25": 50}, CALIBRATION)
    p_vector = 1 / (1 + math.exp(-(-10 + 200 * 0.07)))
    assert chosen["vector"].weight == pytest.approx(min(MAX_ODDS, p_vector / (1 - p_vector)))
    assert chosen["vector"].depth == 50
    p_bm25 = 1 / (1 + math.exp(-(-2 + 0.4)))
    assert chosen["bm25"].weight == pytest.approx(p_bm25 / (1 - p_bm25))
    assert chosen["bm25"].depth == math.ceil(50 * 2 * p_bm25)
    assert "weak" in chosen["bm25"].rule and "matched_share" in chosen["bm25"].rule
    explained = chosen["bm25"].explain()
    assert explained["signals"]["matched_share"] == 0.1 and explained["depth"] < 50


def test_sharpness_spreads_the_weights_and_the_floor_bounds_the_cut():
    signals = {"bm25": {"matched_share": 0.0}}
    soft = stage_weights(signals, {"bm25": 50}, Calibration(MODELS, 0.5, 5))["bm25"]
    sharp = stage_weights(signals, {"bm25": 50}, Calibration(MODELS, 2.0, 20))["bm25"]
    odds = math.exp(-2.0)
    assert soft.weight == pytest.approx(odds**0.5) and sharp.weight == pytest.approx(odds**2)
    assert sharp.depth == 20  # 50 · 2 · p ≈ 12 is below the floor


def test_fixed_weights_empty_stages_and_uncalibrated_stages():
    chosen = stage_weights(
        {"vector": {"margin": 0.1}},
        {"vector": 10, "bm25": 0, "graph": 7},
        CALIBRATION,
        fixed={"vector": 0.3},
    )
    assert (chosen["vector"].weight, chosen["vector"].rule) == (0.3, "weight asked for")
    assert (chosen["bm25"].weight, chosen["bm25"].depth) == (0.0, 0)
    assert (chosen["graph"].weight, chosen["graph"].depth) == (1.0, 7)


def test_calibration_round_trips_through_json():
    again = Calibration.from_json(CALIBRATION.to_json())
    assert again.models["vector"].coefficients == {"margin": 200.0}
    assert (again.sharpness, again.depth_floor) == (1.0, 5)


def test_the_shipped_calibration_covers_the_text_stages():
    shipped = default_calibration()
    assert {"bm25", "vector"} <= set(shipped.models)
    assert shipped.sharpness > 0 and shipped.depth_floor >= 1


def test_list_signals():
    assert list_signals([]) == {"hits": 0.0}
    assert list_signals([4.0, 3.0]) == {"hits": 2.0, "top_score": 4.0, "score_gap": 0.25}


def test_a_dominant_weight_keeps_that_stage_order():
    rankings = {"vector": ["a", "b", "c"], "bm25": ["c", "b", "x"]}
    plain = [f.key for f in reciprocal_rank_fusion(rankings)]
    assert plain[0] in {"b", "c"}  # both lists agree on b and c
    dominant = reciprocal_rank_fusion(rankings, weights={"vector": 50.0, "bm25": 0.02})
    assert [f.key for f in dominant][:3] == ["a", "b", "c"]


def test_convex_fusion_by_hand():
    fused = convex_fusion(
        {"vector": [("a", 0.9), ("b", 0.8), ("c", 0.5)], "bm25": [("c", 10.0), ("a", 2.0)]},
        weights={"vector": 3.0, "bm25": 1.0},
    )
    scores = {f.key: f.score for f in fused}
    # vector normalised: a 1, b 0.75, c 0; bm25: c 1, a 0; α = 0.75 / 0.25
    assert scores == pytest.approx({"a": 0.75, "b": 0.5625, "c": 0.25})
    assert [f.key for f in fused] == ["a", "b", "c"]
    assert fused[0].ranks == {"vector": 1, "bm25": 2}
    single = convex_fusion({"vector": [("a", 0.3)]})
    assert single[0].score == pytest.approx(1.0)


def test_fusion_setting_is_validated_at_start_up():
    convex = Settings.from_env({"KNOWMIND_RECALL_FUSION": "convex"})
    assert convex.recall.recall_fusion == "convex"
    assert Settings.from_env({}).recall.recall_fusion == "weighted-rrf"
    with pytest.raises(SettingsError, match="RECALL_FUSION"):
        Settings.from_env({"KNOWMIND_RECALL_FUSION": "borda"})


def test_a_follower_weighs_relative_to_the_strongest_independent_stage():
    models = {**MODELS, "graph": StageModel(0.0, {}, {})}  # p = 0.5
    calibration = Calibration(models, 1.0, 5, followers=("graph",), follow_exponent=2.0)
    chosen = stage_weights(
        {"vector": {"margin": 0.07}, "bm25": {"matched_share": 1.0}},
        {"vector": 50, "bm25": 50, "graph": 50},
        calibration,
    )
    lead = max(chosen["vector"], chosen["bm25"], key=lambda w: w.weight)
    expected = min(1.0, 0.5 / lead.probability) ** 2 * lead.weight
    assert chosen["graph"].weight == pytest.approx(expected)
    assert chosen["graph"].rule.startswith(f"follows {lead.stage}")

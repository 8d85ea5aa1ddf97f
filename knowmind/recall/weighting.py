"""Per-query stage weights for fusion, from the evidence each stage reports about this query.

A stage's weight is the odds of ``p``, the stage's expected ranking quality on this query
(nDCG@10, or recall@5 for multi-hop questions, a share in [0, 1]) given its own signals:
``p = logistic(bias + Σ coef·signal)`` with one small model per stage, fitted on the dev split
of the benchmark (``benchmark/calibrate.py`` writes ``fusion_calibration.json``). Odds, not
probabilities: reciprocal ranks with k = 60 are flat, so a vote only stops counting when its
weight is an order of magnitude below the other's — a stage that knows it is lost (an
off-language question, no query term found, no entity named) then leaves the ranking to the
confident one, and two confident stages vote alike. Odds are capped, and an exponent
(``sharpness``, fitted too) sets how far apart they may pull.

A stage whose candidates are weak also contributes fewer of them (``depth``): below an even
chance its list is cut in proportion, so its tail cannot lift strangers into the top.

Everything here is pure: signals in, weights and the reason for each out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "Calibration",
    "StageModel",
    "StageWeight",
    "default_calibration",
    "list_signals",
    "stage_weights",
]

_CALIBRATION_FILE = Path(__file__).with_name("fusion_calibration.json")
MIN_ODDS, MAX_ODDS = 0.02, 50.0
DEFAULT_MIRRORS = {"statements": "vector"}


@dataclass(frozen=True, slots=True)
class StageModel:
    """Logistic model of the stage's ranking quality over the stage's signals. A signal the
    stage did not report takes its ``defaults`` value (the dev-split mean)."""

    bias: float
    coefficients: Mapping[str, float] = field(default_factory=dict)
    defaults: Mapping[str, float] = field(default_factory=dict)

    def probability(self, signals: Mapping[str, float]) -> tuple[float, dict[str, float]]:
        """(p, each signal's contribution to the log-odds)."""
        contributions = {
            name: coef * float(signals.get(name, self.defaults.get(name, 0.0)))
            for name, coef in self.coefficients.items()
        }
        logit = self.bias + sum(contributions.values())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, logit)))), contributions


@dataclass(frozen=True, slots=True)
class Calibration:
    models: Mapping[str, StageModel]
    sharpness: float = 1.0  # exponent on the odds
    depth_floor: int = 5  # least candidates a weak stage still contributes
    source: str = "built-in"
    # Stages whose lists grow out of the others' hits (graph: seeded by the text stages' hits)
    # weigh relative to the strongest independent stage: (p / p_lead) × its weight. Their
    # value is what they add to that evidence, not how well they would rank alone.
    followers: tuple[str, ...] = ()
    follow_exponent: float = 1.0  # (p / p_lead) ** this
    # Stages without a model of their own that weigh as another stage does: "statements" is
    # the vector search over the statements a question asks about (no dataset to fit it on).
    mirrors: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_MIRRORS))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "json") -> Calibration:
        models = {
            stage: StageModel(
                float(m["bias"]),
                {k: float(v) for k, v in m.get("coefficients", {}).items()},
                {k: float(v) for k, v in m.get("defaults", {}).items()},
            )
            for stage, m in data.get("models", {}).items()
        }
        return cls(
            models,
            float(data.get("sharpness", 1.0)),
            int(data.get("depth_floor", 5)),
            str(data.get("source", source)),
            tuple(data.get("followers", ())),
            float(data.get("follow_exponent", 1.0)),
            dict(data.get("mirrors", DEFAULT_MIRRORS)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sharpness": self.sharpness,
            "depth_floor": self.depth_floor,
            "followers": list(self.followers),
            "follow_exponent": self.follow_exponent,
            "mirrors": dict(self.mirrors),
            "models": {
                stage: {
                    "bias": m.bias,
                    "coefficients": dict(m.coefficients),
                    "defaults": dict(m.defaults),
                }
                for stage, m in self.models.items()
            },
        }


@cache
def default_calibration() -> Calibration:
    """The calibration shipped with the package (fitted on the benchmark's dev split)."""
    if not _CALIBRATION_FILE.exists():
        return Calibration({}, source="none: every stage weighs 1")
    return Calibration.from_json(json.loads(_CALIBRATION_FILE.read_text()), "package")


@dataclass(frozen=True, slots=True)
class StageWeight:
    stage: str
    weight: float
    depth: int
    probability: float | None
    rule: str
    signals: dict[str, float]

    def explain(self) -> dict[str, Any]:
        return {
            "weight": round(self.weight, 4),
            "depth": self.depth,
            "p_quality": None if self.probability is None else round(self.probability, 3),
            "rule": self.rule,
            "signals": {k: round(v, 4) for k, v in self.signals.items()},
        }


def list_signals(scores: Sequence[float]) -> dict[str, float]:
    """Signals every ranked list has: its length, top score and the relative gap to the next."""
    if not scores:
        return {"hits": 0.0}
    top = scores[0]
    second = scores[1] if len(scores) > 1 else 0.0
    gap = (top - second) / abs(top) if top else 0.0
    return {"hits": float(len(scores)), "top_score": float(top), "score_gap": float(gap)}


def stage_weights(
    signals: Mapping[str, Mapping[str, float]],
    depths: Mapping[str, int],
    calibration: Calibration | None = None,
    fixed: Mapping[str, float] | None = None,
) -> dict[str, StageWeight]:
    """The weight and candidate depth of every stage in ``depths`` (its list length).

    ``fixed`` weights (asked for in the request) replace the calibrated ones for their stages.
    """
    calibration = calibration or default_calibration()
    fixed = fixed or {}
    chosen: dict[str, StageWeight] = {}
    for stage, depth in depths.items():
        own = dict(signals.get(stage, {}))
        model = calibration.models.get(stage)
        if stage in fixed:
            chosen[stage] = StageWeight(stage, fixed[stage], depth, None, "weight asked for", own)
        elif depth == 0:
            chosen[stage] = StageWeight(stage, 0.0, 0, None, "no candidates", own)
        elif model is None:
            chosen[stage] = StageWeight(stage, 1.0, depth, None, "no calibration: weight 1", own)
        else:
            chosen[stage] = _calibrated(stage, own, depth, model, calibration)
    chosen = _follow_the_lead(chosen, calibration.followers, calibration.follow_exponent)
    return _mirror(chosen, calibration.mirrors, fixed)


def _mirror(
    chosen: dict[str, StageWeight], mirrors: Mapping[str, str], fixed: Mapping[str, float]
) -> dict[str, StageWeight]:
    """A mirroring stage with candidates (and no weight asked for) takes its model's weight."""
    for name, model in mirrors.items():
        w, lead = chosen.get(name), chosen.get(model)
        if w is None or lead is None or w.depth == 0 or name in fixed:
            continue
        if lead.depth == 0:  # nothing to weigh as: keep its own weight and say so
            rule = f"{model} found nothing: own weight {w.weight:.4g}"
            chosen[name] = StageWeight(name, w.weight, w.depth, None, rule, w.signals)
            continue
        rule = f"weighs as {model}: {lead.weight:.4g}"
        chosen[name] = StageWeight(name, lead.weight, w.depth, lead.probability, rule, w.signals)
    return chosen


def _follow_the_lead(
    chosen: dict[str, StageWeight], followers: tuple[str, ...], exponent: float
) -> dict[str, StageWeight]:
    leads = [w for w in chosen.values() if w.stage not in followers and w.probability is not None]
    if not leads:
        return chosen
    lead = max(leads, key=lambda w: w.weight)
    for name in followers:
        w = chosen.get(name)
        if w is None or w.probability is None or lead.probability is None:
            continue
        ratio = min(1.0, w.probability / lead.probability) ** exponent
        chosen[name] = StageWeight(
            name,
            ratio * lead.weight,
            w.depth,
            w.probability,
            f"follows {lead.stage}: {ratio:.2f} × its weight (p={w.probability:.2f})",
            w.signals,
        )
    return chosen


def _calibrated(
    stage: str, own: dict[str, float], depth: int, model: StageModel, calibration: Calibration
) -> StageWeight:
    p, contributions = model.probability(own)
    odds = min(MAX_ODDS, max(MIN_ODDS, p / (1.0 - p) if p < 1.0 else MAX_ODDS))
    weight = odds**calibration.sharpness
    cut = depth if p >= 0.5 else max(calibration.depth_floor, math.ceil(depth * 2 * p))
    leading = sorted(contributions.items(), key=lambda kv: -abs(kv[1]))[:2]
    because = ", ".join(f"{name} {value:+.2f}" for name, value in leading) or "bias only"
    rule = f"odds^{calibration.sharpness:g} of p={p:.2f} ({because})"
    if cut < depth:
        rule += f"; weak: top {cut} of {depth} candidates"
    used = {name: float(own.get(name, model.defaults.get(name, 0.0))) for name in contributions}
    return StageWeight(stage, weight, min(cut, depth), p, rule, {**own, **used})

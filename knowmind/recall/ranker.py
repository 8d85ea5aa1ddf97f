"""Rankers of the fused short list, by name.

- ``learned`` (default): a LightGBM LambdaRank model over the candidates' features
  (``recall.features``), trained by ``make train-ranker`` on the dev splits of the benchmark's
  public datasets; its raw score orders the list, and an isotonic map fitted on held-out dev
  predictions turns it into the probability that the memory answers the question (the
  ``score`` every door shows).
- ``rrf``: the fused order as it is (Reciprocal Rank Fusion), scores as a share of the best
  possible fused score — the baseline.

The model (``ranker_model.txt``) and its calibration (``ranker.json``) ship in the package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from knowmind.recall.features import FEATURE_NAMES

__all__ = [
    "RANKER_NAMES",
    "LearnedRanker",
    "Ranker",
    "RankerUnavailableError",
    "Ranking",
    "build_ranker",
]

MODEL_DIR = Path(__file__).with_name("ranker")
MODEL_FILE = MODEL_DIR / "ranker_model.txt"
META_FILE = MODEL_DIR / "ranker.json"
RANKER_NAMES = ("learned", "rrf")


class RankerUnavailableError(RuntimeError):
    """The named ranker cannot run here (e.g. no trained model in the package)."""


@dataclass(frozen=True, slots=True)
class Ranking:
    """Scores of the short list, in its order: ``raw`` orders it, ``probability`` is shown."""

    raw: np.ndarray
    probability: np.ndarray


class Ranker(Protocol):
    name: str

    @property
    def description(self) -> str: ...

    def rank(self, features: np.ndarray, fused: np.ndarray) -> Ranking:
        """``features``: one row per candidate (``FEATURE_NAMES``); ``fused``: their fused
        scores as shares of the best possible (0–1)."""
        ...


class FusedOrder:
    """The fused order as it is; the score is the fused share."""

    name = "rrf"
    description = "Reciprocal Rank Fusion (k = 60) order, score: share of the best fused score"

    def rank(self, features: np.ndarray, fused: np.ndarray) -> Ranking:
        return Ranking(fused.copy(), fused.copy())


class LearnedRanker:
    """A LightGBM model's score, calibrated to a probability by an isotonic map."""

    name = "learned"

    def __init__(self, model_text: str, meta: dict[str, Any]) -> None:
        import lightgbm

        names = tuple(meta["features"])
        if names != FEATURE_NAMES:
            missing = sorted(set(FEATURE_NAMES) ^ set(names))
            raise RankerUnavailableError(
                f"the ranker model was trained on other features (differing: {missing}): "
                "run `make train-ranker`"
            )
        self._booster = lightgbm.Booster(model_str=model_text)
        self._x = np.asarray(meta["calibration"]["x"], dtype=np.float64)
        self._y = np.asarray(meta["calibration"]["y"], dtype=np.float64)
        self.meta = meta

    @property
    def description(self) -> str:
        trained = self.meta.get("trained_on", {})
        return (
            f"LightGBM LambdaRank, {self.meta.get('trees', '?')} trees over "
            f"{len(FEATURE_NAMES)} features, trained on the dev splits of "
            f"{', '.join(sorted(trained)) or 'the benchmark datasets'}; "
            "score: isotonic-calibrated probability of relevance"
        )

    def rank(self, features: np.ndarray, fused: np.ndarray) -> Ranking:
        if len(features) == 0:
            return Ranking(np.zeros(0), np.zeros(0))
        raw = np.asarray(self._booster.predict(features, num_threads=1), dtype=np.float64)
        return Ranking(raw, self.calibrate(raw))

    def calibrate(self, raw: np.ndarray) -> np.ndarray:
        calibrated: np.ndarray = np.clip(np.interp(raw, self._x, self._y), 0.0, 1.0)
        return calibrated


@cache
def _packaged() -> LearnedRanker:
    if not MODEL_FILE.exists() or not META_FILE.exists():
        raise RankerUnavailableError(
            f"no trained ranker in the package ({MODEL_FILE.name}): run `make train-ranker`"
        )
    return LearnedRanker(MODEL_FILE.read_text(), json.loads(META_FILE.read_text()))


def build_ranker(name: str) -> Ranker:
    """The ranker ``name``; raises ``RankerUnavailableError`` saying why it cannot run."""
    if name == "rrf":
        return FusedOrder()
    if name == "learned":
        return _packaged()
    raise RankerUnavailableError(f"unknown ranker {name!r}; known: {', '.join(RANKER_NAMES)}")

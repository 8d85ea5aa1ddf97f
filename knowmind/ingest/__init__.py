"""Ingest: chunk → embed (→ extract, in a later stage)."""

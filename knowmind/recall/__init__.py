"""Recall: independent stages (one module each), fusion, and the orchestrating pipeline."""

"""Answers over recall: methods, enhancers, citations (the service wires them)."""

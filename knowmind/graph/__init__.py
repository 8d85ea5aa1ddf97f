"""The knowledge graph: ontology, the PostgreSQL graph (system of record), the Neo4j mirror."""

"""knowmind: a multi-tenant memory server for AI agents on PostgreSQL + pgvector."""

__version__ = "0.1.0"

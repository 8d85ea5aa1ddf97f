"""Facts that update themselves: a single-valued predicate (``"single_valued": true`` in the
catalogue) holds at most one current object per subject, so a new object closes the old edge
(``valid_to`` set; the row stays for ``as_of`` reads).

- edges: one *current* edge per (subject, predicate, object) instead of one edge ever, so a fact
  that comes back (Berlin, Hamburg, Berlin again) is a new row beside the closed one; the full
  (not unique) index keeps serving look-ups of all rows; an index on the stating memory
  (``properties.source_memory_id``) answers "does this memory still state a current fact?".
- ontology_predicates: a tenant's own predicate may be single-valued.
- the graph mirror's outbox: an edge closed (``valid_to`` set) leaves the mirror, which holds the
  current graph only.
- audit_log: entries are found by target (a memory's history).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-09
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_OUTBOX = """
CREATE OR REPLACE FUNCTION knowmind_outbox() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
  row_data record;
  change text;
  body jsonb;
BEGIN
  IF coalesce(current_setting('knowmind.graph_mirror', true), 'on') = 'off' THEN
    RETURN NULL;
  END IF;
  row_data := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  IF TG_TABLE_NAME = 'entities' THEN
    change := CASE WHEN TG_OP = 'DELETE' THEN 'delete_node' ELSE 'upsert_node' END;
    body := jsonb_build_object('id', row_data.id, 'kind', 'entity',
      'name', left(row_data.name, 100), 'entity_class', row_data.entity_class);
  ELSIF TG_TABLE_NAME = 'memories' THEN
    change := CASE WHEN TG_OP = 'DELETE' THEN 'delete_node' ELSE 'upsert_node' END;
    body := jsonb_build_object('id', row_data.id, 'kind', 'memory',
      'name', left(coalesce(row_data.title, row_data.content), 100),
      'entity_class', NULL);
  ELSIF TG_TABLE_NAME = 'edges' THEN
    change := CASE WHEN __EDGE_GONE__ THEN 'delete_edge' ELSE 'upsert_edge' END;
    body := jsonb_build_object('id', row_data.id, 'from_id', row_data.from_id,
      'to_id', row_data.to_id, 'predicate', row_data.predicate,
      'confidence', row_data.confidence, 'derived', row_data.derived);
  ELSE  -- mentions: a MENTIONS relationship from the memory to the entity
    change := CASE WHEN TG_OP = 'DELETE' THEN 'delete_edge' ELSE 'upsert_edge' END;
    body := jsonb_build_object('id', row_data.id, 'from_id', row_data.memory_id,
      'to_id', row_data.entity_id, 'predicate', 'MENTIONS',
      'confidence', row_data.confidence, 'derived', false);
  END IF;
  INSERT INTO graph_outbox (tenant_id, op, payload)
    VALUES (row_data.tenant_id, change, body);
  RETURN NULL;
END $$
"""


def upgrade() -> None:
    op.execute("ALTER TABLE edges DROP CONSTRAINT edges_tenant_id_from_id_predicate_to_id_key")
    op.execute(
        "CREATE UNIQUE INDEX edges_current ON edges (tenant_id, from_id, predicate, to_id) "
        "WHERE valid_to IS NULL"
    )
    op.execute("CREATE INDEX edges_from ON edges (tenant_id, from_id, predicate, to_id)")
    op.execute(
        "CREATE INDEX edges_source_memory ON edges (tenant_id, (properties->>'source_memory_id'))"
    )
    op.execute(
        "ALTER TABLE ontology_predicates ADD COLUMN single_valued boolean NOT NULL DEFAULT false"
    )
    op.execute(
        _OUTBOX.replace("__EDGE_GONE__", "TG_OP = 'DELETE' OR row_data.valid_to IS NOT NULL")
    )
    op.execute("CREATE INDEX audit_log_targets ON audit_log USING gin (targets)")


def downgrade() -> None:
    op.execute("DROP INDEX audit_log_targets")
    op.execute(_OUTBOX.replace("__EDGE_GONE__", "TG_OP = 'DELETE'"))
    op.execute("ALTER TABLE ontology_predicates DROP COLUMN single_valued")
    op.execute("DROP INDEX edges_source_memory")
    # one row per (subject, predicate, object) again: the closed rows of a fact that holds
    # again (or held twice) go
    op.execute(
        "DELETE FROM edges e WHERE e.valid_to IS NOT NULL AND EXISTS (SELECT 1 FROM edges o "
        "WHERE o.tenant_id = e.tenant_id AND o.from_id = e.from_id "
        "AND o.predicate = e.predicate AND o.to_id = e.to_id AND o.id <> e.id "
        "AND (o.valid_to IS NULL OR o.valid_to > e.valid_to "
        "OR (o.valid_to = e.valid_to AND o.id > e.id)))"
    )
    op.execute("DROP INDEX edges_from")
    op.execute("DROP INDEX edges_current")
    op.execute(
        "ALTER TABLE edges ADD CONSTRAINT edges_tenant_id_from_id_predicate_to_id_key "
        "UNIQUE (tenant_id, from_id, predicate, to_id)"
    )

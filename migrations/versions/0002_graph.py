"""Knowledge graph: entities, edges, mentions, ontology extensions, jobs, the graph outbox.

Nodes are memories or entities; edges may join any two nodes, so edges carry no foreign key to
their endpoints and the services remove a node's edges with it. Changes to entities, edges,
mentions and memory titles are written to graph_outbox by triggers in the same transaction,
unless the session says no mirror is configured (``knowmind.graph_mirror`` = 'off').

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TENANT_TABLES = (
    "entities",
    "entity_names",
    "edges",
    "mentions",
    "ontology_classes",
    "ontology_predicates",
    "jobs",
)


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute(
        """
        CREATE TABLE entities (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          name text NOT NULL CHECK (length(name) BETWEEN 1 AND 300),
          norm_name text NOT NULL,
          entity_class text NOT NULL,
          description text,
          aliases text[] NOT NULL DEFAULT '{}',
          origin text NOT NULL DEFAULT 'api' CHECK (origin IN ('api', 'inline', 'ner', 'llm')),
          confidence real NOT NULL DEFAULT 1.0,
          created_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (tenant_id, id),
          UNIQUE (tenant_id, norm_name, entity_class)
        )
        """
    )
    # Every name and alias of an entity, normalised: the gazetteer looks text n-grams up here
    # (btree), fuzzy entity search uses the trigram index.
    op.execute(
        """
        CREATE TABLE entity_names (
          tenant_id uuid NOT NULL,
          entity_id uuid NOT NULL,
          norm_name text NOT NULL,
          is_alias boolean NOT NULL,
          PRIMARY KEY (tenant_id, entity_id, norm_name),
          FOREIGN KEY (tenant_id, entity_id) REFERENCES entities (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("CREATE INDEX entity_names_lookup ON entity_names (tenant_id, norm_name)")
    op.execute("CREATE INDEX entity_names_trgm ON entity_names USING gin (norm_name gin_trgm_ops)")
    op.execute(
        """
        CREATE TABLE edges (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          from_id uuid NOT NULL,
          from_kind text NOT NULL CHECK (from_kind IN ('memory', 'entity')),
          to_id uuid NOT NULL,
          to_kind text NOT NULL CHECK (to_kind IN ('memory', 'entity')),
          predicate text NOT NULL CHECK (predicate ~ '^[A-Z][A-Z0-9_]*$'),
          confidence real NOT NULL DEFAULT 1.0 CHECK (confidence BETWEEN 0 AND 1),
          properties jsonb NOT NULL DEFAULT '{}',
          derived boolean NOT NULL DEFAULT false,
          inverse_id uuid,
          created_at timestamptz NOT NULL DEFAULT now(),
          valid_from timestamptz NOT NULL DEFAULT now(),
          valid_to timestamptz,
          PRIMARY KEY (tenant_id, id),
          UNIQUE (tenant_id, from_id, predicate, to_id)
        )
        """
    )
    op.execute("CREATE INDEX edges_to ON edges (tenant_id, to_id)")
    op.execute("CREATE INDEX edges_predicate ON edges (tenant_id, predicate)")
    op.execute(
        """
        CREATE TABLE mentions (
          tenant_id uuid NOT NULL,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          memory_id uuid NOT NULL,
          chunk_id uuid,
          entity_id uuid NOT NULL,
          method text NOT NULL CHECK (method IN ('inline', 'gazetteer', 'ner', 'llm')),
          confidence real NOT NULL DEFAULT 1.0,
          start_offset integer,
          end_offset integer,
          created_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (tenant_id, id),
          UNIQUE (tenant_id, memory_id, entity_id, method),
          FOREIGN KEY (tenant_id, memory_id) REFERENCES memories (tenant_id, id) ON DELETE CASCADE,
          FOREIGN KEY (tenant_id, entity_id) REFERENCES entities (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("CREATE INDEX mentions_entity ON mentions (tenant_id, entity_id)")
    op.execute(
        """
        CREATE TABLE ontology_classes (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          name text NOT NULL CHECK (name ~ '^[A-Z][A-Za-z0-9]*$'),
          description text,
          PRIMARY KEY (tenant_id, name)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE ontology_predicates (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          name text NOT NULL CHECK (name ~ '^[A-Z][A-Z0-9_]*$'),
          subject_classes text[] NOT NULL,
          object_classes text[] NOT NULL,
          inverse text CHECK (inverse ~ '^[A-Z][A-Z0-9_]*$'),
          is_symmetric boolean NOT NULL DEFAULT false,
          description text,
          PRIMARY KEY (tenant_id, name)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE jobs (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          kind text NOT NULL,
          payload jsonb NOT NULL DEFAULT '{}',
          status text NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'running', 'done', 'failed')),
          attempts integer NOT NULL DEFAULT 0,
          max_attempts integer NOT NULL DEFAULT 5,
          run_after timestamptz NOT NULL DEFAULT now(),
          locked_until timestamptz,
          last_error text,
          result jsonb,
          created_at timestamptz NOT NULL DEFAULT now(),
          finished_at timestamptz,
          PRIMARY KEY (tenant_id, id)
        )
        """
    )
    op.execute("CREATE INDEX jobs_due ON jobs (run_after) WHERE status = 'pending'")
    op.execute(
        """
        CREATE TABLE graph_outbox (
          tenant_id uuid NOT NULL,
          id bigint GENERATED ALWAYS AS IDENTITY,
          op text NOT NULL
            CHECK (op IN ('upsert_node', 'delete_node', 'upsert_edge', 'delete_edge')),
          payload jsonb NOT NULL,
          created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
          PRIMARY KEY (tenant_id, id)
        )
        """
    )
    op.execute("CREATE INDEX graph_outbox_order ON graph_outbox (id)")

    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            "USING (tenant_id = knowmind_current_tenant()) "
            "WITH CHECK (tenant_id = knowmind_current_tenant())"
        )
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO knowmind_app")
    # The outbox is written only by the (definer) triggers and drained by the owner.
    op.execute("ALTER TABLE graph_outbox ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON graph_outbox "
        "USING (tenant_id = knowmind_current_tenant())"
    )
    _outbox_triggers()


def _outbox_triggers() -> None:
    op.execute(
        """
        CREATE FUNCTION knowmind_outbox() RETURNS trigger
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
            change := CASE WHEN TG_OP = 'DELETE' THEN 'delete_edge' ELSE 'upsert_edge' END;
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
    )
    for table in ("entities", "edges", "mentions"):
        op.execute(
            f"CREATE TRIGGER {table}_outbox AFTER INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION knowmind_outbox()"
        )
    op.execute(
        "CREATE TRIGGER memories_outbox AFTER INSERT OR DELETE OR UPDATE OF title ON memories "
        "FOR EACH ROW EXECUTE FUNCTION knowmind_outbox()"
    )


def downgrade() -> None:
    for table in ("entities", "edges", "mentions", "memories"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_outbox ON {table}")
    op.execute("DROP FUNCTION IF EXISTS knowmind_outbox()")
    for table in (
        "graph_outbox",
        "jobs",
        "ontology_predicates",
        "ontology_classes",
        "mentions",
        "edges",
        "entity_names",
        "entities",
    ):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")

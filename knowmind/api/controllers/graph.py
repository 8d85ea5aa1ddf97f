"""Entities, relations between nodes, the relation catalogue, and job status."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

import msgspec
from litestar import Controller, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from knowmind.api.graph_schemas import EntityIn, LinkIn
from knowmind.api.guards import TENANT_WRITE
from knowmind.api.outputs import response
from knowmind.contract.drafts import PredicateIn
from knowmind.contract.responses import (
    EntityHit,
    EntityOut,
    EntitySearchOut,
    LinkOut,
    NodeRef,
    RelationOut,
    RelationsOut,
    UnlinkOut,
)
from knowmind.services.auth import Principal
from knowmind.services.graph import EntityRow, GraphService

__all__ = ["EntityController", "RelationController", "SchemaController"]

Who = NamedDependency[Principal]
#: Drawing or removing an edge: 404 when an end of it is not the tenant's.
_EDGE_EDIT = {**TENANT_WRITE, "errors": (404,)}


def entity_out(row: EntityRow, created: bool | None = None) -> EntityOut:
    return msgspec.structs.replace(response(row, EntityOut), created=created)


class EntityController(Controller):
    path = "/v1/entities"
    tags = ["graph"]

    @post(
        "/",
        opt={**TENANT_WRITE, "also": {200: "an entity of this name and class existed"}},
    )
    async def upsert(
        self, data: JSONBody[EntityIn], graph: NamedDependency[GraphService], principal: Who
    ) -> Response[EntityOut]:
        """Create or find an entity.

        An entity of the same name (folded) and class is returned as it is (200); otherwise it is
        created (201)."""
        row, created = await graph.upsert_entity(
            principal, data.name, data.entity_class, data.description, list(data.aliases)
        )
        status = HTTP_201_CREATED if created else HTTP_200_OK
        return Response(entity_out(row, created), status_code=status)

    @get("/", opt={"scope": "read"})
    async def search(
        self,
        graph: NamedDependency[GraphService],
        principal: Who,
        q: Annotated[
            str,
            QueryParameter(
                min_length=1,
                max_length=300,
                description="a name or part of one (without a letter or digit it finds nothing)",
            ),
        ],
        limit: Annotated[int, QueryParameter(ge=1, le=100)] = 10,
        entity_class: Annotated[str | None, QueryParameter(max_length=60)] = None,
    ) -> EntitySearchOut:
        """Search entities by name.

        By name and alias, best match first; `entity_class` narrows to one class."""
        rows = await graph.search_entities(principal, q, limit, entity_class)
        return EntitySearchOut(
            results=[
                EntityHit(
                    id=r.id,
                    name=r.name,
                    entity_class=r.entity_class,
                    aliases=r.aliases,
                    score=round(r.score or 0.0, 4),
                )
                for r in rows
            ]
        )

    @get("/{entity_id:uuid}", opt={"scope": "read"})
    async def get_entity(
        self, entity_id: FromPath[UUID], graph: NamedDependency[GraphService], principal: Who
    ) -> EntityOut:
        """Read one entity.

        Its name, class, description, aliases, origin and confidence."""
        return entity_out(await graph.get_entity(principal, entity_id))


class RelationController(Controller):
    tags = ["graph"]

    @post("/v1/relations", opt=_EDGE_EDIT, status_code=HTTP_200_OK)
    async def link(
        self, data: JSONBody[LinkIn], graph: NamedDependency[GraphService], principal: Who
    ) -> LinkOut:
        """Draw a typed relation.

        An edge `from_id -rel_type-> to_id` between entities or memories; the predicate's inverse is
        drawn too. The predicate must be in the tenant's catalogue (GET /v1/schema)."""
        edge, twin = await graph.link(
            principal, data.from_id, data.to_id, data.rel_type, data.confidence
        )
        return LinkOut(edge_id=edge, inverse_edge_id=twin)

    @delete("/v1/relations", opt=_EDGE_EDIT, status_code=HTTP_200_OK)
    async def unlink(
        self, data: JSONBody[LinkIn], graph: NamedDependency[GraphService], principal: Who
    ) -> UnlinkOut:
        """Remove a relation.

        Removes the edge `from_id -rel_type-> to_id` and its inverse; `removed` counts them (0:
        there was none)."""
        removed = await graph.unlink(principal, data.from_id, data.to_id, data.rel_type)
        return UnlinkOut(removed=removed)

    @get("/v1/nodes/{node_id:uuid}/relations", opt={"scope": "read"})
    async def relations(
        self,
        node_id: FromPath[UUID],
        graph: NamedDependency[GraphService],
        principal: Who,
        closed: Annotated[
            bool,
            QueryParameter(
                description="also the relations that no longer hold (`valid_to` set: a "
                "single-valued fact replaced by a newer one)"
            ),
        ] = False,
    ) -> RelationsOut:
        """A node's relations.

        The node's relations that hold now (each edge with its valid time), and mentions."""
        rows = await graph.relations(principal, node_id, closed=closed)
        return RelationsOut(
            relations=[
                RelationOut(
                    predicate=r["predicate"],
                    direction=r["direction"],
                    confidence=round(float(r["confidence"]), 4),
                    derived=r["derived"],
                    node=NodeRef(
                        id=r["node_id"],
                        kind=r["kind"],
                        title_or_name=r["title_or_name"],
                        entity_class=r["entity_class"],
                    ),
                    edge_id=r["edge_id"],
                    valid_from=r["valid_from"],
                    valid_to=r["valid_to"],
                )
                for r in rows
            ]
        )


class SchemaController(Controller):
    path = "/v1/schema"
    tags = ["graph"]

    @get("/", opt={"scope": "read"})
    async def catalogue(
        self, graph: NamedDependency[GraphService], principal: Who
    ) -> dict[str, object]:
        """The tenant's relation catalogue.

        The entity classes and predicates (with their subject and object classes, inverse and
        whether they are single-valued) the graph accepts: built-in ones and the tenant's own."""
        return await graph.schema(principal)

    @post(
        "/predicates",
        opt={**TENANT_WRITE, "errors": (409,)},
        status_code=HTTP_201_CREATED,
    )
    async def extend(
        self, data: JSONBody[PredicateIn], graph: NamedDependency[GraphService], principal: Who
    ) -> dict[str, object]:
        """Add a predicate to the catalogue.

        A new predicate of the tenant with the classes it links (new classes too); 409 when the name
        exists. Answers the predicate as stored."""
        predicate = await graph.extend_schema(principal, data)
        return {
            "name": predicate.name,
            "subject_classes": sorted(predicate.subject_classes),
            "object_classes": sorted(predicate.object_classes),
            "inverse": predicate.inverse,
            "symmetric": predicate.symmetric,
            "single_valued": predicate.single_valued,
            "description": predicate.description,
        }

"""Request and response bodies of the graph API (entities, relations, schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec
from msgspec import Meta, Struct

from knowmind.api.strict_body import StrictBody
from knowmind.contract.limits import (
    NO_NUL,
    Aliases,
    ClassName,
    Confidence,
    Description,
    Name,
    PredicateName,
)
from knowmind.contract.records import EntityFields

__all__ = [
    "EntityHit",
    "EntityIn",
    "EntityOut",
    "EntitySearchOut",
    "LinkIn",
    "LinkOut",
    "NodeRef",
    "PredicateIn",
    "RelationOut",
    "RelationsOut",
    "UnlinkOut",
]


class EntityIn(StrictBody):
    name: Name
    entity_class: ClassName
    description: Description | None = None
    aliases: Aliases = msgspec.field(default_factory=list)


class EntityOut(EntityFields, frozen=True):
    created: bool | None = None


class EntityHit(Struct):
    id: UUID
    name: str
    entity_class: str
    aliases: list[str]
    score: float


class EntitySearchOut(Struct):
    results: list[EntityHit]


class LinkIn(StrictBody):
    from_id: UUID
    to_id: UUID
    rel_type: PredicateName
    confidence: Confidence = 1.0


class LinkOut(Struct):
    edge_id: UUID
    inverse_edge_id: UUID | None


class UnlinkOut(Struct):
    removed: int


class NodeRef(Struct):
    id: UUID
    kind: Literal["memory", "entity"]
    title_or_name: str | None
    entity_class: str | None = None


class RelationOut(Struct):
    predicate: str
    direction: Literal["out", "in"]
    confidence: float
    derived: bool
    node: NodeRef
    edge_id: UUID | None = None  # None: a mention
    valid_from: datetime | None = None
    valid_to: datetime | None = None  # set: the relation no longer holds (``?closed=true``)


class RelationsOut(Struct):
    relations: list[RelationOut]


class PredicateIn(StrictBody):
    name: PredicateName
    subject_classes: Annotated[list[ClassName], Meta(min_length=1, max_length=20)]
    object_classes: Annotated[list[ClassName], Meta(min_length=1, max_length=20)]
    inverse: PredicateName | None = None
    symmetric: bool = False
    description: Annotated[str, Meta(max_length=1000, pattern=NO_NUL)] | None = None
    new_classes: Annotated[list[ClassName], Meta(max_length=20)] = msgspec.field(
        default_factory=list
    )
    # at most one current object per subject: a new one closes the old edge
    single_valued: bool = False

"""Request and response bodies of the graph API (entities, relations, schema)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

import msgspec
from msgspec import Meta

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

__all__ = [
    "EntityIn",
    "LinkIn",
    "PredicateIn",
]


class EntityIn(StrictBody):
    name: Name
    entity_class: ClassName
    description: Description | None = None
    aliases: Aliases = msgspec.field(default_factory=list)


class LinkIn(StrictBody):
    from_id: UUID
    to_id: UUID
    rel_type: PredicateName
    confidence: Confidence = 1.0


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

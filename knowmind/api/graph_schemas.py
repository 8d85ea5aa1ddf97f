"""Request and response bodies of the graph API (entities, relations, schema)."""

from __future__ import annotations

from uuid import UUID

import msgspec

from knowmind.api.strict_body import StrictBody
from knowmind.contract.limits import (
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

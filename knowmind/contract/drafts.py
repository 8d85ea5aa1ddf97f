"""What a client writes that the services take as it came: checked once at the edge (REST
bodies, MCP arguments) and carried unchanged to the graph: one record each, shared by every door."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from knowmind.contract.limits import (
    NO_NUL,
    ClassName,
    Confidence,
    Description,
    Name,
    OptionalClassName,
    PredicateName,
)

__all__ = ["PredicateIn", "RelationIn"]


class RelationIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """memory (or ``subject``) -predicate-> object; the object entity is found or created."""

    predicate: PredicateName
    object: Name
    object_class: OptionalClassName | None = None
    object_description: Description | None = None
    confidence: Confidence = 1.0
    subject: Name | None = None
    subject_class: OptionalClassName | None = None


class PredicateIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A predicate a tenant adds to its relation catalogue."""

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

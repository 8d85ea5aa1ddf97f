"""The relation catalogue: entity classes, predicates with their classes, inverses and symmetry,
which are single-valued (one current object per subject), and the derived predicates the server
computes. The default catalogue is data (``ontology.json``); tenants extend it with rows of
their own."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from knowmind.errors import InvalidInputError

__all__ = ["MEMORY_CLASS", "DerivedRule", "Ontology", "Predicate", "name_labels"]

MEMORY_CLASS = "Memory"
_DEFAULT_FILE = Path(__file__).with_name("ontology.json")


@dataclass(frozen=True, slots=True)
class Predicate:
    name: str
    subject_classes: frozenset[str]
    object_classes: frozenset[str]
    inverse: str | None = None
    symmetric: bool = False
    description: str = ""
    derived: bool = False
    custom: bool = False
    # at most one current object per subject: a new object closes the old edge (``store.facts``)
    single_valued: bool = False
    # how the predicate reads from subject to object, by language ("de", "en")
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def twin(self) -> str | None:
        """The edge materialised with this one: its inverse, or itself when symmetric."""
        return self.name if self.symmetric else self.inverse


@dataclass(frozen=True, slots=True)
class DerivedRule:
    """``predicate`` holds from X to Z when one of ``paths`` (forward predicates) leads X → Z."""

    predicate: str
    paths: tuple[tuple[str, ...], ...]

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(p for path in self.paths for p in path)


@dataclass(frozen=True, slots=True)
class Ontology:
    classes: frozenset[str]
    predicates: Mapping[str, Predicate]
    rules: tuple[DerivedRule, ...] = ()
    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def default(cls) -> Ontology:
        return _load_default()

    def extended(
        self, classes: Iterable[tuple[str, str | None]], predicates: Iterable[Mapping[str, Any]]
    ) -> Ontology:
        """This catalogue plus a tenant's own classes and predicates (rows from the database)."""
        all_classes = self.classes | {name for name, _ in classes}
        merged = dict(self.predicates)
        for row in predicates:
            merged.update(_with_twin(row, self.groups, custom=True))
        return replace(self, classes=all_classes, predicates=merged)

    def predicate(self, name: str, field: str = "rel_type") -> Predicate:
        found = self.predicates.get(name)
        if found is None:
            allowed = ", ".join(sorted(p for p, d in self.predicates.items() if not d.derived))
            raise InvalidInputError(field, f"unknown predicate {name!r}; allowed: {allowed}")
        return found

    def settable(self, name: str, field: str = "rel_type") -> Predicate:
        found = self.predicate(name, field)
        if found.derived:
            raise InvalidInputError(field, f"{name} is derived by the server and cannot be set")
        return found

    def check_class(self, name: str, field: str = "entity_class") -> None:
        if name not in self.classes:
            allowed = ", ".join(sorted(self.classes))
            raise InvalidInputError(field, f"unknown entity class {name!r}; allowed: {allowed}")

    def check_link(
        self,
        predicate: Predicate,
        subject: str | None,
        object_: str | None,
        *,
        same_node: bool = False,
    ) -> None:
        """A link between two nodes (``same_node``: the same one) must fit the predicate."""
        self.check_classes(predicate, subject, object_)
        self.check_distinct(predicate, same_node)

    def check_classes(
        self,
        predicate: Predicate,
        subject: str | None,
        object_: str | None,
        fields: tuple[str, str] = ("from_id", "to_id"),
    ) -> None:
        """Classes must fit where known; ``None`` (unknown) or a memory subject is not checked.
        ``fields``: what the request calls the subject's and the object's class."""
        if subject not in (None, MEMORY_CLASS) and subject not in predicate.subject_classes:
            raise InvalidInputError(
                fields[0],
                f"{predicate.name} needs a subject of class "
                f"{' | '.join(sorted(predicate.subject_classes))}, got {subject}",
            )
        if object_ is not None and object_ not in predicate.object_classes:
            raise InvalidInputError(
                fields[1],
                f"{predicate.name} needs an object of class "
                f"{' | '.join(sorted(predicate.object_classes))}, got {object_}",
            )

    @staticmethod
    def check_distinct(predicate: Predicate, same_node: bool, field: str = "to_id") -> None:
        """No predicate of the catalogue relates a node to itself."""
        if same_node:
            raise InvalidInputError(field, f"{predicate.name} cannot relate a node to itself")

    def rules_using(self, predicates: Iterable[str]) -> tuple[DerivedRule, ...]:
        wanted = set(predicates)
        return tuple(rule for rule in self.rules if rule.inputs & wanted)

    def expand(self, names: Iterable[str]) -> frozenset[str]:
        return _expand(names, self.groups)

    def as_catalogue(self) -> dict[str, Any]:
        return {
            "classes": sorted(self.classes),
            "predicates": [
                {
                    "name": p.name,
                    "subject_classes": sorted(p.subject_classes),
                    "object_classes": sorted(p.object_classes),
                    "inverse": p.inverse,
                    "symmetric": p.symmetric,
                    "derived": p.derived,
                    "custom": p.custom,
                    "single_valued": p.single_valued,
                    "description": p.description,
                    "labels": dict(p.labels),
                }
                for p in sorted(self.predicates.values(), key=lambda p: p.name)
            ],
        }


def _expand(names: Iterable[str] | str, groups: Mapping[str, frozenset[str]]) -> frozenset[str]:
    names = [names] if isinstance(names, str) else list(names)
    return frozenset(c for n in names for c in groups.get(n, frozenset({n})))


def name_labels(name: str) -> dict[str, str]:
    """The labels of a predicate that has none of its own: its name read as words."""
    words = name.lower().replace("_", " ")
    return {"de": words, "en": words}


def _predicate(
    row: Mapping[str, Any], groups: Mapping[str, frozenset[str]], custom: bool = False
) -> Predicate:
    return Predicate(
        name=row["name"],
        subject_classes=_expand(row.get("subject") or row.get("subject_classes") or [], groups),
        object_classes=_expand(row.get("object") or row.get("object_classes") or [], groups),
        inverse=row.get("inverse"),
        symmetric=bool(row.get("symmetric")),
        description=row.get("description") or "",
        custom=custom,
        single_valued=bool(row.get("single_valued")),
        labels=row.get("labels") or name_labels(row["name"]),
    )


def _with_twin(
    row: Mapping[str, Any], groups: Mapping[str, frozenset[str]], custom: bool = False
) -> dict[str, Predicate]:
    """The predicate of a catalogue row and its inverse (labelled by ``inverse_labels``)."""
    predicate = _predicate(row, groups, custom)
    out = {predicate.name: predicate}
    if predicate.inverse and not predicate.symmetric:
        out[predicate.inverse] = Predicate(
            name=predicate.inverse,
            subject_classes=predicate.object_classes,
            object_classes=predicate.subject_classes,
            inverse=predicate.name,
            description=f"inverse of {predicate.name}",
            custom=predicate.custom,
            labels=row.get("inverse_labels") or name_labels(predicate.inverse),
        )
    return out


@cache
def _load_default() -> Ontology:
    data = json.loads(_DEFAULT_FILE.read_text())
    groups = {name: frozenset(members) for name, members in data["class_groups"].items()}
    predicates: dict[str, Predicate] = {}
    for row in data["predicates"]:
        predicates.update(_with_twin(row, groups))
    rules = []
    for row in data["derived"]:
        predicates[row["name"]] = replace(_predicate(row, groups), derived=True)
        rules.append(DerivedRule(row["name"], tuple(tuple(p) for p in row["paths"])))
    classes = frozenset(data["classes"]) | {data["memory_class"]}
    return Ontology(classes=classes, predicates=predicates, rules=tuple(rules), groups=groups)

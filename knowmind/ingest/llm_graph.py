"""The LLM graph extractor's prompt and the reading of its answer (Coyote's extraction): the
model is asked for the entities and typed relations of one chunk as JSON; what it writes is
mapped onto our ontology — a class we do not know becomes ``Topic``, a relation whose predicate
is not in the tenant's ontology is dropped (and counted), never invented.

The prompt is the tenant's (``PATCH /v1/settings``: ``extraction_prompt``), else the server's
(``KNOWMIND_EXTRACTION_PROMPT``), else ``DEFAULT_PROMPT``; the chunk's text replaces
``__CHUNK__``. No I/O here."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from knowmind.contract.limits import CHUNK_PLACEHOLDER, NAME_MAX_CHARS
from knowmind.models.llm import Message

__all__ = [
    "DEFAULT_PROMPT",
    "ExtractedEntity",
    "ExtractedRelation",
    "extraction_messages",
    "parse_extraction",
]

FALLBACK_CLASS = "Topic"
MAX_ITEMS = 20  # entities and relations read from one answer, each
CHUNK_CHARS = 2000  # of the chunk put in the prompt (a small model's context)
_SYNONYMS = {"organisation": "Organization", "company": "Organization", "firm": "Organization"}

DEFAULT_PROMPT = (
    "Extract the named entities and the relations between them from the text.\n"
    "Entity classes: {classes}.\nRelations (predicate: subject class -> object class): "
    "{predicates}.\nAnswer with JSON only, in this form:\n"
    '{{"entities": [{{"name": "...", "class": "..."}}], '
    '"relations": [{{"subject": "...", "predicate": "...", "object": "..."}}]}}\n\n'
    "Text:\n" + CHUNK_PLACEHOLDER
)


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    name: str
    entity_class: str  # an ontology class (unknown ones mapped to ``Topic``)


@dataclass(frozen=True, slots=True)
class ExtractedRelation:
    subject: str
    predicate: str  # as the model wrote it, upper-cased with underscores
    object: str


def default_prompt(classes: Iterable[str], predicates: Iterable[tuple[str, str, str]]) -> str:
    """``DEFAULT_PROMPT`` with the ontology's classes and predicates filled in."""
    listed = "; ".join(f"{name}: {s} -> {o}" for name, s, o in predicates)
    return DEFAULT_PROMPT.format(classes=", ".join(sorted(classes)), predicates=listed)


def extraction_messages(template: str, chunk: str) -> list[Message]:
    return [{"role": "user", "content": template.replace(CHUNK_PLACEHOLDER, chunk[:CHUNK_CHARS])}]


def parse_extraction(
    text: str, classes: frozenset[str]
) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """The entities and relations of the model's answer (the first JSON object in it); an
    answer that holds none gives nothing."""
    found = _first_object(text)
    if found is None:
        return [], []
    by_lower = {c.lower(): c for c in classes}
    entities = []
    for item in _items(found.get("entities")):
        name = _name(item.get("name"))
        if name:
            wanted = str(item.get("class") or item.get("type") or "").strip().lower()
            known = by_lower.get(wanted) or _SYNONYMS.get(wanted)
            entities.append(ExtractedEntity(name, known if known in classes else FALLBACK_CLASS))
    relations = []
    for item in _items(found.get("relations")):
        subject, object_ = _name(item.get("subject")), _name(item.get("object"))
        predicate = re.sub(r"[^A-Z0-9]+", "_", str(item.get("predicate") or "").upper()).strip("_")
        if subject and object_ and predicate and subject != object_:
            relations.append(ExtractedRelation(subject, predicate, object_))
    return entities, relations


def _first_object(text: str) -> dict[str, object] | None:
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _items(value: object) -> list[dict[str, object]]:
    return [v for v in value if isinstance(v, dict)][:MAX_ITEMS] if isinstance(value, list) else []


def _name(value: object) -> str | None:
    name = value.strip() if isinstance(value, str) else ""
    return name if 0 < len(name) <= NAME_MAX_CHARS else None

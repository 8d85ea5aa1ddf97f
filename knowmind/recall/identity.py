"""Identity and relation heuristics for questions aimed at one entity or a typical relation.

The question patterns are data (``identity_patterns.json``, German and English):
- identity ("Wer ist X?", "Who is X?") → the memories about X, its profile first;
- class ("Welche Verträge mit X?", "Which hosts of X?") → nodes of that class joined to X;
- relation phrases ("Wer arbeitet für X?", "Where does X run?") → the nodes at the other end.
X is matched fuzzily (trigram, aliases, case and umlauts folded, a genitive -s dropped).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from uuid import UUID

from knowmind.linking.matching import match_phrase
from knowmind.linking.names import normalise_name
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.search import connected_entities, first_chunks, memories_mentioning
from knowmind.store.sql import Conn

__all__ = ["IdentityStage", "Intent", "parse_question"]

_PATTERNS_FILE = Path(__file__).with_name("identity_patterns.json")
MAX_FANOUT = 50  # neighbours searched for a class two hops away


@dataclass(frozen=True, slots=True)
class Intent:
    kind: str  # "identity" | "class" | "relation"
    subject: str  # the entity phrase X
    entity_class: str | None = None
    predicates: tuple[str, ...] = ()
    direction: str | None = None


@cache
def _patterns() -> dict[str, Any]:
    data = json.loads(_PATTERNS_FILE.read_text())
    flags = re.IGNORECASE | re.UNICODE
    return {
        "identity": [re.compile(p, flags) for p in data["identity"]],
        "class_of": [re.compile(p, flags) for p in data["class_of"]],
        "relations": [(re.compile(r["pattern"], flags), r) for r in data["relations"]],
        "class_words": {word: cls for cls, words in data["class_words"].items() for word in words},
    }


def parse_question(question: str) -> Intent | None:
    """The first pattern that matches: relation phrases, then classes, then identity."""
    patterns = _patterns()
    for pattern, rule in patterns["relations"]:
        if match := pattern.match(question):
            return Intent(
                "relation",
                match["x"],
                predicates=tuple(rule["predicates"]),
                direction=rule["direction"],
            )
    for pattern in patterns["class_of"]:
        match = pattern.match(question)
        cls = match and patterns["class_words"].get(match["cls"].lower())
        if match and cls:
            return Intent("class", match["x"], entity_class=cls)
    for pattern in patterns["identity"]:
        if match := pattern.match(question):
            return Intent("identity", match["x"])
    return None


class IdentityStage:
    name = "identity"

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        intent = parse_question(query.text)
        if intent is None:
            return []
        tenant = query.tenant
        async with ctx.db.read(tenant) as conn:
            matches = await match_phrase(conn, tenant, _strip_articles(intent.subject))
            if query.explain:
                ctx.explain["intent"] = {
                    "kind": intent.kind,
                    "subject": intent.subject,
                    "class": intent.entity_class,
                    "predicates": list(intent.predicates),
                }
                ctx.explain["identity_entities"] = [
                    {"id": str(m.id), "name": m.name, "score": round(m.score, 3)} for m in matches
                ]
            ctx.signals["identity"] = {
                "entity_score": matches[0].score if matches else 0.0,
                "intent_relation": float(intent.kind != "identity"),
            }
            if not matches:
                return []
            subject = matches[0]
            targets = [(subject.id, subject.name)]
            if intent.kind != "identity":
                targets = await _targets(conn, tenant, subject.id, intent)
            return await _memories_about(conn, query, dict(targets))


async def _targets(
    conn: Conn, tenant: UUID, subject: UUID, intent: Intent
) -> list[tuple[UUID, str]]:
    """The nodes a class or relation question asks for. Classes are looked for one hop away,
    then two (contracts hang off the client's project, not the client)."""
    targets = await connected_entities(
        conn,
        tenant,
        subject,
        predicates=list(intent.predicates) or None,
        direction=intent.direction,
        entity_class=intent.entity_class,
    )
    if targets or intent.kind != "class":
        return targets
    found: dict[UUID, str] = {}
    for neighbour, _ in (await connected_entities(conn, tenant, subject))[:MAX_FANOUT]:
        for node, name in await connected_entities(
            conn, tenant, neighbour, entity_class=intent.entity_class
        ):
            if node != subject:
                found.setdefault(node, name)
    return list(found.items())


async def _memories_about(
    conn: Conn, query: RecallRequest, targets: dict[UUID, str]
) -> list[Candidate]:
    """Memories about the target entities: profiles (memories titled with a target's name)
    first, then by target order, inline relations before gazetteer and NER mentions, and
    earlier mentions first."""
    rows = await memories_mentioning(
        conn, query.tenant, list(targets), query.filters, query.candidates * 2
    )
    order = {entity_id: i for i, entity_id in enumerate(targets)}
    names = {entity_id: normalise_name(name) for entity_id, name in targets.items()}

    def rank(row: dict[str, Any]) -> tuple[int, int, int, int]:
        titled = normalise_name(row["title"] or "") == names[row["entity_id"]]
        return (
            0 if titled else 1,
            order[row["entity_id"]],
            row["method_rank"],
            row["first_offset"],
        )

    memory_ids: list[UUID] = []
    for row in sorted(rows, key=rank):
        if row["memory_id"] not in memory_ids:
            memory_ids.append(row["memory_id"])
    memory_ids = memory_ids[: query.candidates]
    chunks = await first_chunks(conn, query.tenant, memory_ids, query.filters)
    total = len(memory_ids)
    return [
        Candidate(chunks[m], m, float(total - i)) for i, m in enumerate(memory_ids) if m in chunks
    ]


_ARTICLES = re.compile(r"^(?:der|die|das|den|dem|des|the|a|an|unsere?n?|our)\s+", re.IGNORECASE)


def _strip_articles(phrase: str) -> str:
    return _ARTICLES.sub("", phrase.strip())

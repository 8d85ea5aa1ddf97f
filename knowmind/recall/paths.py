"""Relation paths: questions that name an entity and ask along relations, answered over the
tenant's graph ("Who leads the project that Miriam Hoffmann works on?", "Welche Spedition
beliefert die Bäckerei, die Tobias Wolf leitet?").

1. The relations asked for: words and phrases per predicate (``relation_phrases.json``, German
   and English, plus the catalogue's labels), each occurrence a slot. A phrase may stand for
   several predicates, a predicate for its inverse too (a path walks either way), and a derived
   predicate for the hops it is derived from ("läuft auf": an application's container's host).
2. The entities named: the recall's question entities, the confident ones.
3. Paths of 1–3 typed edges out of each named entity (one statement per hop, bounded fan-out),
   scored by the share of slots their hops fill (each slot once), less a penalty per hop no
   slot asks for (one at most) and per extra hop, plus a bonus where the path's nodes have the
   classes the question names ("which project", "welche Firma", "who").
4. The memories stating the best paths' final hops first, then those stating their bridging
   hops, then the answer entities' profiles.

No statement runs when the question asks for no relation or names no entity, and the stage
returns nothing when no path fills a slot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from uuid import UUID

from knowmind.graph.ontology import Ontology
from knowmind.linking.matching import MatchedEntity
from knowmind.linking.names import fold, normalise_name, tokens
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.paths import PathEdge, co_mentioning, hop_edges, titled_memories
from knowmind.store.search import first_chunks
from knowmind.store.sql import Conn

__all__ = ["RelationPathStage", "Slot", "family", "parse_relations", "question_classes"]

_PHRASES_FILE = Path(__file__).with_name("relation_phrases.json")
_CLASS_FILE = Path(__file__).with_name("identity_patterns.json")
MAX_HOPS = 3
MAX_UNMATCHED = 1  # hops a path may take that no slot asks for
MIN_ENTITY_SCORE = 0.7  # named entities matched below this start no path
MAX_STARTS = 3
PER_NODE, PER_HOP = 50, 200  # edges read per frontier node, and per hop in all
UNMATCHED_PENALTY, LENGTH_PENALTY = 0.3, 0.02
CLASS_BONUS, WH_BONUS = 0.1, 0.05
ENTITY_WEIGHT = 0.2  # a fuzzy start (score < 1) costs this share of its shortfall
KEEP_WITHIN, MAX_PATHS = 0.25, 20  # paths answered: this close to the best, at most this many
GAP = 4  # words a "..." in a phrase may skip
BRIDGE_SHARE, PROFILE_SHARE = 0.5, 0.25  # of the path's score, for the candidates' scores
_PART_SPLIT = re.compile(r"[.&/-]")
_WH = {
    **dict.fromkeys(("wer", "wem", "wen", "who", "whom"), ("Person", "Organization", "Agent")),
    **dict.fromkeys(("wo", "where", "worauf"), ("Host", "Container", "Organization")),
}
Stated = dict[tuple[UUID, UUID], list[UUID]]


@dataclass(frozen=True, slots=True)
class Slot:
    """One relation the question asks for: the predicate families that fill it."""

    predicates: frozenset[str]
    position: int  # index of its first word
    text: str
    noun: bool = False


def family(predicate: str) -> str:
    """One name for a predicate and its inverse (the alphabetically first)."""
    known = Ontology.default().predicates.get(predicate)
    twin = known.twin if known else None
    return min(predicate, twin) if twin else predicate


@cache
def _members() -> dict[str, frozenset[str]]:
    """{family: its predicates, and for a derived one those it is derived from}."""
    ontology = Ontology.default()
    members: dict[str, set[str]] = {}
    for name in ontology.predicates:
        members.setdefault(family(name), set()).add(name)
    for rule in ontology.rules:
        members[family(rule.predicate)] |= {p for f in rule.inputs for p in members[family(f)]}
    return {key: frozenset(names) for key, names in members.items()}


@cache
def _runs(key: str) -> tuple[tuple[str, ...], ...]:
    """The hop sequences (families, either way round) a derived family stands for."""
    rules = [r for r in Ontology.default().rules if family(r.predicate) == key]
    paths = [tuple(family(p) for p in path) for rule in rules for path in rule.paths]
    return tuple(dict.fromkeys(paths + [path[::-1] for path in paths]))


@cache
def _lexicon() -> dict[str, list[tuple[tuple[str, ...], frozenset[str], bool]]]:
    """(words, families, role noun) of every phrase, by first word ("*": prefix patterns)."""
    merged: dict[tuple[str, ...], tuple[set[str], bool]] = {}

    def add(text: str, predicate: str, noun: bool) -> None:
        parts = tuple(fold(text).split())
        predicates, was_noun = merged.get(parts, (set(), False))
        merged[parts] = (predicates | {family(predicate)}, was_noun or noun)

    for predicate, forms in json.loads(_PHRASES_FILE.read_text())["predicates"].items():
        for text in forms["de"] + forms["en"]:
            add(text, predicate, False)
        for text in forms["nouns"]:
            add(text, predicate, True)
    for predicate in Ontology.default().predicates.values():
        for label in predicate.labels.values():
            add(label, predicate.name, False)
    index: dict[str, list[tuple[tuple[str, ...], frozenset[str], bool]]] = {}
    for parts, (predicates, noun) in merged.items():
        key = "*" if parts[0].endswith("*") else parts[0]
        index.setdefault(key, []).append((parts, frozenset(predicates), noun))
    return index


@cache
def _class_words() -> dict[str, str]:
    data = json.loads(_CLASS_FILE.read_text())["class_words"]
    return {fold(word): cls for cls, words in data.items() for word in words}


def _words(question: str, masked: Iterable[str]) -> list[tuple[str, bool]]:
    """The question's folded words (compounds split at - . & /), each with whether it is free
    (not part of a named entity's name)."""
    names = [t for t, _, _ in tokens(question)]
    taken = [False] * len(names)
    for name in masked:
        parts = name.split()
        for i in range(len(names) - len(parts) + 1):
            if parts and names[i : i + len(parts)] == parts:
                taken[i : i + len(parts)] = [True] * len(parts)
    return [(w, not taken[i]) for i, name in enumerate(names) for w in _PART_SPLIT.split(name) if w]


def _match(parts: tuple[str, ...], words: Sequence[tuple[str, bool]], at: int) -> tuple[int, ...]:
    """The positions of the phrase's words when it matches from ``at``, else ()."""
    found: list[int] = []
    reach = 0
    for part in parts:
        if part == "...":
            reach = GAP
            continue
        stop = min(len(words), at + reach + 1)
        hit = next((k for k in range(at, stop) if words[k][1] and _fits(part, words[k][0])), -1)
        if hit < 0:
            return ()
        found.append(hit)
        at, reach = hit + 1, 0
    return tuple(found)


def _fits(part: str, word: str) -> bool:
    return word.startswith(part[:-1]) if part.endswith("*") else word == part


def parse_relations(question: str, masked: Iterable[str] = ()) -> list[Slot]:
    """The slots of the question in order: the longest phrases first, each word in one slot,
    phrases on the same words joined; a role noun next to a verb of the same relation
    ("Welcher Lieferant beliefert …") is one slot. ``masked``: normalised names of the
    entities named, whose words signal nothing."""
    words = _words(question, masked)
    lexicon = _lexicon()
    found: dict[tuple[int, ...], tuple[frozenset[str], bool]] = {}
    for i, (word, free) in enumerate(words):
        for parts, predicates, noun in lexicon.get(word, []) + lexicon.get("*", []) if free else []:
            if positions := _match(parts, words, i):
                known, was_noun = found.get(positions, (frozenset(), False))
                found[positions] = (known | predicates, was_noun or noun)
    taken: set[int] = set()
    slots = []
    for positions in sorted(found, key=lambda p: (-len(p), p[0], p[-1])):
        if taken.isdisjoint(positions):
            taken.update(positions)
            text = " ".join(words[k][0] for k in positions)
            slots.append(Slot(found[positions][0], positions[0], text, found[positions][1]))
    merged: list[Slot] = []
    for slot in sorted(slots, key=lambda s: s.position):
        last = merged[-1] if merged else None
        if last and last.noun != slot.noun and last.predicates & slot.predicates:
            both = f"{last.text} … {slot.text}"
            merged[-1] = Slot(last.predicates & slot.predicates, last.position, both)
        else:
            merged.append(slot)
    return merged


def question_classes(
    question: str, masked: Iterable[str] = ()
) -> tuple[frozenset[str], frozenset[str]]:
    """(the classes its class words name, the classes its question word asks for)."""
    words = _words(question, masked)
    named = frozenset(_class_words()[w] for w, free in words if free and w in _class_words())
    return named, frozenset(next((_WH[w] for w, _ in words if w in _WH), ()))


@dataclass(frozen=True, slots=True)
class _Path:
    start: MatchedEntity
    edges: tuple[PathEdge, ...] = ()
    filled: int = 0  # slots its hops fill
    covered: int = 0  # hops that fill a slot
    score: float = 0.0

    @property
    def end(self) -> UUID:
        return self.edges[-1].to_id if self.edges else self.start.id

    def visits(self, node: UUID) -> bool:
        return node == self.start.id or any(e.to_id == node for e in self.edges)

    def names(self) -> list[str]:
        out = [self.start.name]
        for edge in self.edges:
            out += [f"^{edge.predicate}" if edge.reversed else edge.predicate, edge.name]
        return out


def _fill(
    keys: tuple[str, ...], slots: tuple[frozenset[str], ...], used: frozenset[int] = frozenset()
) -> tuple[int, int]:
    """(slots filled, hops covered), the most, by hops with the predicate families ``keys``:
    a hop fills a slot of its family, a run of hops one of the derived family they derive."""
    if not keys:
        return 0, 0
    best = _fill(keys[1:], slots, used)
    for i, slot in enumerate(slots):
        if i in used:
            continue
        runs = [(key,) for key in slot] + [run for key in slot for run in _runs(key)]
        for run in {run for run in runs if keys[: len(run)] == run}:
            filled, covered = _fill(keys[len(run) :], slots, used | {i})
            best = max(best, (filled + 1, covered + len(run)))
    return best


@dataclass(frozen=True, slots=True)
class _Question:
    slots: tuple[frozenset[str], ...]
    classes: frozenset[str] = frozenset()
    wh: frozenset[str] = frozenset()
    wanted: list[str] = field(default_factory=list)  # predicates to read first

    def extend(self, path: _Path, edge: PathEdge) -> _Path:
        edges = (*path.edges, edge)
        filled, covered = _fill(tuple(family(e.predicate) for e in edges), self.slots)
        seen = {e.entity_class for e in edges}
        score = (
            filled / len(self.slots)
            - UNMATCHED_PENALTY * (len(edges) - covered)
            - LENGTH_PENALTY * (len(edges) - 1)
            + CLASS_BONUS * (len(self.classes & seen) / len(self.classes) if self.classes else 0)
            + WH_BONUS * (edge.entity_class in self.wh)
            - ENTITY_WEIGHT * (1 - path.start.score)
        )
        return _Path(path.start, edges, filled, covered, score)

    def complete(self, path: _Path) -> bool:
        """Every slot filled by the path's hops alone, and every class named on its way: no
        longer path can do better."""
        seen = {e.entity_class for e in path.edges}
        return path.filled == len(self.slots) == path.covered == len(path.edges) and (
            self.classes <= seen
        )


async def _walk(
    conn: Conn, query: RecallRequest, starts: list[MatchedEntity], question: _Question
) -> list[_Path]:
    """Every path of up to ``MAX_HOPS`` edges that fills a slot, with at most
    ``MAX_UNMATCHED`` hops no slot asks for; no deeper once a path is complete."""
    longest = sum(max(len(r) for key in s for r in ((key,), *_runs(key))) for s in question.slots)
    partial, found = [_Path(start) for start in starts], []
    for _ in range(min(MAX_HOPS, longest + MAX_UNMATCHED)):
        frontier = sorted({p.end for p in partial}, key=str)
        edges = await hop_edges(
            conn, query.tenant, frontier, question.wanted, query.filters,
            per_node=PER_NODE, limit=PER_HOP,
        )  # fmt: skip
        out: dict[UUID, list[PathEdge]] = {}
        for edge in edges:
            out.setdefault(edge.from_id, []).append(edge)
        grown = [
            question.extend(path, edge)
            for path in partial
            for edge in out.get(path.end, [])
            if not path.visits(edge.to_id)
        ]
        partial = [p for p in grown if len(p.edges) - p.covered <= MAX_UNMATCHED]
        found += [p for p in partial if p.filled]
        if any(question.complete(p) for p in partial):
            break
        partial = sorted(partial, key=lambda p: -p.score)[:PER_HOP]
    return found


def _ranked(paths: list[_Path]) -> list[_Path]:
    order = sorted(paths, key=lambda p: (-p.score, len(p.edges), p.edges[-1].name, str(p.end)))
    best = order[0].score if order else 0.0
    return [p for p in order if p.score >= best - KEEP_WITHIN][:MAX_PATHS]


async def _stating(conn: Conn, query: RecallRequest, paths: list[_Path]) -> Stated:
    """{(from, to) of each hop: the memories stating it}: the one that drew the edge, or for an
    edge linked by hand those whose inline relations name both ends."""
    stated: Stated = {}
    for edge in (e for p in paths for e in p.edges if e.memory_id is not None):
        stated.setdefault((edge.from_id, edge.to_id), []).append(edge.memory_id)  # type: ignore[arg-type]
    bare = sorted({(e.from_id, e.to_id) for p in paths for e in p.edges} - set(stated), key=str)
    stated.update(await co_mentioning(conn, query.tenant, bare, query.filters))
    return stated


def _tiers(paths: list[_Path]) -> list[list[_Path]]:
    """The paths in groups of equal score, best first."""
    tiers: list[list[_Path]] = []
    for path in paths:
        if tiers and abs(tiers[-1][0].score - path.score) < 1e-9:
            tiers[-1].append(path)
        else:
            tiers.append([path])
    return tiers


class RelationPathStage:
    name = "relations"

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        ctx.signals[self.name] = {"paths": 0.0, "implied_predicates": 0.0, "best_match": 0.0}
        if not parse_relations(query.text):
            return []
        named = await ctx.query_entities()
        starts = [m for m in named if m.score >= MIN_ENTITY_SCORE][:MAX_STARTS]
        masked = [normalise_name(m.matched) for m in starts]
        slots = parse_relations(query.text, masked)
        if query.explain:
            ctx.explain["relation_slots"] = [
                {"text": s.text, "predicates": sorted(s.predicates)} for s in slots
            ]
        if not starts or not slots:
            return []
        ctx.signals[self.name]["implied_predicates"] = float(len(slots))
        keys = {key for s in slots for key in s.predicates}
        wanted = sorted({p for key in keys for p in _members().get(key, {key})})
        question = _Question(
            tuple(s.predicates for s in slots), *question_classes(query.text, masked), wanted
        )
        async with ctx.db.read(query.tenant) as conn:
            paths = _ranked(await _walk(conn, query, starts, question))
            if not paths:
                return []
            stated = await _stating(conn, query, paths)
            ranked = self._order(paths, stated, len(slots))
            answers = {p.end: p for p in reversed(paths)}
            for entity_id, memory_id in await titled_memories(
                conn, query.tenant, list(answers), query.filters, query.candidates
            ):
                path = answers[entity_id]
                ranked.setdefault(memory_id, _pick(path, len(slots), PROFILE_SHARE, False))
            memory_ids = list(ranked)[: query.candidates]
            chunks = await first_chunks(conn, query.tenant, memory_ids, query.filters)
        self._report(query, ctx, paths, stated, len(slots))
        evidence = ctx.evidence.setdefault(self.name, {})
        candidates: list[Candidate] = []
        for memory_id in (m for m in memory_ids if m in chunks):
            score, evidence[memory_id] = ranked[memory_id]
            score = min([score] + [c.score for c in candidates[-1:]])  # never rising
            candidates.append(Candidate(chunks[memory_id], memory_id, round(score, 6)))
        return candidates

    @staticmethod
    def _order(
        paths: list[_Path], stated: Stated, slots: int
    ) -> dict[UUID, tuple[float, dict[str, float]]]:
        """{memory: (score, evidence)} in order: per tier of equally scored paths, the memories
        stating their final hops, then those stating their bridging hops."""
        ranked: dict[UUID, tuple[float, dict[str, float]]] = {}
        for tier in _tiers(paths):
            for final in (True, False):
                for path in tier:
                    hops = path.edges[-1:] if final else path.edges[-2::-1]
                    picked = _pick(path, slots, 1.0 if final else BRIDGE_SHARE, final)
                    for edge in hops:
                        for memory_id in stated.get((edge.from_id, edge.to_id), []):
                            ranked.setdefault(memory_id, picked)
        return ranked

    def _report(
        self, query: RecallRequest, ctx: StageContext, paths: list[_Path], stated: Stated, k: int
    ) -> None:
        best = round(paths[0].filled / k, 4)
        ctx.signals[self.name].update(paths=float(len(paths)), best_match=best)
        if query.explain:
            ctx.explain["relation_paths"] = [
                {
                    "path": path.names(),
                    "match": round(path.filled / k, 4),
                    "score": round(path.score, 4),
                    "memories": [
                        str(m)
                        for e in path.edges[::-1]
                        for m in stated.get((e.from_id, e.to_id), [])
                    ],
                }
                for path in paths
            ]


def _pick(path: _Path, slots: int, share: float, final: bool) -> tuple[float, dict[str, float]]:
    """A memory's score (a share of its path's) and its evidence for the ranker."""
    return max(path.score, 0.01) * share, {
        "path_hops": float(len(path.edges)),
        "path_match": round(path.filled / slots, 4),
        "path_final": 1.0 if final else 0.0,
    }

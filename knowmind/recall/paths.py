"""Relation paths: questions that name an entity and ask along relations, answered over the
tenant's graph ("Who leads the project that Miriam Hoffmann works on?", "Welche Spedition
beliefert die Bäckerei, die Tobias Wolf leitet?").

1. The relations asked for: each phrase of a relation in the question is a slot that an edge
   of that relation (either way round) fills (``relation_phrases``).
2. The entities named: the recall's question entities, the confident ones.
3. Paths of 1–3 typed edges out of each named entity (one statement per hop, bounded fan-out),
   scored by the share of slots their hops fill (each slot once), less a penalty per hop no
   slot asks for (one at most) and per extra hop, plus a bonus where the path's nodes have the
   classes the question names ("which project", "welche Firma", "who") and a node's name has
   the question's noun ("welche Spedition": "Spedition Haller").
4. The memories stating the best paths' final hops first, then those stating their bridging
   hops, then the answer entities' profiles.

No statement runs when the question asks for no relation or names no entity, and the stage
returns nothing when no path fills a slot.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from uuid import UUID

from knowmind.linking.matching import MatchedEntity
from knowmind.linking.names import normalise_name
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.recall.relation_phrases import (
    PART_SPLIT,
    Parsed,
    class_words,
    family,
    members,
    parse_question,
    runs,
)
from knowmind.store.paths import PathEdge, co_mentioning, hop_edges, titled_memories
from knowmind.store.search import first_chunks
from knowmind.store.sql import Conn

__all__ = ["RelationPathStage"]

MAX_HOPS = 3
MAX_UNMATCHED = 1  # hops a path may take that no slot asks for
MIN_ENTITY_SCORE = 0.7  # named entities matched below this start no path
MAX_STARTS = 3
PER_NODE, PER_HOP = 50, 200  # edges read per frontier node, and per hop in all
UNMATCHED_PENALTY, LENGTH_PENALTY = 0.3, 0.02
# walking a relation back down after up (X's boss's reports): a repeated relation more often
# asks for a chain (the boss's boss), so a turn breaks ties only
TURN_PENALTY = 0.01
CLASS_BONUS, NAME_BONUS, WH_BONUS = 0.1, 0.05, 0.05
ENTITY_WEIGHT = 0.2  # a fuzzy start (score < 1) costs this share of its shortfall
KEEP_WITHIN, MAX_PATHS = 0.25, 20  # paths answered: this close to the best, at most this many
BRIDGE_SHARE, PROFILE_SHARE = 0.5, 0.25  # of the path's score, for the candidates' scores
Stated = dict[tuple[UUID, UUID], list[UUID]]


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


Hop = tuple[str, str]  # (predicate family, class of the node reached)


def _spans(slot: frozenset[str], hops: tuple[Hop, ...]) -> set[int]:
    """How many of the leading hops fill the slot: one of its family or class, or a run of
    the hops a derived family of the slot stands for."""
    (key, cls), keys = hops[0], tuple(k for k, _ in hops)
    spans = {1} if key in slot or f"@{cls}" in slot else set()
    return spans | {len(run) for k in slot for run in runs(k) if keys[: len(run)] == run}


def _fill(
    hops: tuple[Hop, ...], slots: tuple[frozenset[str], ...], used: frozenset[int] = frozenset()
) -> tuple[int, int]:
    """(slots filled, hops covered), the most the hops can: each slot at most once."""
    if not hops:
        return 0, 0
    best = _fill(hops[1:], slots, used)
    for i, slot in enumerate(slots):
        for span in _spans(slot, hops) if i not in used else ():
            filled, covered = _fill(hops[span:], slots, used | {i})
            best = max(best, (filled + 1, covered + span))
    return best


def _turns(first: PathEdge, then: PathEdge) -> bool:
    """The second hop walks the first one's relation the other way."""
    same = family(first.predicate) == family(then.predicate)
    return same and (first.predicate, first.reversed) != (then.predicate, then.reversed)


@cache
def _name_words(name: str) -> frozenset[str]:
    return frozenset(w for t in normalise_name(name).split() for w in PART_SPLIT.split(t))


@dataclass(frozen=True, slots=True)
class _Question:
    slots: tuple[frozenset[str], ...]
    parsed: Parsed
    wanted: list[str] = field(default_factory=list)  # predicates to read first

    def extend(self, path: _Path, edge: PathEdge) -> _Path:
        edges = (*path.edges, edge)
        hops = tuple((family(e.predicate), e.entity_class) for e in edges)
        filled, covered = _fill(hops, self.slots)
        classes = self.parsed.classes
        named = len(classes & {e.entity_class for e in edges}) / len(classes) if classes else 0
        nouns = {w.removesuffix("s") for w in self.parsed.nouns} | self.parsed.nouns
        in_names = len(nouns & frozenset().union(*(_name_words(e.name) for e in edges)))
        score = (
            filled / len(self.slots)
            - UNMATCHED_PENALTY * (len(edges) - covered)
            - LENGTH_PENALTY * (len(edges) - 1)
            - TURN_PENALTY * sum(map(_turns, edges, edges[1:]))
            + CLASS_BONUS * named
            + NAME_BONUS * min(2, in_names)
            + WH_BONUS * self.parsed.wh.get(edge.entity_class, 0.0)
            - ENTITY_WEIGHT * (1 - path.start.score)
        )
        return _Path(path.start, edges, filled, covered, score)

    def complete(self, path: _Path) -> bool:
        """Every slot filled by the path's hops alone, and every class named on its way: no
        longer path can do better."""
        seen = {e.entity_class for e in path.edges}
        return path.filled == len(self.slots) == path.covered == len(path.edges) and (
            self.parsed.classes <= seen
        )


async def _walk(
    conn: Conn, query: RecallRequest, starts: list[MatchedEntity], question: _Question
) -> list[_Path]:
    """Every path of up to ``MAX_HOPS`` edges that fills a slot, with at most
    ``MAX_UNMATCHED`` hops no slot asks for; no deeper once a path is complete."""
    longest = sum(max(len(r) for k in s for r in ((k,), *runs(k))) for s in question.slots)
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


def _starts(named: list[MatchedEntity]) -> list[MatchedEntity]:
    """The entities the question names with confidence: not a partial match on a word that
    several entities share ("Projekt", "Spedition") or on a class word ("App"), nor one on the
    words of a relation phrase (they ask for the relation)."""
    shared = Counter(m.matched for m in named)
    return [
        m
        for m in named
        if m.score >= MIN_ENTITY_SCORE
        and not _relation_word(m.matched)
        and (
            normalise_name(m.name) == m.matched
            or (shared[m.matched] == 1 and m.matched not in class_words())
        )
    ][:MAX_STARTS]


@cache
def _relation_word(matched: str) -> bool:
    """The words matched are a relation phrase ("Geschäftsführer": a role entity)."""
    slots = parse_question(matched).slots
    words = [w for t in matched.split() for w in PART_SPLIT.split(t) if w]
    return len({k for s in slots for k in s.positions}) == len(words)


def _names_of(entity: MatchedEntity) -> tuple[str, str]:
    """What the question may call the entity: the words matched, and its full name."""
    return entity.matched, normalise_name(entity.name)


def _ranked(paths: list[_Path]) -> list[_Path]:
    order = sorted(paths, key=lambda p: (-p.score, len(p.edges), p.edges[-1].name, str(p.end)))
    best = order[0].score if order else 0.0
    return [p for p in order if p.score >= best - KEEP_WITHIN][:MAX_PATHS]


async def _stating(conn: Conn, query: RecallRequest, paths: list[_Path]) -> Stated:
    """{(from, to) of each hop: the memories stating it}: the one that drew the edge, or for an
    edge linked by hand those whose inline relations name both ends."""
    stated: Stated = {}
    for edge in (e for p in paths for e in p.edges):
        memories = stated.setdefault((edge.from_id, edge.to_id), [])
        if edge.memory_id is not None and edge.memory_id not in memories:
            memories.append(edge.memory_id)
    stated = {pair: memories for pair, memories in stated.items() if memories}
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
        if not parse_question(query.text).slots:
            return []
        starts = _starts(await ctx.query_entities())
        parsed = parse_question(query.text, [n for m in starts for n in _names_of(m)])
        if query.explain:
            ctx.explain["relation_slots"] = [
                {"text": s.text, "predicates": sorted(s.predicates)} for s in parsed.slots
            ]
        if not starts or not parsed.slots:
            return []
        slots = parsed.slots
        ctx.signals[self.name]["implied_predicates"] = float(len(slots))
        keys = {key for s in slots for key in s.predicates}
        wanted = sorted({p for key in keys for p in members().get(key, ())})
        question = _Question(tuple(s.predicates for s in slots), parsed, wanted)
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

"""The relations a question asks for, read from its words: phrases per predicate
(``relation_phrases.json``, German and English, plus the catalogue's labels), each occurrence a
slot. A phrase may stand for several predicates, a predicate for its inverse too (a path walks
either way), and a derived predicate for the hops it is derived from ("läuft auf": an
application's container's host). A class word a named entity owns ("Yusufs Team", "the company
of X") asks for a hop to a node of that class. Also read: the classes the question names, the
class its question word asks for, and the nouns that may be part of a node's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from knowmind.graph.ontology import Ontology
from knowmind.linking.names import fold, tokens

__all__ = ["Parsed", "Slot", "class_words", "family", "members", "parse_question", "runs"]

_PHRASES_FILE = Path(__file__).with_name("relation_phrases.json")
_CLASS_FILE = Path(__file__).with_name("identity_patterns.json")
GAP = 4  # words a "..." in a phrase may skip
PART_SPLIT = re.compile(r"[.&/-]")
_WH_DET = {"welche", "welcher", "welches", "welchen", "welchem", "which", "what", "wessen"}
_OF = {"von", "vom", "of", "des", "der"}
# the classes a question word asks for, and how typical each is ("who": a person, or a firm)
_WHO = MappingProxyType({"Person": 1.0, "Agent": 1.0, "Organization": 0.5})
_WHERE = MappingProxyType({"Host": 1.0, "Container": 1.0, "Organization": 1.0})
_WH: dict[str, Mapping[str, float]] = {
    **dict.fromkeys(("wer", "wem", "wen", "who", "whom"), _WHO),
    **dict.fromkeys(("wo", "where", "worauf"), _WHERE),
}


@dataclass(frozen=True, slots=True)
class Slot:
    """One relation the question asks for: the predicate families that fill it (a class
    "@Class": any hop to a node of that class, for "Yusufs Team", "the company of X")."""

    predicates: frozenset[str]
    positions: tuple[int, ...]  # of its words in the question
    text: str
    noun: bool = False

    @property
    def position(self) -> int:
        return self.positions[0]


@dataclass(frozen=True, slots=True)
class Parsed:
    slots: tuple[Slot, ...]
    classes: frozenset[str]  # named by class words ("welches Projekt")
    wh: Mapping[str, float]  # classes the question word asks for ("wer"), how typical each is
    nouns: frozenset[str]  # words that may be part of a node's name ("welche Spedition")


class _Word(NamedTuple):
    text: str  # folded
    free: bool  # not part of a named entity's name
    noun: bool  # a class word, or capitalised inside the question


def family(predicate: str) -> str:
    """One name for a predicate and its inverse (the alphabetically first)."""
    known = Ontology.default().predicates.get(predicate)
    twin = known.twin if known else None
    return min(predicate, twin) if twin else predicate


@cache
def members() -> dict[str, frozenset[str]]:
    """{family: its predicates, and for a derived one those it is derived from}."""
    ontology = Ontology.default()
    found: dict[str, set[str]] = {}
    for name in ontology.predicates:
        found.setdefault(family(name), set()).add(name)
    for rule in ontology.rules:
        found[family(rule.predicate)] |= {p for f in rule.inputs for p in found[family(f)]}
    return {key: frozenset(names) for key, names in found.items()}


@cache
def runs(key: str) -> tuple[tuple[str, ...], ...]:
    """The hop sequences (families, either way round) a derived family stands for."""
    rules = [r for r in Ontology.default().rules if family(r.predicate) == key]
    paths = [tuple(family(p) for p in path) for rule in rules for path in rule.paths]
    return tuple(dict.fromkeys(paths + [path[::-1] for path in paths]))


@cache
def _lexicon() -> dict[str, list[tuple[tuple[str, ...], frozenset[str], bool]]]:
    """(words, families, role noun) of every phrase, by first word ("*": a pattern)."""
    merged: dict[tuple[str, ...], tuple[set[str], bool]] = {}

    def add(text: str, predicate: str, noun: bool) -> None:
        parts = _parts(text)
        predicates, was_noun = merged.get(parts, (set(), False))
        merged[parts] = (predicates | {family(predicate)}, was_noun or noun)

    for predicate, forms in json.loads(_PHRASES_FILE.read_text())["predicates"].items():
        for text in forms["de"] + forms["en"]:
            add(text, predicate, False)
        for text in forms["nouns"] + forms.get("twice", []):
            add(text, predicate, True)
    for predicate in Ontology.default().predicates.values():
        for label in predicate.labels.values():
            add(label, predicate.name, False)
    index: dict[str, list[tuple[tuple[str, ...], frozenset[str], bool]]] = {}
    for parts, (predicates, noun) in merged.items():
        key = "*" if "*" in parts[0] else parts[0]
        index.setdefault(key, []).append((parts, frozenset(predicates), noun))
    return index


def _parts(text: str) -> tuple[str, ...]:
    """A phrase's words as the question's are split ("skip-level" is two)."""
    words = fold(text).split()
    return tuple(p for w in words for p in ([w] if w == "..." else PART_SPLIT.split(w)) if p)


@cache
def _twice() -> frozenset[tuple[str, ...]]:
    """Phrases that ask for the same relation twice ("skip-level manager": the boss's boss)."""
    data = json.loads(_PHRASES_FILE.read_text())["predicates"]
    return frozenset(_parts(text) for forms in data.values() for text in forms.get("twice", []))


@cache
def class_words() -> dict[str, str]:
    data = json.loads(_CLASS_FILE.read_text())["class_words"]
    return {fold(word): cls for cls, words in data.items() for word in words}


def _words(question: str, masked: Iterable[str]) -> list[_Word]:
    """The question's folded words, compounds split at - . & / (a genitive -s of a name, as
    in "Arslans", is part of the name)."""
    found = list(tokens(question))
    names = [t for t, _, _ in found]
    taken = [False] * len(names)
    for parts in (name.split() for name in masked if name):
        n = len(parts)
        for i in range(len(names) - n + 1):
            last = names[i + n - 1]
            if names[i : i + n - 1] == parts[:-1] and last in (parts[-1], f"{parts[-1]}s"):
                taken[i : i + n] = [True] * n
    out = []
    for i, (name, start, _) in enumerate(found):
        capital = i > 0 and question[start].isupper()
        for w in filter(None, PART_SPLIT.split(name)):
            out.append(_Word(w, not taken[i], capital or w in class_words()))
    return out


def _match(parts: tuple[str, ...], words: Sequence[_Word], at: int) -> tuple[int, ...]:
    """The positions of the phrase's words when it matches from ``at``, else ()."""
    found: list[int] = []
    reach = 0
    for part in parts:
        if part == "...":
            reach = GAP
            continue
        stop = min(len(words), at + reach + 1)
        hit = next((k for k in range(at, stop) if words[k].free and _fits(part, words[k].text)), -1)
        if hit < 0:
            return ()
        found.append(hit)
        at, reach = hit + 1, 0
    return tuple(found)


def _fits(part: str, word: str) -> bool:
    if part.startswith("*"):
        return word.endswith(part[1:])
    return word.startswith(part[:-1]) if part.endswith("*") else word == part


def _phrase_slots(words: list[_Word]) -> list[Slot]:
    """The longest phrases first, each word in one slot; phrases on the same words join."""
    lexicon = _lexicon()
    found: dict[tuple[int, ...], tuple[frozenset[str], bool]] = {}
    for i, word in enumerate(words):
        for parts, predicates, noun in (
            lexicon.get(word.text, []) + lexicon["*"] if word.free else []
        ):
            if positions := _match(parts, words, i):
                known, was_noun = found.get(positions, (frozenset(), False))
                found[positions] = (known | predicates, was_noun or noun)
    taken: set[int] = set()
    slots = []
    for positions in sorted(found, key=lambda p: (-len(p), p[0], p[-1])):
        if taken.isdisjoint(positions):
            taken.update(positions)
            text = tuple(words[k].text for k in positions)
            slot = Slot(found[positions][0], positions, " ".join(text), found[positions][1])
            slots += [slot, slot] if text in _twice() else [slot]
    return sorted(slots, key=lambda s: s.position)


def _asked_for(slot: Slot, words: list[_Word]) -> bool:
    """The slot is a role noun the question asks for ("welcher Lieferant", "which customer")."""
    return slot.noun and any(
        w.text in _WH_DET for w in words[max(0, slot.position - 2) : slot.position]
    )


def _joined(slots: list[Slot], words: list[_Word]) -> list[Slot]:
    """Slots of one relation joined: verbs next to each other ("arbeitet im Team"), or a role
    noun asked for and a verb next to it ("Welcher Lieferant beliefert …"). A role noun asked
    for first, as the subject of a verb of another relation, describes the answer, not a hop
    ("Which customer operates TourPlan?", not "Für welche Kunden arbeitet …")."""
    merged: list[Slot] = []
    for slot in slots:
        last = merged[-1] if merged else None
        if last is None:
            merged.append(slot)
            continue
        common = last.predicates & slot.predicates
        adjacent = last.positions[-1] + 1 == slot.position
        asked = (
            last if last.noun and not slot.noun else slot if slot.noun and not last.noun else None
        )
        if common and (
            (adjacent and not last.noun and not slot.noun) or (asked and _asked_for(asked, words))
        ):
            merged[-1] = Slot(common, last.positions + slot.positions, f"{last.text} … {slot.text}")
        elif adjacent and asked is last and _asked_for(last, words) and words[0].text in _WH_DET:
            merged[-1] = slot
        else:
            merged.append(slot)
    return merged


def _possessive_slots(words: list[_Word], slots: list[Slot]) -> list[Slot]:
    """A class word a named entity owns ("Yusufs Team", "Arslan's team", "die Bäckerei von
    Tobias Wolf") asks for a hop to a node of that class."""
    used = {k for s in slots for k in s.positions}
    out = []
    for i, word in enumerate(words):
        cls = class_words().get(word.text)
        if cls is None or not word.free or i in used:
            continue
        before = [w.free for w in words[max(0, i - 2) : i]]
        owned = before[-1:] == [False] or (before == [False, True] and words[i - 1].text == "s")
        after = words[i + 1 : i + 3]
        owned |= len(after) == 2 and after[0].text in _OF and not after[1].free
        if owned:
            out.append(Slot(frozenset({f"@{cls}"}), (i,), word.text, True))
    return sorted(slots + out, key=lambda s: s.position)


def parse_question(question: str, masked: Iterable[str] = ()) -> Parsed:
    """The relations the question asks for, and what it says of the nodes. ``masked``:
    normalised names of the entities it names, whose words signal nothing."""
    words = _words(question, masked)
    slots = _possessive_slots(words, _joined(_phrase_slots(words), words))
    classes = frozenset(class_words()[w.text] for w in words if w.free and w.text in class_words())
    wh = next((_WH[w.text] for w in words if w.text in _WH), {})
    nouns = frozenset(w.text for w in words if w.free and w.noun and len(w.text) > 2)
    return Parsed(tuple(slots), classes, wh, nouns)

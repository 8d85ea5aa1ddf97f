"""Name normalisation shared by entity storage, fuzzy search and the gazetteer.

A name is split into tokens (letters/digits, keeping inner ``. - & /`` so that host names,
``e.V.`` or ``R&D`` stay one token), each folded to lower case without diacritics (``Müller`` →
``muller``, ``ß`` → ``ss``), and joined by single spaces. The same function normalises entity
names and the n-grams of a text, so a lookup is an exact string match on an index.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

__all__ = ["fold", "normalise_name", "tokens"]

_TOKEN = re.compile(r"\w(?:[\w.&/-]*\w)?", re.UNICODE)


def fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.replace("ß", "ss").replace("ẞ", "SS"))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def tokens(text: str) -> Iterator[tuple[str, int, int]]:
    """(folded token, start, end) with character offsets into ``text``."""
    for match in _TOKEN.finditer(text):
        yield fold(match.group(0)), match.start(), match.end()


def normalise_name(name: str) -> str:
    return " ".join(token for token, _, _ in tokens(name))

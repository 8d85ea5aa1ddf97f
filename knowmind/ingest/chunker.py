"""Split text into overlapping chunks at sentence boundaries."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["chunk_text", "split_sentences"]

# A sentence ends at . ! ? … followed by whitespace and an upper-case letter, digit or quote,
# or at a blank line. Common German/English abbreviations and initials do not end sentences.
_ABBREVIATIONS = {
    "z.b",
    "d.h",
    "u.a",
    "bzw",
    "ca",
    "dr",
    "prof",
    "nr",
    "str",
    "vgl",
    "usw",
    "etc",
    "e.g",
    "i.e",
    "mr",
    "mrs",
    "ms",
    "vs",
    "inkl",
    "ggf",
    "evtl",
    "sog",
    "abs",
    "st",
    "jr",
    "sr",
}
_BOUNDARY = re.compile(r"([.!?…][\"'»«”)\]]*)\s+(?=[\"'»«„“(\[]*[A-ZÄÖÜ0-9])|\n\s*\n")


def split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end(1) if match.group(1) else match.start()
        candidate = text[start:end].strip()
        if not candidate:
            start = match.end()
            continue
        last_word = candidate.rsplit(maxsplit=1)[-1].rstrip(".").lower()
        is_initial = len(last_word) == 1 and last_word.isalpha()
        is_ordinal = last_word.isdigit() and len(last_word) <= 2  # German "am 3. Mai"
        is_abbreviation = last_word in _ABBREVIATIONS or is_initial or is_ordinal
        if match.group(1) and is_abbreviation:
            continue
        sentences.append(candidate)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _hard_split(sentence: str, size: int) -> list[str]:
    """A single sentence longer than a chunk is cut at whitespace near ``size``."""
    pieces: list[str] = []
    rest = sentence
    while len(rest) > size:
        cut = rest.rfind(" ", 0, size)
        cut = cut if cut > size // 2 else size
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
    return pieces


def chunk_text(text: str, target_chars: int = 1000, overlap_chars: int = 200) -> list[str]:
    """Pack sentences into chunks of about ``target_chars``; neighbouring chunks share up to
    ``overlap_chars`` of whole trailing sentences so a fact split across a boundary is kept."""
    sentences = [p for s in split_sentences(text) for p in _hard_split(s, target_chars)]
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for sentence in sentences:
        if current and length + len(sentence) + 1 > target_chars:
            chunks.append(" ".join(current))
            current, length = _overlap_tail(current, overlap_chars)
        current.append(sentence)
        length += len(sentence) + 1
    if current:
        chunks.append(" ".join(current))
    return chunks


def _overlap_tail(sentences: list[str], overlap_chars: int) -> tuple[list[str], int]:
    tail: list[str] = []
    length = 0
    for sentence in reversed(sentences[1:]):
        if length + len(sentence) + 1 > overlap_chars:
            break
        tail.insert(0, sentence)
        length += len(sentence) + 1
    return tail, length


def pack_in_groups(
    sizes: Sequence[tuple[int, int]], max_chunks: int, max_chars: int
) -> list[range]:
    """Consecutive items (each ``(chunks, characters)``) in groups of up to ``max_chunks``
    chunks and ``max_chars`` characters, as index ranges; an item larger than that is a group
    of its own. What is embedded in one call."""
    groups: list[range] = []
    start = size = chars = 0
    for index, (chunks, length) in enumerate(sizes):
        if size and (size + chunks > max_chunks or chars + length > max_chars):
            groups.append(range(start, index))
            start, size, chars = index, 0, 0
        size, chars = size + chunks, chars + length
    if start < len(sizes):
        groups.append(range(start, len(sizes)))
    return groups

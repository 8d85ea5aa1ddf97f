"""Citations of named sources only: an answer cites the passages it used by their markers
(``[1]``, ``[2]``); exactly those passages are returned as citations. An answer that names no
source is not given one after the fact, and one that says the memories hold no answer says so."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from knowmind.answer.base import Passage
from knowmind.answer.prompts import NO_SUPPORT

__all__ = ["Cited", "cite"]

_MARKER = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")


@dataclass(frozen=True, slots=True)
class Cited:
    marker: int  # the number the answer uses
    passage: Passage


def cite(answer: str, passages: Sequence[Passage]) -> tuple[list[Cited], bool]:
    """(the passages the answer names, in order of first mention; whether the answer is
    supported: it names at least one existing source and does not say it has none)."""
    named: list[int] = []
    for match in _MARKER.finditer(answer):
        for number in re.split(r"\s*[,;]\s*", match.group(1)):
            n = int(number)
            if 1 <= n <= len(passages) and n not in named:
                named.append(n)
    cited = [Cited(n, passages[n - 1]) for n in named]
    says_none = NO_SUPPORT.rstrip(".").lower() in answer.lower()
    return cited, bool(cited) and not says_none

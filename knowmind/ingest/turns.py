"""The text a conversation turn is indexed with: a short window of the turns before it.

A turn is stored as its own memory whose ``content`` is the turn itself ("Yes, that one!"), but
its chunks are embedded and indexed for BM25 with a context (the chunk's ``context`` column,
where a memory's title goes otherwise): its speaker, and for a short turn (a reply of at most
``SHORT_TURN_WORDS`` words) first the previous ``turns`` turns, one line each as
``speaker: text``, each cut to its last ``LINE_CHARS`` characters (a question usually ends its
turn). The passage the embedder reads is that context followed by the chunk, so a reply reads
as the answer to what it answers:

    Caroline: Shall we meet at the pottery studio on Harbour Street?
    Melanie: The one next to the bakery?
    Caroline: Yes, that one!

With ``turns`` 0 the context is the speaker alone (what a turn stored as a plain memory titled
with its speaker would be embedded with).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LINE_CHARS", "Said", "turn_context", "turn_passage"]

#: Characters of each earlier turn kept in a turn's context (its end).
LINE_CHARS = 200
#: A turn of at most this many words reads with the turns before it; a longer one says what it
#: says on its own (the window would only dilute it: measured on LoCoMo's dev conversations,
#: the window on every turn lowered the vector stage's evidence recall@5).
SHORT_TURN_WORDS = 8


@dataclass(frozen=True, slots=True)
class Said:
    """A turn as the context of later ones shows it."""

    content: str
    speaker: str | None = None
    role: str | None = None

    @property
    def label(self) -> str:
        """Who said it: the speaker's name, else the role, else nothing."""
        return (self.speaker or self.role or "").strip()


def _line(turn: Said) -> str:
    text = " ".join(turn.content.split())
    if len(text) > LINE_CHARS:
        cut = text[-LINE_CHARS:]
        space = cut.find(" ")
        text = "…" + (cut[space + 1 :] if 0 <= space < LINE_CHARS // 4 else cut)
    return f"{turn.label}: {text}" if turn.label else text


def turn_context(earlier: Sequence[Said], turn: Said, turns: int) -> str | None:
    """The context of ``turn``: the last ``turns`` of ``earlier`` (the turns before it, oldest
    first) and its speaker; None when there is neither (the chunk then has none)."""
    short = len(turn.content.split()) <= SHORT_TURN_WORDS
    lines = [_line(t) for t in earlier[-turns:]] if turns > 0 and short else []
    if turn.label:
        lines.append(f"{turn.label}:")
    return "\n".join(lines) or None


def turn_passage(context: str | None, chunk: str) -> str:
    """What the embedder reads for a chunk of a turn: its context, the speaker's line ending
    in the chunk."""
    if not context:
        return chunk
    return f"{context} {chunk}" if context.endswith(":") else f"{context}\n{chunk}"

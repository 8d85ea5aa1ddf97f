"""The prompts of the answer methods: plain instructions a small instruct model can follow, in
English (the models answer in the question's language when told to)."""

from __future__ import annotations

from collections.abc import Sequence

from knowmind.answer.base import Passage
from knowmind.models.llm import Message

__all__ = [
    "NO_SUPPORT",
    "answer_prompt",
    "condense_prompt",
    "grade_answer_prompt",
    "grade_passages_prompt",
    "hypothetical_prompt",
    "refine_query_prompt",
    "rephrase_prompt",
]

NO_SUPPORT = "The stored memories do not answer this."
PASSAGE_CHARS = 1200  # of each source shown to the model
GRADE_CHARS = 300  # of each source shown for grading whether it helps (prompt time on a CPU)


def sources_block(passages: Sequence[Passage], chars: int = PASSAGE_CHARS) -> str:
    """Sources numbered as the answer cites them: ``[1]``, ``[2]``, …"""
    return "\n\n".join(
        f"[{n}] {p.title + ': ' if p.title else ''}{p.content[:chars]}"
        for n, p in enumerate(passages, start=1)
    )


def answer_prompt(
    question: str,
    passages: Sequence[Passage],
    extra: str = "",
    history: Sequence[Message] = (),
) -> list[Message]:
    """The generation prompt; ``history``: the conversation's earlier turns, before it."""
    system = (
        "You answer questions from the numbered sources only. Cite every source you use by its "
        "number in square brackets, like [1]. If the sources do not contain the answer, reply "
        f"exactly: {NO_SUPPORT} Answer in the language of the question, briefly. {extra}"
    ).strip()
    user = f"Sources:\n{sources_block(passages)}\n\nQuestion: {question}"
    earlier = [{"role": m["role"], "content": m["content"][:PASSAGE_CHARS]} for m in history]
    return [{"role": "system", "content": system}, *earlier, {"role": "user", "content": user}]


def hypothetical_prompt(question: str) -> list[Message]:
    return [
        {
            "role": "system",
            "content": "Write a short passage (two or three sentences) that would answer the "
            "question, as it might appear in a document. Do not say that you are guessing.",
        },
        {"role": "user", "content": question},
    ]


def rephrase_prompt(question: str, count: int) -> list[Message]:
    return [
        {
            "role": "system",
            "content": f"Rewrite the question in {count} different ways, one per line, keeping "
            "its meaning and language. Output only the rewritten questions.",
        },
        {"role": "user", "content": question},
    ]


def grade_passages_prompt(question: str, passages: Sequence[Passage]) -> list[Message]:
    return [
        {
            "role": "system",
            "content": "For each numbered source, say whether it helps to answer the question. "
            "Reply with one line per source: the number, then yes or no. Example:\n1 yes\n2 no",
        },
        {
            "role": "user",
            "content": f"Question: {question}\n\n{sources_block(passages, GRADE_CHARS)}",
        },
    ]


def refine_query_prompt(question: str) -> list[Message]:
    return [
        {
            "role": "system",
            "content": "The search for this question found nothing useful. Write one better "
            "search query for it: the key names and terms only, same language. Output only "
            "the query.",
        },
        {"role": "user", "content": question},
    ]


def grade_answer_prompt(question: str, answer: str, passages: Sequence[Passage]) -> list[Message]:
    return [
        {
            "role": "system",
            "content": "Rate how well the answer is supported by the sources and answers the "
            "question, from 1 (not at all) to 5 (fully). Reply with the number only.",
        },
        {
            "role": "user",
            "content": f"Sources:\n{sources_block(passages)}\n\nQuestion: {question}\n\n"
            f"Answer: {answer}",
        },
    ]


def condense_prompt(history: Sequence[Message], question: str) -> list[Message]:
    turns = "\n".join(f"{m['role']}: {m['content'][:500]}" for m in history)
    return [
        {
            "role": "system",
            "content": "Rewrite the follow-up question as one standalone question that can be "
            "understood without the conversation: replace pronouns and references with what "
            "they refer to. Same language. Output only the question.",
        },
        {"role": "user", "content": f"Conversation:\n{turns}\n\nFollow-up: {question}"},
    ]

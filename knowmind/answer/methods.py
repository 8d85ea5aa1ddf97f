"""The answer methods (the Minder seed's list), each a retrieval strategy around the recall
pipeline; the service generates the answer from what the method retrieved (self_rag generates,
grades and may refine its own). A step the model cannot do is reported in ``degraded`` and the
method goes on with what it has — it never claims a step that did not run.

- ``standard``: recall with the question.
- ``hyde``: recall with the question and a hypothetical answer the model writes for it.
- ``multi_query``: the question and up to three rephrasings, each recalled, merged (each memory
  once, its best passage).
- ``corrective``: recall, the model grades each passage; when fewer than half help, it writes a
  better query, which is recalled and merged with the passages that helped.
- ``self_rag``: standard, then the model rates its answer against the passages (1–5); below
  ``SELF_RAG_THRESHOLD`` it refines the answer once.
- ``raptor``: collapsed-tree retrieval — the question's passages (recall) and the nearest nodes
  of the tenant's summary trees (documents uploaded with ``build_tree``), one list by reciprocal
  rank fusion (a leaf and a summary alternate); a tenant without trees gets ``standard``, said
  in ``degraded``.
- ``auto``: picks one of the above from the question's form and reports why.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

from knowmind.answer.base import AnswerContext, MethodOutcome, merge_passages
from knowmind.answer.prompts import (
    answer_prompt,
    grade_answer_prompt,
    grade_passages_prompt,
    hypothetical_prompt,
    refine_query_prompt,
    rephrase_prompt,
)

__all__ = [
    "ANSWER_METHODS",
    "METHOD_NAMES",
    "SELF_RAG_THRESHOLD",
    "choose_method",
    "method_pattern",
]

Method = Callable[[AnswerContext, str, int], Awaitable[MethodOutcome]]
SELF_RAG_THRESHOLD = 4  # of 5
MAX_REPHRASINGS = 3


async def standard(ctx: AnswerContext, question: str, k: int) -> MethodOutcome:
    return MethodOutcome(await ctx.retrieve("retrieve", question, k), "recall")


async def hyde(ctx: AnswerContext, question: str, k: int) -> MethodOutcome:
    hypothesis = await ctx.try_ask("hypothesis", hypothetical_prompt(question), 120)
    if not hypothesis:
        passages = await ctx.retrieve("retrieve", question, k)
        return MethodOutcome(passages, "recall", details={"hypothesis": None})
    passages = await ctx.retrieve("retrieve", f"{question}\n{hypothesis}", k)
    return MethodOutcome(passages, "hyde", details={"hypothesis": hypothesis})


async def multi_query(ctx: AnswerContext, question: str, k: int) -> MethodOutcome:
    written = await ctx.try_ask("rephrase", rephrase_prompt(question, MAX_REPHRASINGS), 160)
    rephrasings = _lines(written or "", exclude=question)[:MAX_REPHRASINGS]
    queries = [question, *rephrasings]
    groups = await asyncio.gather(
        *(ctx.retrieve(f"retrieve[{i}]", query, k) for i, query in enumerate(queries))
    )
    retrieval = "multi_query" if rephrasings else "recall"
    return MethodOutcome(merge_passages(groups, k), retrieval, details={"queries": queries})


async def corrective(ctx: AnswerContext, question: str, k: int) -> MethodOutcome:
    passages = await ctx.retrieve("retrieve", question, k)
    if not passages:
        return MethodOutcome(passages, "recall", details={"graded": False})
    graded = await ctx.try_ask("grade_retrieval", grade_passages_prompt(question, passages), 80)
    grades = _grades(graded or "", len(passages))
    if not grades:
        if graded is not None:
            ctx.degraded.append("grade_retrieval: the model's grades could not be read")
        return MethodOutcome(passages, "recall", details={"graded": False})
    helpful = [p for n, p in enumerate(passages, start=1) if grades.get(n)]
    details: dict[str, object] = {"graded": True, "helpful": len(helpful), "of": len(passages)}
    if len(helpful) * 2 >= len(passages):
        return MethodOutcome(passages, "recall", details=details)
    refined = await ctx.try_ask("refine_query", refine_query_prompt(question), 60)
    details["refined_query"] = refined
    if not refined:
        return MethodOutcome(passages, "recall", details=details)
    again = await ctx.retrieve("re_retrieve", refined, k)
    return MethodOutcome(merge_passages([helpful, again], k), "corrective", details=details)


async def self_rag(ctx: AnswerContext, question: str, k: int) -> MethodOutcome:
    passages = await ctx.retrieve("retrieve", question, k)
    details: dict[str, object] = {"evaluated": False, "threshold": SELF_RAG_THRESHOLD}
    if not passages:
        return MethodOutcome(passages, "recall", details=details)  # nothing to generate from
    answer = await ctx.try_ask("generate", answer_prompt(question, passages))
    if answer is None:  # the model failed: said in degraded; nothing to rate
        return MethodOutcome(passages, "recall", details=details | {"generated": False})
    details |= {"score": None, "threshold_met": None, "refined": False}
    rated = await ctx.try_ask("evaluate", grade_answer_prompt(question, answer, passages), 8)
    score = _score(rated or "")
    if score is None:
        if rated is not None:
            ctx.degraded.append("evaluate: the model's rating could not be read")
        return MethodOutcome(passages, "recall", answer, details)
    details |= {"evaluated": True, "score": score, "threshold_met": score >= SELF_RAG_THRESHOLD}
    if score < SELF_RAG_THRESHOLD:
        hint = f"A previous answer was judged insufficient: {answer[:400]!r}. Answer better."
        better = await ctx.try_ask("refine", answer_prompt(question, passages, hint))
        if better:
            answer, details["refined"] = better, True
    return MethodOutcome(passages, "recall", answer, details)


async def raptor(ctx: AnswerContext, question: str, k: int) -> MethodOutcome:
    if ctx.search_summaries is None:
        ctx.degraded.append("raptor: summary trees cannot be searched here; standard used")
        return await standard(ctx, question, k)
    leaves, summaries = await asyncio.gather(
        ctx.retrieve("retrieve", question, k), ctx.search_summaries(question, k)
    )
    if not summaries:
        ctx.degraded.append(
            "raptor: no summary tree in this tenant (upload documents with build_tree: true); "
            "standard retrieval used"
        )
        return MethodOutcome(leaves, "recall", details={"summaries": 0})
    ranked = sorted(
        [(rank, 0, p) for rank, p in enumerate(leaves)]
        + [(rank, 1, p) for rank, p in enumerate(summaries)],
        key=lambda item: (item[0], item[1]),  # RRF with equal weights: alternate by rank
    )[:k]
    passages = [p for _, _, p in ranked]
    levels = sorted({p.summary_level for p in passages if p.summary_level})
    details = {"summaries": sum(1 for p in passages if p.summary_level), "levels": levels}
    return MethodOutcome(passages, "raptor", details=details)


_SEVERAL = re.compile(
    r"\b(and|und|or|oder|vs\.?|versus|compare\w*|vergleich\w*|difference|unterschied\w*|"
    r"both|beide\w*|between|zwischen)\b",
    re.IGNORECASE,
)


def choose_method(question: str) -> tuple[str, str]:
    """(method, why) for ``auto``: a question that joins or compares things gets several
    phrasings; a very short one a hypothetical answer to search with; others the standard."""
    words = question.split()
    if _SEVERAL.search(question) or question.count("?") > 1:
        return "multi_query", "the question joins or compares several things"
    if len(words) <= 3:
        return "hyde", "a short question: a hypothetical answer gives the search more to match"
    return "standard", "a single, specific question"


ANSWER_METHODS: dict[str, Method] = {
    "standard": standard,
    "hyde": hyde,
    "self_rag": self_rag,
    "corrective": corrective,
    "raptor": raptor,
    "multi_query": multi_query,
}
METHOD_NAMES = ("standard", "hyde", "self_rag", "auto", "corrective", "raptor", "multi_query")


def method_pattern(names: tuple[str, ...] = METHOD_NAMES) -> str:
    """A regular expression for the method names in any case (JSON Schema has no ``(?i)``)."""

    def any_case(name: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in name)

    return "^(" + "|".join(any_case(n) for n in names) + ")$"


def _lines(text: str, *, exclude: str) -> list[str]:
    """Non-empty lines without list markers, each once, not the question itself."""
    seen = {exclude.strip().lower()}
    out = []
    for line in text.splitlines():
        cleaned = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip('"')
        if cleaned and cleaned.lower() not in seen:
            seen.add(cleaned.lower())
            out.append(cleaned)
    return out


def _grades(text: str, count: int) -> dict[int, bool]:
    """``{source number: helps}`` from lines like "1 yes" / "2: no"."""
    grades = {}
    for match in re.finditer(r"(\d{1,3})\s*[:.)-]?\s*(yes|no|ja|nein)\b", text, re.IGNORECASE):
        n = int(match.group(1))
        if 1 <= n <= count:
            grades[n] = match.group(2).lower() in ("yes", "ja")
    return grades


def _score(text: str) -> int | None:
    match = re.search(r"\b([1-5])\b", text)
    return int(match.group(1)) if match else None

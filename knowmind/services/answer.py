"""Answers: retrieve with the asked method (answer/methods.py), enhance the passages, generate
with the tenant's language model, cite the sources the answer names.

The model is the request's ``llm_model``, else the server's (``KNOWMIND_LLM_*``). Without a model
the request still retrieves and returns its passages, with ``answer: null`` and the reason in
``degraded``; a model that fails mid-way is reported the same way, never replaced.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from knowmind.answer.base import (
    AnswerContext,
    MethodOutcome,
    Passage,
    Retrieve,
    SearchSummaries,
)
from knowmind.answer.citations import Cited, cite
from knowmind.answer.enhancers import compress, with_parent_context
from knowmind.answer.methods import ANSWER_METHODS, METHOD_NAMES, choose_method
from knowmind.answer.prompts import NO_SUPPORT, answer_prompt, condense_prompt
from knowmind.contract.limits import K_MAX, conversation_key
from knowmind.db.engine import Database
from knowmind.errors import InvalidInputError, NotFoundError
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.llm import LLM, LLMSetup, LLMUnavailableError, Message
from knowmind.recall.base import RecallRequest
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.recall import RecallService
from knowmind.services.summary_tree import SummarySearch
from knowmind.services.tenant_settings import TenantSettingsService
from knowmind.store import conversations as conversation_store
from knowmind.store.conversations import Turn
from knowmind.store.search import MemoryFilters

__all__ = ["AnswerRequest", "AnswerResult", "AnswerService"]

log = structlog.get_logger(__name__)

HISTORY_TURNS = 6  # the conversation's last turns a follow-up is read with
OTHER_MODELS_KEPT = 16
RERANK_WIDEN = 3  # Ragen: rerank over-retrieves three times the passages it keeps


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerRequest:
    question: str
    k: int = 5
    method: str = "standard"
    rerank: bool | None = None
    compress: bool = False
    parent_context: bool = False
    filters: MemoryFilters = field(default_factory=MemoryFilters)
    llm_model: str | None = None
    max_tokens: int = 256
    # turns stored per tenant and token; the client's own name (contract.ConversationId)
    conversation_id: str | None = None
    share_conversation: bool = False  # a new conversation other tokens of the tenant may join


@dataclass(slots=True)
class AnswerResult:
    answer: str | None
    supported: bool
    citations: list[Cited]
    passages: list[Passage]
    method: str
    details: dict[str, Any]
    degraded: list[str]
    timings_ms: dict[str, float]
    tokens: dict[str, int]
    model: str | None
    conversation_id: str | None = None
    standalone_question: str | None = None  # what retrieval used, condensed from a follow-up


class AnswerService:
    def __init__(
        self,
        db: Database,
        recall: RecallService,
        embedder: EmbeddingExecutor,
        llm: LLM | None,
        llm_reason: str | None,
        llm_setup: LLMSetup,
    ) -> None:
        self.db, self.recall, self.embedder = db, recall, embedder
        self.llm, self.llm_reason, self.llm_setup = llm, llm_reason, llm_setup
        self._others: dict[str, LLM] = {}  # other models of the same OpenAI-compatible server
        self.tenant_settings = TenantSettingsService(db)
        self.summaries = SummarySearch(db, embedder)

    async def answer(self, who: Principal, request: AnswerRequest) -> AnswerResult:
        started = time.perf_counter()
        request = _canonical(request)
        ctx, result, prompt = await self._prepare(who, request)
        if ctx is not None and prompt is not None:
            try:
                self._finish(result, await ctx.ask("generate", prompt))
            except LLMUnavailableError as exc:
                result.degraded.append(f"generate: {exc}")
        await self._remember_turns(who, request, result)
        return self._close(ctx, result, started)

    async def stream(self, who: Principal, request: AnswerRequest) -> AsyncIterator[dict[str, Any]]:
        """Retrieval done (so bad input and an unknown conversation are refused before the
        response starts), the events of the rest: ``token`` pieces of the answer as the model
        writes them, then ``done`` with the whole result. An answer that had to be complete
        before it could be sent (self_rag grades it first) comes in one ``token`` event, and
        ``details.streamed`` says so."""
        started = time.perf_counter()
        request = _canonical(request)
        prepared = await self._prepare(who, request)
        return self._events(who, request, prepared, started)

    async def _events(
        self,
        who: Principal,
        request: AnswerRequest,
        prepared: tuple[AnswerContext | None, AnswerResult, list[Message] | None],
        started: float,
    ) -> AsyncIterator[dict[str, Any]]:
        ctx, result, prompt = prepared
        if ctx is not None and prompt is not None:
            pieces: list[str] = []
            generating = time.perf_counter()
            try:
                async for piece in ctx.llm.stream(prompt, max_tokens=request.max_tokens):
                    pieces.append(piece)
                    yield {"event": "token", "text": piece}
                self._finish(result, "".join(pieces).strip())
            except LLMUnavailableError as exc:
                result.degraded.append(f"generate: {exc}")
            except Exception as exc:  # the response has started: end it with what happened
                log.exception("answer.stream_failed", error_type=type(exc).__name__)
                result.degraded.append(f"generate: failed ({type(exc).__name__})")
            ctx.timings_ms["generate"] = round((time.perf_counter() - generating) * 1000, 2)
            result.details["streamed"] = "live"
            result.details["streamed_pieces"] = len(pieces)
            result.details["streamed_tokens_counted"] = False  # tokens: the other steps only
        elif result.answer is not None:
            result.details["streamed"] = "complete answer (generated before it could be sent)"
            yield {"event": "token", "text": result.answer}
        try:
            await self._remember_turns(who, request, result)
        except Exception as exc:  # the answer was sent; say the turn was not kept
            log.exception("answer.turns_not_stored", error_type=type(exc).__name__)
            result.degraded.append("conversation: this turn was not stored")
        yield {"event": "done", "result": self._close(ctx, result, started)}

    async def _prepare(
        self, who: Principal, request: AnswerRequest
    ) -> tuple[AnswerContext | None, AnswerResult, list[Message] | None]:
        """Retrieve with the method and enhance: the context, the result so far and the
        generation prompt (None when the answer needs no generation, or cannot have one)."""
        method = self._method(request)
        question = request.question.strip()
        if not question:
            raise InvalidInputError("question", "must not be blank")
        tenant_settings = await self.tenant_settings.get(who)
        llm, no_llm = self._model(request.llm_model or tenant_settings.llm_model)
        result = AnswerResult(
            None, False, [], [], method, {}, [], {}, {}, llm.model if llm else None
        )
        history = await self._history(who, request, result)
        if llm is None:
            result.degraded.append(f"generate: {no_llm}")
            if method != "standard":
                result.degraded.append(
                    f"method {method}: needs a language model; standard retrieval used"
                )
            if history:
                result.degraded.append("condense: no language model; retrieved with the question")
            passages, reasons = await self.retriever(who, request)(question, request.k)
            result.degraded.extend(f"retrieve: {r}" for r in reasons)
            result.passages = await self._enhance(who, request, question, passages, result)
            result.details["retrieval"] = "recall"
            return None, result, None
        ctx = AnswerContext(
            llm,
            self.retriever(who, request),
            max_tokens=request.max_tokens,
            search_summaries=self.summary_searcher(who, request),
        )
        retrieval_question = await self._standalone(ctx, history, question, result)
        if not tenant_settings.multi_query and method in ("multi_query", "auto"):
            method = self._without_multi_query(ctx, method, retrieval_question, result)
        if request.parent_context and method == "raptor":
            ctx.degraded.append("raptor: ignored, parent_context takes precedence")
            method = "standard"
        outcome = await self._run(ctx, method, retrieval_question, request.k, result)
        result.details = {"retrieval": outcome.retrieval, **result.details, **outcome.details}
        result.passages = await self._enhance(who, request, question, outcome.passages, result)
        if outcome.answer is not None:
            if request.compress or request.parent_context:
                ctx.degraded.append(
                    f"{method}: generated from the passages before compress/parent_context"
                )
            self._finish(result, outcome.answer)
            return ctx, result, None
        if outcome.details.get("generated") is False:
            return ctx, result, None  # the method's generation failed: said, not retried
        if not result.passages:
            self._finish(result, NO_SUPPORT)  # nothing retrieved: nothing to generate from
            result.details["answer_by"] = "server: nothing was retrieved"
            return ctx, result, None
        return ctx, result, answer_prompt(question, result.passages, history=history)

    async def _history(
        self, who: Principal, request: AnswerRequest, result: AnswerResult
    ) -> list[Message]:
        """The conversation's last turns (it is created on first use); another token's
        conversation is not found unless it was started as shared."""
        if request.conversation_id is None:
            return []
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            found = await conversation_store.find_conversation(
                conn, tenant, request.conversation_id
            )
            if found is None:
                found = await conversation_store.create_conversation(
                    conn, tenant, request.conversation_id, who.token_id,
                    request.share_conversation,
                )  # fmt: skip
            if found.owner_token != who.token_id and not found.shared:
                raise NotFoundError(f"conversation_id: no conversation {request.conversation_id}")
            turns = await conversation_store.recent_turns(
                conn, tenant, request.conversation_id, HISTORY_TURNS
            )
        result.conversation_id = request.conversation_id
        return [{"role": t.role, "content": t.content} for t in turns]

    async def _standalone(
        self, ctx: AnswerContext, history: list[Message], question: str, result: AnswerResult
    ) -> str:
        """A follow-up as a standalone question for retrieval (generation still sees the
        question as asked); the question itself when it cannot be condensed."""
        if not history:
            return question
        condensed = await ctx.try_ask("condense", condense_prompt(history, question), 80)
        first = (condensed or "").strip().splitlines()[0:1]
        if not first or not first[0].strip():
            ctx.degraded.append("condense: no standalone question; retrieved with the question")
            return question
        result.standalone_question = first[0].strip()
        return result.standalone_question

    async def _remember_turns(
        self, who: Principal, request: AnswerRequest, result: AnswerResult
    ) -> None:
        if request.conversation_id is None:
            return
        turns = [Turn("user", request.question.strip(), result.standalone_question)]
        if result.answer is not None:
            turns.append(Turn("assistant", result.answer))
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            await conversation_store.add_turns(conn, tenant, request.conversation_id, turns)

    def _finish(self, result: AnswerResult, answer: str) -> None:
        result.answer = answer
        result.citations, result.supported = cite(answer, result.passages)

    def _close(
        self, ctx: AnswerContext | None, result: AnswerResult, started: float
    ) -> AnswerResult:
        if ctx is not None:
            if ctx.cut:
                result.details["cut_at_max_tokens"] = list(ctx.cut)
            result.timings_ms = dict(ctx.timings_ms)
            result.degraded = [*result.degraded, *ctx.degraded]
            result.tokens = {"prompt": ctx.prompt_tokens, "completion": ctx.completion_tokens}
        result.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 2)
        return result

    def _method(self, request: AnswerRequest) -> str:
        method = request.method.strip().lower()
        if method not in METHOD_NAMES:
            raise InvalidInputError("method", f"must be one of {', '.join(METHOD_NAMES)}")
        return method

    async def tenant_model(self, who: Principal) -> tuple[LLM | None, str | None]:
        """The tenant's language model (its setting, else the server's), or None and why."""
        return self._model((await self.tenant_settings.get(who)).llm_model)

    def model_problem(self, name: str) -> str | None:
        """Why ``name`` cannot be a tenant's model here (None: it can be tried)."""
        _, problem = self._model(name)
        return problem

    def _model(self, name: str | None) -> tuple[LLM | None, str | None]:
        """The model asked for (the server's by default), or None and why it cannot answer.
        Another model of an OpenAI-compatible server is asked on the same server (which says
        if it does not know it); the embedded provider has only its own."""
        if self.llm is None:
            return None, self.llm_reason
        if not name or name == self.llm.model:
            return self.llm, None
        if self.llm.provider != "openai" or name not in self.llm_setup.allowed_models:
            return None, f"llm_model {name!r} is not on this server (its model: {self.llm.model})"
        if name not in self._others:
            from knowmind.models.llm_openai import OpenAICompatibleLLM

            assert isinstance(self.llm, OpenAICompatibleLLM)
            if len(self._others) >= OTHER_MODELS_KEPT:
                self._others.pop(next(iter(self._others)))  # shares the server's pool: no leak
            self._others[name] = self.llm.with_model(name)
        return self._others[name], None

    def _without_multi_query(
        self, ctx: AnswerContext, method: str, question: str, result: AnswerResult
    ) -> str:
        """The method when the tenant turned multi-query expansion off."""
        chosen = choose_method(question)[0] if method == "auto" else method
        if chosen != "multi_query":
            return method
        ctx.degraded.append("multi_query: off for this tenant (PATCH /v1/settings); standard used")
        if method == "auto":
            result.details["decision"] = {
                "method": "standard",
                "because": "multi_query is off for this tenant",
            }
        return "standard"

    async def _run(
        self, ctx: AnswerContext, method: str, question: str, k: int, result: AnswerResult
    ) -> MethodOutcome:
        if method == "auto":
            chosen, because = choose_method(question)
            result.details["decision"] = {"method": chosen, "because": because}
            method = chosen
        return await ANSWER_METHODS[method](ctx, question, k)

    async def _enhance(
        self,
        who: Principal,
        request: AnswerRequest,
        question: str,
        passages: list[Passage],
        result: AnswerResult,
    ) -> list[Passage]:
        if request.parent_context and passages:
            passages = await with_parent_context(self.db, tenant_of(who), passages)
        if request.compress and passages:
            passages, kept = await compress(self.embedder, str(tenant_of(who)), question, passages)
            result.details["compress"] = kept
        return passages

    def summary_searcher(self, who: Principal, request: AnswerRequest) -> SearchSummaries:
        """The caller's summary nodes nearest a query, as passages (``raptor``)."""

        async def search(query: str, k: int) -> list[Passage]:
            hits = await self.summaries.nearest(tenant_of(who), query[:4000], request.filters, k)
            return [
                Passage(
                    memory_id=hit.memory_id,
                    chunk_id=hit.id,
                    title=hit.title,
                    content=hit.content,
                    score=hit.similarity,
                    summary_level=hit.level,
                )
                for hit in hits
            ]

        return search

    def retriever(self, who: Principal, request: AnswerRequest) -> Retrieve:
        """Recall for the answer's caller with its filters and rerank choice."""

        async def retrieve(query: str, k: int) -> tuple[list[Passage], list[str]]:
            # reranking may run: over-retrieve 3× so it can lift passages from below the top k
            wide = k if request.rerank is False else min(K_MAX, RERANK_WIDEN * k)
            outcome = await self.recall.recall(
                who,
                RecallRequest(
                    text=query[:4000], k=wide, filters=request.filters, rerank=request.rerank
                ),
            )
            passages = [
                Passage(
                    memory_id=hit.chunk.memory_id,
                    chunk_id=hit.chunk.chunk_id,
                    title=hit.chunk.title,
                    content=hit.chunk.content,
                    score=hit.score,
                    stages=tuple(s for s, rank in hit.stages.items() if rank is not None),
                    source=hit.chunk.source,
                )
                for hit in outcome.results[:k]
            ]
            return passages, outcome.degraded_reasons

        return retrieve


def _canonical(request: AnswerRequest) -> AnswerRequest:
    """The request with its conversation's stored name (a UUID in its canonical form)."""
    if request.conversation_id is None:
        return request
    return replace(request, conversation_id=conversation_key(request.conversation_id))

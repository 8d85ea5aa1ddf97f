"""Answers over the tenant's memories: ``POST /v1/answer``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Controller, Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.response import ServerSentEvent
from litestar.response.sse import ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK

from knowmind.api.answer_schemas import AnswerIn
from knowmind.api.outputs import answer_result
from knowmind.api.schemas import RecallFilters, memory_filters
from knowmind.contract.responses import AnswerOut
from knowmind.services.answer import AnswerRequest, AnswerService
from knowmind.services.auth import Principal

__all__ = ["AnswerController"]


def answer_request(data: AnswerIn) -> tuple[AnswerRequest, dict[str, Any]]:
    """The service's request, and the metadata filter as the answer echoes it."""
    f = data.filters or RecallFilters()
    request = data.into(AnswerRequest, filters=memory_filters(f))
    echoed = {k: v for k, v in msgspec.to_builtins(f).items() if v not in (None, [])}
    return request, echoed


class AnswerController(Controller):
    path = "/v1/answer"
    tags = ["answer"]

    @post(
        "/",
        opt={
            "scope": "read",
            "errors": (404,),  # a conversation of another token
            "event_stream": True,
            "response_type": AnswerOut,
        },
        status_code=HTTP_200_OK,
    )
    async def answer(
        self,
        data: JSONBody[AnswerIn],
        answers: NamedDependency[AnswerService],
        principal: NamedDependency[Principal],
    ) -> Response[AnswerOut] | ServerSentEvent:
        """Answer a question.

        Answer a question from the tenant's memories with a retrieval method, citing the
        passages the answer names; ``stream: true`` sends the answer as server-sent events
        (``token`` pieces, then ``done`` with the whole result)."""
        request, echoed = answer_request(data)
        if data.stream:
            events = await answers.stream(principal, request)  # refusals come first
            return ServerSentEvent(_events(events, echoed))
        result = await answers.answer(principal, request)
        return Response(msgspec.convert(answer_result(result, echoed), AnswerOut))


async def _events(
    events: AsyncIterator[dict[str, Any]], echoed: dict[str, Any]
) -> AsyncIterator[ServerSentEventMessage]:
    async for event in events:
        if event["event"] == "token":
            yield ServerSentEventMessage(event="token", data=event["text"])
        else:
            body = msgspec.json.encode(answer_result(event["result"], echoed)).decode()
            yield ServerSentEventMessage(event="done", data=body)

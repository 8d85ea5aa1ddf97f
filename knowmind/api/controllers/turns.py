"""``POST /v1/memories/conversation``: a conversation remembered in one call, each turn a
memory (``services.turns``).

Not ``/v1/conversations``: a conversation there would be the answer threads of ``/v1/answer``
(``conversation_id``, table ``conversations``). This call writes memories, one per turn, beside
``/v1/memories/batch``; the conversation is their ``session_id``, with no table of its own."""

from __future__ import annotations

from litestar import Controller, Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from knowmind.api.turn_schemas import ConversationIn, conversation_draft, conversation_out
from knowmind.contract.responses import ConversationOut
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryService
from knowmind.services.turns import remember_conversation

__all__ = ["ConversationController"]


class ConversationController(Controller):
    path = "/v1/memories/conversation"
    tags = ["memories"]

    @post(
        "/",
        opt={
            "scope": "write",
            "also": {200: "unchanged: every turn is stored already (nothing was written)"},
        },
    )
    async def remember_conversation(
        self,
        data: JSONBody[ConversationIn],
        memories: NamedDependency[MemoryService],
        principal: NamedDependency[Principal],
    ) -> Response[ConversationOut]:
        """Remember a conversation.

        Remember a conversation: each message a memory with its time, speaker, role and the
        session, embedded with the turns before it (``KNOWMIND_TURN_CONTEXT``); each speaker an
        entity its turns mention. Turns stored already answer ``unchanged`` (a session sent
        again with turns appended stores only those). 201 when a turn was new, else 200."""
        done = await remember_conversation(memories, principal, conversation_draft(data))
        status = HTTP_201_CREATED if done.created else HTTP_200_OK
        return Response(conversation_out(done), status_code=status)

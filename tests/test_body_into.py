"""``StrictBody.into``: a REST body becomes its service's request by the fields both name alike
(as they are), the rest given; no server, no database."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest

from knowmind.api.schemas import MemoryIn, RecallFilters, memory_draft, memory_filters
from knowmind.api.strict_body import StrictBody
from knowmind.api.turn_schemas import ConversationIn, conversation_draft


class _Body(StrictBody):
    name: str
    tags: list[str]
    only_here: int = 0


@dataclass(frozen=True, kw_only=True)
class _Request:
    name: str
    tags: tuple[str, ...]
    only_there: str = "default"


def test_shared_fields_are_copied_and_given_ones_win() -> None:
    body = _Body(name="anna", tags=["a", "b"], only_here=3)
    assert body.into(_Request, tags=tuple(body.tags)) == _Request(name="anna", tags=("a", "b"))
    assert body.into(_Request, tags=(), only_there="x").only_there == "x"


def test_a_field_the_request_needs_and_the_body_lacks_must_be_given() -> None:
    @dataclass
    class Needs:
        name: str
        other: str

    with pytest.raises(TypeError):
        _Body(name="anna", tags=[]).into(Needs)


def test_the_doors_drafts_carry_every_field_of_the_body() -> None:
    body = msgspec.convert(
        {"content": "x", "tags": ["t"], "speaker": "Bob", "role": "user", "session_id": "s"},
        MemoryIn,
    )
    draft = memory_draft(body)
    assert (draft.tags, draft.speaker, draft.role, draft.session_id) == (("t",), "Bob", "user", "s")
    filters = memory_filters(RecallFilters(tags=["t"], user_id="u"), known_at=None)
    assert (filters.tags, filters.user_id, filters.as_of) == (["t"], "u", None)
    conversation = msgspec.convert(
        {"messages": [{"content": "hi", "speaker": "A", "id": "m1"}], "offset": 2}, ConversationIn
    )
    turns = conversation_draft(conversation)
    assert turns.offset == 2 and (turns.messages[0].speaker, turns.messages[0].id) == ("A", "m1")

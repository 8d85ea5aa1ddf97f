"""Remember a conversation in one call: each turn a memory of its own (``POST
/v1/memories/conversation``, MCP ``knowmind_remember_conversation``, the SDK's
``remember_conversation``, a session line of ``knowmind import``).

- A turn is a standalone ``episodic`` memory whose content is the message, with its event time
  (``occurred_at``: the message's, else the conversation's, else when it is stored), speaker,
  role, the conversation's ``session_id`` and scopes, and ``metadata.turn`` (its position in the
  session; ``metadata.message_id``: the client's id of the message, when given).
- Its chunks are embedded and indexed with a window of the turns before it
  (``KNOWMIND_TURN_CONTEXT``, ``ingest.turns``), so "Yes, that one!" matches what it answers.
- Idempotent: a turn is identified by the session, its message id (else its position), its
  content, speaker, role, event time and scopes; a turn stored already answers ``unchanged``
  and nothing is embedded for it, so sending a session again with new turns appended stores
  only those. A later part of a long session is sent with ``offset`` (the position of its first
  message): its first turns then read their window from the stored turns before it.
- Each named speaker is an entity (``Person``; a role ``assistant``, ``system``, ``tool`` or
  ``agent``: ``SoftwareAgent``), found by name or created, and mentioned by each of its turns
  (a mention with method ``inline``: the graph stage and ``GET /v1/nodes/{id}/relations`` see
  it, erasing the turns erases an entity only they referred to).
- Throughput: every new turn's chunks are embedded through the one embedding executor in groups
  of one model batch, two groups ahead of the writes; each group is written in one transaction
  and one statement (``insert_memories``) with its mentions. Everything is checked before the
  first embedding (a 422 names the message and field, nothing is written), the tenant's job
  quota included (each new turn queues its extraction job, as a batch item does). Should a
  later group fail (the database, the embedding queue), the groups before it stay stored and
  the call raises: sending it again stores the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.contract.limits import MAX_MESSAGES, require_visible
from knowmind.errors import InvalidInputError
from knowmind.ingest.chunker import chunk_text, pack_in_groups
from knowmind.ingest.pipeline import LANGUAGE_SAMPLE_CHARS, content_language, embed_each
from knowmind.ingest.turns import Said, turn_context, turn_passage
from knowmind.linking.names import normalise_name
from knowmind.models.executor import MAX_BATCH, MAX_BATCH_CHARS
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.memories import MemoryDraft, MemoryService, scoped_draft
from knowmind.services.recipe import insert_memories
from knowmind.store import edges as edge_store
from knowmind.store import entities as entity_store
from knowmind.store import memories as memory_store
from knowmind.store.turns import turns_before

__all__ = [
    "AGENT_ROLES",
    "ConversationDraft",
    "ConversationResult",
    "SpeakerEntity",
    "TurnDraft",
    "TurnResult",
    "remember_conversation",
    "turn_key",
]

TURN_MEMORY_TYPE = "episodic"
#: Roles whose speaker is a program, not a person.
AGENT_ROLES = frozenset({"assistant", "system", "tool", "agent", "bot"})
#: Metadata keys knowmind sets on each turn.
RESERVED_METADATA = ("turn", "message_id")
# Chunks (and characters) per embedding group: one batch of the model thread.
GROUP_CHUNKS = MAX_BATCH
GROUP_CHARS = MAX_BATCH_CHARS
# Embedding groups submitted ahead of the writes: the model thread always has the next batch.
AHEAD = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDraft:
    content: str
    speaker: str | None = None
    role: str | None = None
    occurred_at: datetime | None = None
    id: str | None = None  # the client's id of the message (identifies the turn)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationDraft:
    messages: tuple[TurnDraft, ...]
    session_id: str | None = None  # None: derived from the first message
    metadata: dict[str, Any] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    occurred_at: datetime | None = None  # of the messages that have no time of their own
    offset: int = 0  # the position of the first message in the session


@dataclass(frozen=True, slots=True)
class TurnResult:
    index: int  # in the call's messages
    turn: int  # position in the session
    status: str  # "created" | "unchanged"
    id: UUID | None
    chunks: int = 0
    job_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class SpeakerEntity:
    name: str
    entity_class: str
    id: UUID | None  # None: not stored (no new turn of it, and no entity of that name)


@dataclass(frozen=True, slots=True)
class ConversationResult:
    session_id: str
    created: int
    unchanged: int
    turns: list[TurnResult]
    speakers: list[SpeakerEntity]

    @property
    def status(self) -> str:
        return "created" if self.created else "unchanged"


@dataclass(slots=True)
class _Turn:
    index: int
    turn: int
    draft: MemoryDraft
    key: bytes
    speaker: tuple[str, str] | None  # (normalised name, entity class)
    contents: list[str] = field(default_factory=list)
    contexts: list[str | None] = field(default_factory=list)
    embeddings: np.ndarray | None = None


def turn_key(draft: MemoryDraft, position: int, message_id: str | None) -> bytes:
    """A turn's identity (``memories.content_sha256``): the SHA-256 of its content and of its
    session, message id (else position), speaker, role, event time and scopes. It cannot equal
    a plain memory's key (``memory_key``: the content alone, or the content and a list)."""
    identity = {
        "session_id": draft.session_id,
        "turn": position if message_id is None else None,
        "message_id": message_id,
        "speaker": draft.speaker,
        "role": draft.role,
        "occurred_at": draft.occurred_at,
        "user_id": draft.user_id,
        "agent_id": draft.agent_id,
    }
    return hashlib.sha256(draft.content.encode() + b"\x00" + msgspec.json.encode(identity)).digest()


def derived_session_id(first: MemoryDraft) -> str:
    """A session id for a conversation sent without one, from its first message as it is
    written (so the same conversation, with turns appended or not, gets the same id)."""
    identity = [
        *(first.content, first.speaker, first.role, first.occurred_at),
        *(first.user_id, first.agent_id),
    ]
    return "conv-" + hashlib.sha256(msgspec.json.encode(identity)).hexdigest()[:24]


def speaker_class(role: str | None) -> str:
    return "SoftwareAgent" if role is not None and role.strip().lower() in AGENT_ROLES else "Person"


async def remember_conversation(
    service: MemoryService, who: Principal, conversation: ConversationDraft
) -> ConversationResult:
    tenant = tenant_of(who)
    turns, session_id = _turns(who, conversation)
    speakers: dict[tuple[str, str], str] = {}  # (norm, class) -> the name as first given
    for t in turns:
        if t.speaker is not None and t.draft.speaker is not None:
            speakers.setdefault(t.speaker, t.draft.speaker.strip())
    window = service.ingest.turn_context
    async with service.db.tenant_tx(tenant) as conn:
        existing = await memory_store.find_by_shas(conn, tenant, [t.key for t in turns])
        counts = await memory_store.chunk_counts(conn, tenant, list(existing.values()))
        new = [t for t in turns if t.key not in existing]
        if new:
            await service.quota.check(conn, tenant, jobs=len(new))
        stored_before = await turns_before(
            conn,
            tenant,
            session_id,
            turns[0].draft.user_id,
            turns[0].draft.agent_id,
            conversation.offset,
            window if new and new[0].index < window else 0,
        )
        speaker_ids = {key: await _find_speaker(conn, tenant, key) for key in speakers}
    results = {
        t.index: TurnResult(
            t.index, t.turn, "unchanged", existing[t.key], counts.get(existing[t.key], 0)
        )
        for t in turns
        if t.key in existing
    }
    if new:
        earlier = [Said(s.content, s.speaker, s.role) for s in stored_before]
        _prepare(service, turns, new, earlier, window)
        sample = "\n".join(t.draft.content for t in turns)[:LANGUAGE_SAMPLE_CHARS]
        writing = _Writing(
            service,
            tenant,
            service.language_of(who.language, sample),
            content_language(sample),
            speaker_ids,
        )
        async for result in _embed_and_store(writing, new):
            results[result.index] = result
        if any(r.status == "created" for r in results.values()):
            service.on_job_enqueued()
    ordered = [results[t.index] for t in turns]
    entities = [
        SpeakerEntity(name, entity_class, speaker_ids.get((norm, entity_class)))
        for (norm, entity_class), name in speakers.items()
    ]
    created = sum(r.status == "created" for r in ordered)
    return ConversationResult(session_id, created, len(ordered) - created, ordered, entities)


def _turns(who: Principal, conversation: ConversationDraft) -> tuple[list[_Turn], str]:
    """The conversation's turns as they are written, every message checked (a 422 naming
    ``messages[i].field``) before anything is read or embedded."""
    messages = conversation.messages
    if not messages:
        raise InvalidInputError("messages", "must not be empty")
    if len(messages) > MAX_MESSAGES:
        raise InvalidInputError("messages", f"at most {MAX_MESSAGES} per call")
    metadata = dict(conversation.metadata or {})
    for reserved in RESERVED_METADATA:
        if reserved in metadata:
            raise InvalidInputError(f"metadata.{reserved}", "is set by knowmind on each turn")
    if conversation.offset < 0:
        raise InvalidInputError("offset", "must be at least 0")
    if conversation.session_id is None and conversation.offset:
        raise InvalidInputError("session_id", "is required with an offset")
    user_id = who.user_id if who.user_id is not None else conversation.user_id
    seen: dict[str, int] = {}
    turns: list[_Turn] = []
    session_id = conversation.session_id
    for index, message in enumerate(messages):
        prefix = f"messages[{index}]"
        require_visible(message.content, f"{prefix}.content")
        if message.id is not None:
            if message.id in seen:
                raise InvalidInputError(f"{prefix}.id", f"repeats messages[{seen[message.id]}].id")
            seen[message.id] = index
        position = conversation.offset + index
        extra: dict[str, Any] = {"turn": position}
        if message.id is not None:
            extra["message_id"] = message.id
        draft = MemoryDraft(
            content=message.content,
            memory_type=TURN_MEMORY_TYPE,
            metadata=metadata | extra,
            occurred_at=message.occurred_at or conversation.occurred_at,
            speaker=message.speaker,
            role=message.role,
            user_id=user_id,
            agent_id=conversation.agent_id,
        )
        try:
            draft = scoped_draft(who, draft)
        except InvalidInputError as exc:
            # the conversation's event time, when the message has none of its own
            whose = "" if exc.field == "occurred_at" and message.occurred_at is None else prefix
            raise InvalidInputError(f"{whose}.{exc.field}".lstrip("."), exc.message) from None
        if session_id is None:
            session_id = derived_session_id(draft)
        draft = replace(draft, session_id=session_id)
        speaker = None
        if draft.speaker is not None:
            norm = normalise_name(draft.speaker)
            if not norm:
                raise InvalidInputError(f"{prefix}.speaker", "must contain a letter or digit")
            speaker = (norm, speaker_class(draft.role))
        key = turn_key(draft, position, message.id)
        turns.append(_Turn(index, position, draft, key, speaker))
    assert session_id is not None  # (there is a first message)
    return turns, session_id


def _prepare(
    service: MemoryService,
    turns: Sequence[_Turn],
    new: Sequence[_Turn],
    earlier: list[Said],
    window: int,
) -> None:
    """Chunk the new turns and give each chunk its context: the ``window`` turns before it
    (those of this call, and before the first ones the stored ones, ``earlier``)."""
    said = earlier + [Said(t.draft.content, t.draft.speaker, t.draft.role) for t in turns]
    ingest = service.ingest
    for t in new:
        at = len(earlier) + t.index
        context = turn_context(said[max(0, at - window) : at], said[at], window)
        t.contents = chunk_text(
            t.draft.content, ingest.chunk_target_chars, ingest.chunk_overlap_chars
        ) or [t.draft.content.strip()]
        t.contexts = [context] * len(t.contents)


def _groups(turns: Sequence[_Turn]) -> list[list[_Turn]]:
    """Consecutive turns of up to ``GROUP_CHUNKS`` chunks and ``GROUP_CHARS`` characters of
    passages (a larger turn is a group of its own)."""
    sizes = [
        (
            len(t.contents),
            sum(len(c) + len(x or "") for c, x in zip(t.contents, t.contexts, strict=True)),
        )
        for t in turns
    ]
    return [[turns[i] for i in r] for r in pack_in_groups(sizes, GROUP_CHUNKS, GROUP_CHARS)]


async def _embed(service: MemoryService, owner: str, group: list[_Turn]) -> None:
    passages = [
        [turn_passage(x, c) for c, x in zip(t.contents, t.contexts, strict=True)] for t in group
    ]
    for t, vectors in zip(group, await embed_each(service.embedder, passages, owner), strict=True):
        t.embeddings = vectors


@dataclass(frozen=True, slots=True)
class _Writing:
    """Where one conversation's new turns are written: the tenant, the text-search
    configuration their chunks are indexed in, the language they are written in (None when
    unsure), and the speakers' entities (found or created as the groups are written)."""

    service: MemoryService
    tenant: UUID
    index_language: str
    written_in: str | None
    speaker_ids: dict[tuple[str, str], UUID | None]


async def _embed_and_store(writing: _Writing, turns: list[_Turn]) -> AsyncIterator[TurnResult]:
    """Embed group after group (``AHEAD`` of the writes) and write each group as soon as its
    vectors are there."""
    groups = _groups(turns)
    service, owner = writing.service, str(writing.tenant)
    pending: deque[asyncio.Future[None]] = deque()
    try:
        for group in groups[:AHEAD]:
            pending.append(asyncio.ensure_future(_embed(service, owner, group)))
        for number, group in enumerate(groups):
            await pending.popleft()
            if number + AHEAD < len(groups):
                upcoming = groups[number + AHEAD]
                pending.append(asyncio.ensure_future(_embed(service, owner, upcoming)))
            for result in await _store(writing, group):
                yield result
    finally:
        for future in pending:
            future.cancel()


async def _store(writing: _Writing, group: list[_Turn]) -> list[TurnResult]:
    """The group's turns in one transaction: one statement for the memories, their chunks and
    extraction jobs, one for the mentions of their speakers (found or created first)."""
    tenant, speaker_ids = writing.tenant, writing.speaker_ids
    rows = []
    for t in group:
        assert t.embeddings is not None
        rows.append(
            memory_store.MemoryToInsert(
                t.draft,
                t.key,
                writing.index_language,
                t.contents,
                t.embeddings,
                content_language=writing.written_in,
                contexts=t.contexts,
            )
        )
    async with writing.service.db.tenant_tx(tenant, write=True) as conn:
        for t in group:
            if t.speaker is not None and speaker_ids.get(t.speaker) is None:
                assert t.draft.speaker is not None
                speaker_ids[t.speaker] = await _speaker(conn, tenant, t.draft.speaker, t.speaker)
        stored = await insert_memories(conn, tenant, rows)
        mentions = [
            (row.id, None, speaker_ids[t.speaker], "inline", 1.0, None, None)
            for t, row in zip(group, stored, strict=True)
            if row is not None and t.speaker is not None
        ]
        await edge_store.insert_mentions(conn, tenant, mentions)
        raced = [t.key for t, row in zip(group, stored, strict=True) if row is None]
        found = await memory_store.find_by_shas(conn, tenant, raced)
    return [
        TurnResult(t.index, t.turn, "created", row.id, row.chunks, row.job_id)
        if row is not None
        else TurnResult(t.index, t.turn, "unchanged", found.get(t.key))
        for t, row in zip(group, stored, strict=True)
    ]


async def _find_speaker(
    conn: AsyncConnection, tenant: UUID, speaker: tuple[str, str]
) -> UUID | None:
    """The entity of this name (or alias) and class, if there is one."""
    norm, entity_class = speaker
    known = await entity_store.find_entities_by_norm(conn, tenant, norm)
    same = sorted((e for e in known if e.entity_class == entity_class), key=lambda e: str(e.id))
    return same[0].id if same else None


async def _speaker(
    conn: AsyncConnection, tenant: UUID, name: str, speaker: tuple[str, str]
) -> UUID:
    """The speaker's entity, created when there is none of that name and class."""
    found = await _find_speaker(conn, tenant, speaker)
    if found is not None:
        return found
    norm, entity_class = speaker
    entity = entity_store.NewEntity(
        name=name.strip(), norm_name=norm, entity_class=entity_class, origin="inline"
    )
    return await entity_store.insert_entity_if_missing(conn, tenant, entity)

"""Remember a conversation (issue 43, item 2): one call stores each turn as a memory with its
time, speaker, role and session (REST ``POST /v1/memories/conversation``, MCP
``knowmind_remember_conversation``, the SDK, ``knowmind import``); a short reply is recalled for
what it answers thanks to the window of earlier turns it is indexed with (and not without it);
the same session again writes nothing, appended turns store only those; speakers are entities
their turns mention; a bad message is a 422 naming it, with nothing written."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx
import pytest
from sqlalchemy import text

from knowmind import cli
from knowmind.client import AsyncKnowmind
from knowmind.client import http as client_http
from knowmind.ingest.turns import LINE_CHARS, Said, turn_context, turn_passage
from knowmind.models.executor import MAX_BATCH, MAX_BATCH_CHARS, EmbeddingExecutor
from knowmind.services.auth import Principal
from knowmind.services.graph import GraphService
from knowmind.services.memories import MemoryService
from knowmind.services.turns import ConversationDraft, TurnDraft, remember_conversation
from tests.conftest import ADMIN_HEADERS, RecordingModel, TenantAccess, count_rows, make_tenant
from tests.test_mcp import call, ok

URL = "/v1/memories/conversation"
DAY = "2023-05-08T"
# Caroline and Melanie plan a weekend; "Yes, that one!" answers the restaurant question.
CHAT = [
    ("Caroline", "Hey Mel! How was the pottery class on Tuesday?"),
    ("Melanie", "Great, I finally made a bowl that does not wobble. The kids loved it."),
    ("Caroline", "I have been reading a book about adoption agencies all week."),
    ("Melanie", "That sounds important to you. Are you still thinking about adopting?"),
    ("Caroline", "Yes, very much so."),
    ("Melanie", "For Saturday dinner, should we book the small Italian place by the harbour?"),
    ("Caroline", "Yes, that one!"),
    ("Melanie", "Perfect, I will book it."),
    ("Caroline", "Camping sounds lovely, the mountains were beautiful last summer."),
    ("Melanie", "My painting of the sunset over the lake is almost finished too."),
    ("Caroline", "I started volunteering at the LGBTQ support center on Mondays."),
    ("Melanie", "That is wonderful, they are lucky to have you there."),
    ("Caroline", "Thanks! I also signed up for a charity run next month."),
    ("Melanie", "I will come and cheer for you with the kids."),
]
REPLY = 6
QUESTION = "Which restaurant was chosen for the Saturday dinner?"


def _messages(chat=CHAT, first: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "speaker": speaker,
            "role": "user",
            "content": content,
            "occurred_at": f"{DAY}{13 + (first + i) // 60:02d}:{(first + i) % 60:02d}:00",
        }
        for i, (speaker, content) in enumerate(chat)
    ]


async def _remember(client, tenant: TenantAccess, body: dict[str, Any], status: int = 201):
    response = await client.post(URL, json=body, headers=tenant.write)
    assert response.status_code == status, response.text
    return response.json()


async def _rows(db, tenant_id: str) -> dict[str, int]:
    tables = ("memories", "chunks", "jobs", "mentions", "entities")
    return {table: await count_rows(db, table, tenant_id) for table in tables}


async def _contexts(db, tenant_id: str) -> dict[str, str | None]:
    """Each turn's content → its chunk's context (as the owner: what is stored)."""
    async with db.owner_tx() as conn:
        rows = await conn.execute(
            text("SELECT c.content, c.context FROM chunks c WHERE c.tenant_id = :t ORDER BY c.id"),
            {"t": tenant_id},
        )
        return {r.content: r.context for r in rows}


@pytest.fixture
async def without_context(db, settings, embedder):
    """The memory service with ``KNOWMIND_TURN_CONTEXT=0`` (the ablation "no turn context")."""
    counting = RecordingModel(embedder)
    executor = EmbeddingExecutor(counting)
    ingest = replace(settings.ingest, turn_context=0)
    yield MemoryService(db, executor, ingest, GraphService(db)), counting
    await executor.close()


@pytest.fixture
async def with_context(db, settings, embedder):
    counting = RecordingModel(embedder)
    executor = EmbeddingExecutor(counting)
    yield MemoryService(db, executor, settings.ingest, GraphService(db)), counting
    await executor.close()


async def test_each_turn_is_a_memory_with_its_time_speaker_role_and_session(client, db, tenant):
    body = {
        "session_id": "weekend-2023-05-08",
        "metadata": {"channel": "chat"},
        "user_id": "u-caroline",
        "messages": _messages(CHAT[:8]),
    }
    done = await _remember(client, tenant, body)
    assert (done["session_id"], done["status"], done["created"], done["unchanged"]) == (
        "weekend-2023-05-08",
        "created",
        8,
        0,
    )
    assert [t["turn"] for t in done["turns"]] == list(range(8))
    assert all(t["status"] == "created" and t["chunks"] == 1 and t["job_id"] for t in done["turns"])
    reply = await client.get(f"/v1/memories/{done['turns'][REPLY]['id']}", headers=tenant.read)
    memory = reply.json()
    assert memory["content"] == "Yes, that one!"  # the turn itself, not its context
    assert (memory["speaker"], memory["role"], memory["session_id"]) == (
        "Caroline",
        "user",
        "weekend-2023-05-08",
    )
    assert (memory["user_id"], memory["memory_type"]) == ("u-caroline", "episodic")
    assert memory["occurred_at"] == "2023-05-08T13:06:00Z"
    assert memory["metadata"] == {"channel": "chat", "turn": 6}
    # a short reply is indexed with the two turns before it and its speaker; a turn that says
    # something on its own with its speaker alone
    contexts = await _contexts(db, tenant.id)
    assert contexts[CHAT[2][1]] == "Caroline:"
    context = contexts["Yes, that one!"]
    assert context == (
        "Caroline: Yes, very much so.\n"
        "Melanie: For Saturday dinner, should we book the small Italian place by the harbour?\n"
        "Caroline:"
    )
    listed = await client.get(
        "/v1/memories", params={"session_id": "weekend-2023-05-08"}, headers=tenant.read
    )
    assert len(listed.json()["items"]) == 8


async def test_a_short_reply_is_recalled_for_what_it_answers_only_with_turn_context(
    client, with_context, without_context
):
    recalled = {}
    for name, (service, _) in (("with", with_context), ("without", without_context)):
        tenant = await make_tenant(client, "english")
        who = Principal(UUID(tenant.id), frozenset({"write"}), language="english")
        draft = ConversationDraft(
            messages=tuple(TurnDraft(content=c, speaker=s, role="user") for s, c in CHAT),
            session_id="s1",
        )
        done = await remember_conversation(service, who, draft)
        reply_id = str(done.turns[REPLY].id)
        body = {"query": QUESTION, "k": 3}
        found = await client.post("/v1/recall", json=body, headers=tenant.read)
        assert found.status_code == 200, found.text
        recalled[name] = [hit["memory_id"] for hit in found.json()["results"]], reply_id
    top, reply = recalled["with"]
    assert reply in top, recalled  # the reply carries the question it answers
    top, reply = recalled["without"]
    assert reply not in top, recalled  # "Yes, that one!" alone matches nothing asked


async def test_the_same_session_again_writes_nothing_and_appended_turns_only_themselves(
    client, db, tenant, with_context
):
    service, counting = with_context
    who = Principal(UUID(tenant.id), frozenset({"write"}), language="german")
    first = ConversationDraft(
        messages=tuple(TurnDraft(content=c, speaker=s) for s, c in CHAT[:5]), session_id=None
    )
    done = await remember_conversation(service, who, first)
    assert done.created == 5 and done.session_id.startswith("conv-")
    before, embedded = await _rows(db, tenant.id), sum(counting.passage_calls)
    again = await remember_conversation(service, who, first)
    assert (again.status, again.created, again.unchanged) == ("unchanged", 0, 5)
    assert again.session_id == done.session_id  # derived from the first message: stable
    assert [t.id for t in again.turns] == [t.id for t in done.turns]
    assert await _rows(db, tenant.id) == before and sum(counting.passage_calls) == embedded
    # the whole session with two turns appended: only those two are embedded and stored
    longer = replace(first, messages=tuple(TurnDraft(content=c, speaker=s) for s, c in CHAT[:7]))
    grown = await remember_conversation(service, who, longer)
    assert [t.status for t in grown.turns] == ["unchanged"] * 5 + ["created"] * 2
    assert sum(counting.passage_calls) == embedded + 2
    after = await _rows(db, tenant.id)
    assert after["memories"] == before["memories"] + 2 and after["entities"] == before["entities"]
    # a later part sent alone, with its offset: its first turn reads its window from the store
    part = ConversationDraft(
        messages=tuple(TurnDraft(content=c, speaker=s) for s, c in CHAT[7:9]),
        session_id=done.session_id,
        offset=7,
    )
    tail = await remember_conversation(service, who, part)
    assert [(t.turn, t.status) for t in tail.turns] == [(7, "created"), (8, "created")]
    contexts = await _contexts(db, tenant.id)
    assert contexts[CHAT[7][1]] == f"Melanie: {CHAT[5][1]}\nCaroline: {CHAT[6][1]}\nMelanie:"
    # the REST door answers an unchanged session 200 with the same ids
    body = {
        "session_id": done.session_id,
        "messages": [{"speaker": s, "content": c} for s, c in CHAT[:5]],
    }
    rest = await _remember(client, tenant, body, status=200)
    assert rest["status"] == "unchanged" and [t["id"] for t in rest["turns"]] == [
        str(t.id) for t in done.turns
    ]


async def test_speakers_are_entities_their_turns_mention(client, tenant):
    messages = [
        {"speaker": "Lisa Wagner", "role": "user", "content": "Can you remind me of the dentist?"},
        {"speaker": "Kira", "role": "assistant", "content": "Sure, it is on Friday at nine."},
        {"speaker": "Lisa Wagner", "role": "user", "content": "Thanks, Kira!"},
    ]
    done = await _remember(client, tenant, {"session_id": "s-dentist", "messages": messages})
    speakers = {s["name"]: s for s in done["speakers"]}
    assert speakers["Lisa Wagner"]["entity_class"] == "Person"
    assert speakers["Kira"]["entity_class"] == "SoftwareAgent"  # an assistant is no person
    lisa = speakers["Lisa Wagner"]["id"]
    entity = await client.get(f"/v1/entities/{lisa}", headers=tenant.read)
    assert entity.json()["name"] == "Lisa Wagner"
    relations = await client.get(f"/v1/nodes/{lisa}/relations", headers=tenant.read)
    said = {
        r["node"]["id"]
        for r in relations.json()["relations"]
        if r["predicate"] == "MENTIONS" and r["direction"] == "in"
    }
    assert said == {done["turns"][0]["id"], done["turns"][2]["id"]}
    # the same speaker in another session is the same entity
    other = await _remember(
        client,
        tenant,
        {"session_id": "s-2", "messages": [{"speaker": "Lisa Wagner", "content": "Hi again."}]},
    )
    assert other["speakers"] == [{"name": "Lisa Wagner", "entity_class": "Person", "id": lisa}]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b["messages"][2].update(content="  \u200b "), "messages[2].content"),
        (lambda b: b["messages"][1].update(occurred_at="yesterday"), "messages[1].occurred_at"),
        (lambda b: b["messages"][0].update(speaker="!!!"), "messages[0].speaker"),
        (lambda b: b["messages"][3].update(role=""), "messages[3].role"),
        (lambda b: b["messages"][3].update(colour="red"), "messages[3].colour"),
        (lambda b: [m.update(id="m1") for m in b["messages"][:2]], "messages[1].id"),
        (lambda b: b.update(metadata={"turn": 3}), "metadata.turn"),
        (lambda b: b.update(offset=4), "session_id"),
        (lambda b: b.update(offset=-1), "offset"),
        (lambda b: b.update(messages=[]), "messages"),
        (lambda b: b.update(messages=[{"content": "x"}] * 1001), "messages"),
        (lambda b: b.update(occurred_at="9999-12-31T23:59:00-14:00"), "occurred_at"),
    ],
)
async def test_a_bad_message_is_named_and_nothing_is_written(client, db, tenant, change, field):
    body: dict[str, Any] = {"messages": _messages(CHAT[:5])}
    for message in body["messages"][2:]:
        message.pop("occurred_at")  # these take the conversation's (checked too)
    change(body)
    response = await client.post(URL, json=body, headers=tenant.write)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field, response.json()
    assert await _rows(db, tenant.id) == dict.fromkeys(
        ("memories", "chunks", "jobs", "mentions", "entities"), 0
    )


async def test_a_read_token_cannot_remember_a_conversation(client, tenant):
    response = await client.post(URL, json={"messages": _messages(CHAT[:1])}, headers=tenant.read)
    assert response.status_code == 403


async def test_a_user_bound_token_writes_its_user_whatever_the_body_says(client, tenant):
    issued = await client.post(
        f"/v1/admin/tenants/{tenant.id}/tokens",
        json={"scopes": ["read", "write"], "user_id": "u-mel"},
        headers=ADMIN_HEADERS,
    )
    assert issued.status_code == 201, issued.text
    mel = {"Authorization": f"Bearer {issued.json()['token']}"}
    body = {"user_id": "u-someone-else", "messages": _messages(CHAT[:2])}
    response = await client.post(URL, json=body, headers=mel)
    assert response.status_code == 201, response.text
    for turn in response.json()["turns"]:
        memory = (await client.get(f"/v1/memories/{turn['id']}", headers=tenant.read)).json()
        assert memory["user_id"] == "u-mel"


async def test_the_mcp_tool(client, tenant):
    arguments = {"session_id": "mcp-1", "agent_id": "coach", "messages": _messages(CHAT[:3])}
    done = await ok(client, tenant.write, "knowmind_remember_conversation", arguments)
    assert (done["status"], done["created"], done["session_id"]) == ("created", 3, "mcp-1")
    memory = (
        await client.get(f"/v1/memories/{done['turns'][1]['id']}", headers=tenant.read)
    ).json()
    assert (memory["speaker"], memory["agent_id"], memory["session_id"]) == (
        "Melanie",
        "coach",
        "mcp-1",
    )
    again = await ok(client, tenant.write, "knowmind_remember_conversation", arguments)
    assert (again["status"], again["unchanged"]) == ("unchanged", 3)
    arguments["messages"][1]["content"] = ""
    is_error, refused = await call(
        client, tenant.write, "knowmind_remember_conversation", arguments
    )
    assert is_error and refused["field"] == "messages[1].content", refused
    is_error, refused = await call(client, tenant.read, "knowmind_remember_conversation", arguments)
    assert is_error and "scope" in refused["error"]


class _Into(httpx.AsyncBaseTransport):
    """The test client's transport, into the app it serves."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)


async def test_the_sdk_sends_a_long_conversation_in_parts(client, db, tenant, monkeypatch):
    monkeypatch.setattr(client_http, "CONVERSATION_PART", 4)  # 14 messages: 4 requests
    token = tenant.write["Authorization"].removeprefix("Bearer ")
    messages = [
        {
            "speaker": s,
            "role": "user",
            "content": c,
            "occurred_at": datetime(2023, 5, 8, tzinfo=UTC),
        }
        for s, c in CHAT
    ]
    async with AsyncKnowmind("http://knowmind", token, transport=_Into(client._transport)) as km:
        done = await km.remember_conversation(messages, metadata={"source": "sdk"})
        assert (done.status, done.created, done.unchanged) == ("created", 14, 0)
        assert [t.index for t in done.turns] == [t.turn for t in done.turns] == list(range(14))
        assert {s.name for s in done.speakers} == {"Caroline", "Melanie"}
        assert all(s.id is not None for s in done.speakers)
        again = await km.remember_conversation(messages, metadata={"source": "sdk"})
        assert (again.status, again.session_id) == ("unchanged", done.session_id)
    # the parts' first turns read their window from the turns stored before them
    contexts = await _contexts(db, tenant.id)
    assert contexts[CHAT[4][1]] == f"Caroline: {CHAT[2][1]}\nMelanie: {CHAT[3][1]}\nCaroline:"


def test_knowmind_import_reads_a_conversation_line(settings, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KNOWMIND_DATABASE_URL", settings.database.database_url)
    monkeypatch.setenv("KNOWMIND_EMBED_THREADS", "2")
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    assert cli.main(["tenant", "create", f"import-{uuid.uuid4().hex[:8]}"]) == 0
    tenant_id = capsys.readouterr().out.split()[1]
    lines = [
        json.dumps({"content": "Die Kantine öffnet um 11:30 Uhr."}),
        json.dumps({"session_id": "s-import", "messages": _messages(CHAT[:4])}),
        json.dumps({"messages": [{"content": ""}]}),
        json.dumps({"content": "Der Router in Ulm wurde ersetzt."}),
    ]
    source = tmp_path / "chat.jsonl"
    source.write_text("\n".join(lines) + "\n")
    assert cli.main(["import", str(source), "--tenant", tenant_id]) == 1
    out, err = capsys.readouterr()
    assert "6 created, 0 unchanged, 1 failed" in out, out  # 2 memories, 4 turns
    assert "line 3: messages[0].content:" in err, err
    assert cli.main(["import", str(source), "--tenant", tenant_id]) == 1
    assert "0 created, 6 unchanged, 1 failed" in capsys.readouterr().out


async def test_a_long_conversation_is_embedded_in_model_batches_each_passage_once(
    client, db, with_context
):
    """All new turns go through the one executor in full model batches (at most 32 passages and
    4,000 characters), each passage once; the measurement against the bare model is
    ``python -m benchmark.conversation_ingest`` (README, *Conversations*)."""
    from benchmark.conversation_ingest import conversation_turns, passages_of

    service, counting = with_context
    tenant = await make_tenant(client, "english")
    who = Principal(UUID(tenant.id), frozenset({"write"}), language="english")
    turns = conversation_turns(120)
    draft = ConversationDraft(
        messages=tuple(TurnDraft(content=t, speaker=s, role="user") for s, t in turns),
        session_id="long",
    )
    done = await remember_conversation(service, who, draft)
    assert done.created == 120 and await count_rows(db, "memories", tenant.id) == 120
    ingest = service.ingest
    expected = passages_of(
        turns, ingest.turn_context, ingest.chunk_target_chars, ingest.chunk_overlap_chars
    )
    batches = counting.passage_batches
    assert [p for batch in batches for p in batch] == expected  # in order, each once
    assert all(len(b) <= MAX_BATCH and sum(map(len, b)) <= MAX_BATCH_CHARS for b in batches)
    # full batches: the groups are queued ahead, so the executor packs across them
    assert len(batches) <= len(_packed(expected)) + 1, [len(b) for b in batches]


def _packed(passages: list[str]) -> list[list[str]]:
    """The passages in the fewest model batches, in order (what a bare caller could do)."""
    batches: list[list[str]] = [[]]
    for passage in passages:
        batch = batches[-1]
        if batch and (
            len(batch) == MAX_BATCH or sum(map(len, batch)) + len(passage) > MAX_BATCH_CHARS
        ):
            batches.append(batch := [])
        batch.append(passage)
    return batches


def test_a_turns_context_is_the_end_of_each_earlier_turn_then_its_speaker():
    long = "Word " * 100 + "so which one do you mean?"
    earlier = [
        Said("Hi!", "Caroline"),
        Said(long, "Melanie"),
        Said("The blue one.", None, "assistant"),
    ]
    context = turn_context(earlier, Said("Yes, that one!", "Caroline"), 2)
    assert context is not None
    first, second, own = context.split("\n")
    assert first.startswith("Melanie: …Word ") and first.endswith("so which one do you mean?")
    assert len(first) <= len("Melanie: ") + 1 + LINE_CHARS and "  " not in first
    assert (second, own) == ("assistant: The blue one.", "Caroline:")
    assert turn_passage(context, "Yes, that one!").endswith("\nCaroline: Yes, that one!")
    assert turn_context(earlier, Said("Yes, that one!", "Caroline"), 0) == "Caroline:"
    assert turn_context([], Said("No speaker"), 2) is None
    assert turn_passage(None, "No speaker") == "No speaker"
    assert turn_passage(turn_context(earlier, Said("x"), 1), "x") == "assistant: The blue one.\nx"

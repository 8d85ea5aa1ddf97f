"""POST /v1/answer with the real embedded language model (SmolLM2-135M-Instruct) over the real
recall pipeline: every method, the enhancers, citations, streaming, and what is reported when
the model cannot run. The model is tiny: these tests check what each step did and reported,
not how good the answers are."""

from __future__ import annotations

import asyncio
import json
import re
from uuid import uuid4

import pytest
from litestar.testing import AsyncTestClient

from knowmind.answer.base import Passage
from knowmind.answer.citations import cite
from knowmind.answer.methods import METHOD_NAMES, choose_method
from knowmind.answer.prompts import NO_SUPPORT
from knowmind.app import create_app
from knowmind.models.llm import LLMSetup
from knowmind.models.llm_embedded import embedded_weights
from tests.conftest import TenantAccess, count_rows, make_tenant
from tests.llm_server import llm_server
from tests.test_server_process import free_port

if embedded_weights(LLMSetup()) is None:
    pytest.skip(
        "the embedded model's weights are missing: make install fetches them "
        "(knowmind models pull-llm)",
        allow_module_level=True,
    )

FACTS = [
    ("Kantine", "The canteen in Kassel opens at half past eleven on weekdays."),
    ("Leuchtturm", "The lighthouse on Hiddensee is 28 metres tall and was built in 1888."),
    ("Backups", "Backups of the warehouse database run every night at two o'clock."),
]
SMALL = {"k": 2, "max_tokens": 48}


def passage(n: int) -> Passage:
    return Passage(uuid4(), uuid4(), f"t{n}", f"content {n}", 1.0)


def test_citations_name_only_what_the_answer_names() -> None:
    passages = [passage(1), passage(2), passage(3)]
    cited, supported = cite("It opens at 11:30 [2], see also [2, 3] and [9].", passages)
    assert [c.marker for c in cited] == [2, 3] and supported
    assert [c.passage for c in cited] == passages[1:]
    assert cite("It opens at 11:30.", passages) == ([], False)  # no source named: none given
    _, supported = cite(f"{NO_SUPPORT} [1]", passages)
    assert supported is False


def test_auto_says_why() -> None:
    assert choose_method("Compare the canteen and the lighthouse")[0] == "multi_query"
    assert choose_method("Lighthouse height?")[0] == "hyde"
    assert choose_method("When does the canteen in Kassel open?")[0] == "standard"


@pytest.fixture(scope="module")
async def answering(client: AsyncTestClient) -> TenantAccess:
    tenant = await make_tenant(client, language="english")
    for title, content in FACTS:
        body = {"title": title, "content": content}
        stored = await client.post("/v1/memories", json=body, headers=tenant.write)
        assert stored.status_code == 201, stored.text
    return tenant


async def ask(client: AsyncTestClient, tenant: TenantAccess, **body: object) -> dict:
    response = await client.post("/v1/answer", json={**SMALL, **body}, headers=tenant.read)
    assert response.status_code == 200, response.text
    return response.json()


async def test_standard_answers_from_the_passages(client, answering) -> None:
    body = await ask(client, answering, question="How tall is the lighthouse on Hiddensee?")
    assert body["method"] == "standard" and body["model"] == "smollm2-135m-instruct"
    assert body["passages"][0]["title"] == "Leuchtturm" and body["passages"][0]["marker"] == 1
    assert body["answer"] and body["degraded"] is False
    assert body["tokens"]["prompt"] > 0 and body["tokens"]["completion"] > 0
    assert {"retrieve", "generate", "total"} <= set(body["timings_ms"])
    assert body["method_details"]["retrieval"] == "recall"
    named = {int(n) for n in re.findall(r"\[(\d)\]", body["answer"]) if int(n) <= 2}
    assert {c["marker"] for c in body["citations"]} == named  # exactly what it names
    assert body["supported"] == bool(named) or NO_SUPPORT in body["answer"]


@pytest.mark.parametrize("method", ["hyde", "multi_query", "corrective", "self_rag", "auto"])
async def test_every_method_reports_what_it_did(client, answering, method) -> None:
    question = "When does the canteen in Kassel open and when do backups run?"
    body = await ask(client, answering, question=question, method=method.upper())
    assert body["method"] == method  # any case
    details = body["method_details"]
    assert details["degraded"] == body["degraded_reasons"]
    if method == "hyde":
        assert details["retrieval"] == "hyde" and details["hypothesis"]
        assert "hypothesis" in body["timings_ms"]
    elif method == "multi_query":
        assert details["queries"][0] == question and len(details["queries"]) <= 4
        assert details["retrieval"] == ("multi_query" if len(details["queries"]) > 1 else "recall")
    elif method == "corrective":
        assert isinstance(details["graded"], bool)
        if details["graded"]:
            assert 0 <= details["helpful"] <= details["of"]
    elif method == "self_rag":
        assert "evaluate" in body["timings_ms"]
        if details["evaluated"]:
            assert details["threshold_met"] == (details["score"] >= details["threshold"])
        else:
            assert details["threshold_met"] is None  # never a bogus true
    else:
        assert details["decision"] == {
            "method": "multi_query",
            "because": "the question joins or compares several things",
        }
    assert body["answer"]


async def test_raptor_says_it_had_no_tree(client, answering) -> None:
    body = await ask(client, answering, question="How tall is the lighthouse?", method="raptor")
    assert body["degraded"] is True
    assert any(r.startswith("raptor: no summary tree") for r in body["degraded_reasons"])


async def test_bad_input_names_the_field(client, answering) -> None:
    bad = await client.post(
        "/v1/answer", json={"question": "x?", "method": "magic"}, headers=answering.read
    )
    assert bad.status_code == 422 and bad.json()["field"] == "method"
    assert "multi_query" in bad.json()["detail"]
    unknown = await ask(client, answering, question="When do backups run?", llm_model="gpt-9")
    assert unknown["answer"] is None and unknown["passages"]  # retrieved, not generated
    assert unknown["degraded_reasons"] == [
        "generate: llm_model 'gpt-9' is not on this server (its model: smollm2-135m-instruct)"
    ]


async def test_enhancers(client, answering) -> None:
    long = (
        " ".join(
            f"Section {i} of the handbook covers topic number {i} in detail." for i in range(60)
        )
        + " The emergency exit of the warehouse is behind shelf 14."
    )
    stored = await client.post(
        "/v1/memories", json={"title": "Handbook", "content": long}, headers=answering.write
    )
    assert stored.status_code == 201 and stored.json()["chunks"] > 2
    question = "Where is the emergency exit of the warehouse?"
    plain = await ask(client, answering, question=question, k=1)
    wide = await ask(client, answering, question=question, k=1, parent_context=True)
    assert len(wide["passages"][0]["content"]) > len(plain["passages"][0]["content"])
    assert plain["passages"][0]["content"] in wide["passages"][0]["content"]
    short = await ask(client, answering, question=question, k=1, compress=True)
    kept = short["method_details"]["compress"]
    assert 1 <= kept["kept"] < kept["of"]
    assert "shelf 14" in short["passages"][0]["content"]
    assert len(short["passages"][0]["content"]) < len(plain["passages"][0]["content"])


async def test_streaming_sends_tokens_then_the_result(client, answering) -> None:
    body = {**SMALL, "question": "When do backups run?", "stream": True}
    async with client.stream("POST", "/v1/answer", json=body, headers=answering.read) as sse:
        assert sse.status_code == 200
        assert sse.headers["content-type"].startswith("text/event-stream")
        text = "".join([chunk async for chunk in sse.aiter_text()])
    events = re.findall(r"event: (\w+)\r?\ndata: (.*?)\r?\n\r?\n", text, re.S)
    tokens = [data for name, data in events if name == "token"]
    done = json.loads(next(data for name, data in events if name == "done"))
    assert len(tokens) > 1 and done["method_details"]["streamed"] == "live"
    assert done["answer"] and done["passages"][0]["title"] == "Backups"
    refused = await client.post(
        "/v1/answer", json={**body, "method": "magic"}, headers=answering.read
    )  # refused before the stream starts: a plain 422
    assert refused.status_code == 422 and refused.json()["field"] == "method"


async def test_without_a_model_the_passages_come_back_and_say_why(settings, embedder) -> None:
    for overrides, reason in (
        ({"llm_provider": "none"}, "no language model configured"),
        (
            {
                "llm_provider": "openai",
                "llm_base_url": f"http://127.0.0.1:{free_port()}/v1",
                "llm_model": "smollm2",
                "llm_retries": 0,
            },
            "cannot connect",
        ),
    ):
        app = create_app(settings.with_overrides(**overrides), embedder=embedder)
        async with AsyncTestClient(app=app) as other:
            tenant = await make_tenant(other)
            await other.post("/v1/memories", json={"content": FACTS[0][1]}, headers=tenant.write)
            for method in ("standard", "self_rag", "hyde"):
                body = await ask(
                    other, tenant, question="When does the canteen open?", method=method
                )  # a 200 that says what is missing, never a 500 or a "database" 503
                assert body["answer"] is None and body["degraded"] is True
                reasons = body["degraded_reasons"]
                assert any(reason in r for r in reasons), reasons
                assert "canteen" in body["passages"][0]["content"]
                if overrides["llm_provider"] == "none" and method != "standard":
                    assert f"method {method}: needs a language model" in " ".join(reasons)
            caps = (await other.get("/v1/capabilities")).json()["llm"]
            assert caps["active"] is (overrides["llm_provider"] == "openai")


async def test_the_mcp_tool_answers_alike(client, answering) -> None:
    from tests.test_mcp import call

    arguments = {"question": "How tall is the lighthouse on Hiddensee?", **SMALL}
    is_error, body = await call(client, answering.read, "knowmind_answer", arguments)
    assert not is_error, body
    assert body["method"] == "standard" and body["passages"][0]["title"] == "Leuchtturm"
    assert body["answer"] and "generate" in body["timings_ms"]
    is_error, refused = await call(
        client, answering.read, "knowmind_answer", {"question": "x?", "method": "magic"}
    )
    assert is_error and "must be one of standard" in json.dumps(refused)


async def test_a_conversation_reads_follow_ups_with_its_history(client, answering, db) -> None:
    thread = str(uuid4())
    first = await ask(
        client, answering, question="How tall is the lighthouse on Hiddensee?",
        conversation_id=thread,
    )  # fmt: skip
    assert first["conversation_id"] == thread
    assert "condense" not in first["timings_ms"]  # nothing to condense yet
    follow_up = await ask(
        client, answering, question="And when was it built?", conversation_id=thread
    )
    assert "condense" in follow_up["timings_ms"]
    standalone = follow_up["method_details"]["standalone_question"]
    if standalone is None:  # the model wrote nothing usable: said, and the question was used
        assert any(r.startswith("condense:") for r in follow_up["degraded_reasons"])
    else:
        assert standalone != "And when was it built?"
    assert await count_rows(db, "conversation_turns", answering.id) == 4
    # another token of the tenant does not see it ...
    other = await client.post(
        "/v1/answer",
        json={**SMALL, "question": "And how tall?", "conversation_id": thread},
        headers=answering.write,
    )
    assert other.status_code == 404 and "conversation_id" in other.json()["detail"]
    # ... unless it was started as shared
    shared = str(uuid4())
    await ask(
        client, answering, question="When do backups run?", conversation_id=shared,
        share_conversation=True,
    )  # fmt: skip
    joined = await client.post(
        "/v1/answer",
        json={**SMALL, "question": "And the canteen?", "conversation_id": shared},
        headers=answering.write,
    )
    assert joined.status_code == 200, joined.text


async def test_every_method_over_the_openai_protocol(settings, embedder) -> None:
    """The same flows with the same model served by a real llama.cpp server process over the
    OpenAI-compatible protocol: every method, both enhancers, a conversation and a summary tree."""
    weights = embedded_weights(LLMSetup())
    assert weights is not None
    with llm_server(weights) as base:
        over_http = settings.with_overrides(
            llm_provider="openai", llm_base_url=base, llm_model="smollm2", llm_retries=0
        )
        async with AsyncTestClient(app=create_app(over_http, embedder=embedder)) as server:
            tenant = await make_tenant(server, language="english")
            document = "\n\n".join(f"## {title}\n\n{content}" for title, content in FACTS)
            upload = {"title": "Facts", "content": document, "build_tree": True}
            stored = await server.post("/v1/documents?wait=true", json=upload, headers=tenant.write)
            assert stored.status_code == 201, stored.text
            tree_job = stored.json()["tree_job_id"]
            for _ in range(600):
                job = (await server.get(f"/v1/jobs/{tree_job}", headers=tenant.read)).json()
                if job["status"] in ("done", "failed"):
                    break
                await asyncio.sleep(0.2)
            assert job["status"] == "done", job
            question = "When does the canteen in Kassel open and when do backups run?"
            for method in METHOD_NAMES:
                body = await ask(server, tenant, question=question, method=method)
                assert body["model"] == "smollm2" and body["passages"], body
                assert not any("cannot connect" in r for r in body["degraded_reasons"])
            raptor = await ask(server, tenant, question=question, method="raptor")
            assert raptor["method_details"]["retrieval"] == "raptor"
            enhanced = await ask(
                server, tenant, question=question, compress=True, parent_context=True
            )
            assert enhanced["method_details"]["compress"]["of"] >= 1
            thread = {"conversation_id": str(uuid4())}
            await ask(server, tenant, question="How tall is the lighthouse?", **thread)
            follow = await ask(server, tenant, question="When was it built?", **thread)
            assert "condense" in follow["timings_ms"]

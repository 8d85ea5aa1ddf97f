"""The Python client (``knowmind.client``) against a real server over HTTP: typed results,
pagination, errors naming the field, retries on 429 (the server here allows 5 requests a second
per token), the async twin, and ``knowmind recall --url --token``."""

from __future__ import annotations

import inspect
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from knowmind.client import AsyncKnowmind, Knowmind, KnowmindAPIError, RetryPolicy
from tests.test_openapi_docs import openapi, operations
from tests.test_server_process import served, tenant_token

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "kmadmin_sdk-test-admin-token-for-this-test-only"
FACTS = [
    "Anna Schmidt leitet das Projekt Nordlicht in München.",
    "Der Server web-01 wird jeden Sonntag um drei Uhr gepatcht.",
    "Die Kantine öffnet werktags um halb zwölf.",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("sdk")
    with served(root, ADMIN_TOKEN, rate_limit_per_second="5", rate_limit_burst="5") as base:
        yield base, tenant_token(base, ADMIN_TOKEN, "sdk", ["write"])


def test_the_blocking_client(server):
    base, token = server
    with Knowmind(base, token) as km:
        stored = [km.remember(fact, tags=["sdk"]) for fact in FACTS]
        assert [s.status for s in stored] == ["created"] * 3
        assert km.remember(FACTS[0]).status == "unchanged"
        answer = km.recall("Wer leitet Nordlicht?", k=3)
        assert answer.results[0].memory_id == stored[0].id and not answer.degraded
        scores = [hit.score for hit in answer.results]
        assert answer.ranker == "learned" and all(0.0 <= s <= 1.0 for s in scores)
        cut = km.recall("Wer leitet Nordlicht?", k=3, min_score=(scores[0] + scores[1]) / 2)
        assert [hit.memory_id for hit in cut.results] == [stored[0].id]
        assert answer.results[0].content == FACTS[0] and answer.timings_ms["total"] > 0
        listed = list(km.memories(page_size=2))  # two pages, the cursor followed
        assert {m.id for m in listed} == {s.id for s in stored}
        assert km.memory(stored[1].id).content == FACTS[1]
        batch = km.remember_many([{"content": "Ein neuer Fakt."}, {"content": ""}])
        assert (batch.created, batch.failed) == (1, 1)
        assert batch.results[1].error is not None and batch.results[1].error["field"] == "content"
        with pytest.raises(KnowmindAPIError) as refused:
            km.recall("Wer?", k=99)
        assert refused.value.status == 422 and refused.value.field == "k"
        assert km.stats()["memories"] == 4


def test_event_time_speaker_and_scopes_pass_through_and_come_back_typed(server):
    base, token = server
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    fact = "Caroline erzählte, dass sie im Mai einen Töpferkurs in Lissabon besucht."
    with Knowmind(base, token) as km:
        stored = km.remember(
            fact,
            occurred_at=when,
            speaker="Caroline",
            role="user",
            user_id="u-sdk",
            session_id="s1",
        )
        memory = km.memory(stored.id)
        assert (memory.occurred_at, memory.speaker, memory.role) == (when, "Caroline", "user")
        assert (memory.user_id, memory.agent_id, memory.session_id) == ("u-sdk", None, "s1")
        assert [m.id for m in km.memories(user_id="u-sdk")] == [stored.id]
        assert [m.id for m in km.memories(occurred_before=datetime(2023, 6, 1))] == [stored.id]
        found = km.recall("Töpferkurs in Lissabon", k=3, filters={"session_id": "s1"})
        assert [hit.memory_id for hit in found.results] == [stored.id]
        assert (found.results[0].occurred_at, found.results[0].speaker) == (when, "Caroline")
        later = km.recall(
            "Töpferkurs in Lissabon", filters={"occurred_after": datetime(2024, 1, 1)}
        )
        assert stored.id not in {hit.memory_id for hit in later.results}
        with pytest.raises(KnowmindAPIError) as refused:
            km.remember(fact, occurred_at="9999-12-31T23:59:00-14:00")
        assert refused.value.status == 422 and refused.value.field == "occurred_at"


def test_retries_on_429_and_what_happens_without(server):
    base, token = server
    with Knowmind(base, token, retry=RetryPolicy(retries=0)) as eager:
        with pytest.raises(KnowmindAPIError) as limited:
            for _ in range(12):
                eager.stats()
        assert limited.value.status == 429
    time.sleep(1.5)  # the bucket refills
    started = time.monotonic()
    with Knowmind(base, token) as patient:
        for _ in range(12):
            patient.stats()  # the refused ones are retried after Retry-After
    assert time.monotonic() - started >= 1.0  # it did have to wait


async def test_the_async_client(server):
    base, token = server
    async with AsyncKnowmind(base, token) as km:
        stored = await km.remember("Das Lager Kassel schließt freitags um 18 Uhr.")
        answer = await km.recall("Wann schließt das Lager in Kassel?", k=2)
        assert answer.results[0].memory_id == stored.id
        seen = [m.id async for m in km.memories(page_size=2)]
        assert stored.id in seen and len(seen) == len(set(seen))
        document = await km.upload_document("# Notiz\n\nKurzer Text.", "Notiz")
        assert document.status == "created" and document.id is not None


def test_the_cli_recalls_over_http(server):
    base, token = server
    answer = subprocess.run(
        [sys.executable, "-m", "knowmind", "recall", "Wann wird web-01 gepatcht?", "-k", "1"],
        env={"PATH": "/usr/bin:/bin", "KNOWMIND_URL": base, "KNOWMIND_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    assert "Sonntag um drei Uhr" in answer.stdout and "1 results in" in answer.stdout


def test_the_cli_imports_jsonl_over_http(server, tmp_path):
    """``knowmind import FILE --url --token``: batches through the server, a line that cannot be
    stored is reported by its number and the rest is stored; a second run stores nothing twice."""
    import json

    base, _ = server
    token = tenant_token(base, ADMIN_TOKEN, "import", ["read", "write"])
    lines = [
        json.dumps({"content": f"Lager {i} liegt in Halle {i % 7}.", "tags": ["lager"]})
        for i in range(140)
    ]
    lines[0] = json.dumps({"content": "Die Ersatzteile der Turbinen liegen in Halle Nord."})
    lines[10] = "{not json"  # line 11
    lines[50] = json.dumps(["an", "array"])  # line 51
    lines[120] = json.dumps({"content": "   "})  # line 121
    source = tmp_path / "lager.jsonl"
    source.write_text("\n".join(lines) + "\n\n")
    env = {"PATH": "/usr/bin:/bin", "KNOWMIND_URL": base, "KNOWMIND_TOKEN": token}

    def run_import() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "knowmind", "import", str(source)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    first = run_import()
    assert first.returncode == 1, first.stderr  # some lines failed
    assert "137 created, 0 unchanged, 3 failed" in first.stdout, first.stdout
    assert "line 11: malformed JSON" in first.stderr
    assert "line 51: item: must be a JSON object" in first.stderr
    assert "line 121: content:" in first.stderr
    assert "140/140" in first.stderr  # the progress bar reached the end
    with Knowmind(base, token) as km:
        assert km.stats()["memories"] == 137
        top = km.recall("Wo liegen die Turbinen-Ersatzteile?", k=1).results[0]
        assert top.content == "Die Ersatzteile der Turbinen liegen in Halle Nord."
    again = run_import()
    assert "0 created, 137 unchanged, 3 failed" in again.stdout, again.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "knowmind", "import", str(source)],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2 and "--url and --token" in missing.stderr


def test_a_conversation_through_the_blocking_client_and_knowmind_import(server, tmp_path):
    """``remember_conversation`` (each message a memory, typed result; again: unchanged) and a
    conversation line of ``knowmind import`` over HTTP beside memory lines."""
    import json

    base, _ = server
    token = tenant_token(base, ADMIN_TOKEN, "conversation", ["read", "write"])
    messages = [
        {"speaker": "Caroline", "role": "user", "content": "Shall we meet at the harbour cafe?"},
        {"speaker": "Melanie", "role": "user", "content": "The one with the blue door?"},
        {"speaker": "Caroline", "role": "user", "content": "Yes, that one!"},
    ]
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    with Knowmind(base, token) as km:
        done = km.remember_conversation(messages, session_id="s-sdk", occurred_at=when)
        assert (done.status, done.created, done.session_id) == ("created", 3, "s-sdk")
        assert [t.turn for t in done.turns] == [0, 1, 2]
        assert {(s.name, s.entity_class) for s in done.speakers} == {
            ("Caroline", "Person"),
            ("Melanie", "Person"),
        }
        reply = km.memory(done.turns[2].id)
        assert (reply.content, reply.speaker, reply.session_id) == (
            "Yes, that one!",
            "Caroline",
            "s-sdk",
        )
        assert reply.occurred_at == when
        again = km.remember_conversation(messages, session_id="s-sdk", occurred_at=when)
        assert (again.status, again.unchanged) == ("unchanged", 3)
        with pytest.raises(KnowmindAPIError) as refused:
            km.remember_conversation([{"content": " "}])
        assert refused.value.status == 422 and refused.value.field == "messages[0].content"
    lines = [
        json.dumps({"content": "Die Kantine öffnet um 11:30 Uhr."}),
        json.dumps({"session_id": "s-import", "messages": messages}),
        json.dumps({"session_id": "s-bad", "messages": [{"content": "x", "role": ""}]}),
    ]
    source = tmp_path / "chat.jsonl"
    source.write_text("\n".join(lines) + "\n")
    env = {"PATH": "/usr/bin:/bin", "KNOWMIND_URL": base, "KNOWMIND_TOKEN": token}
    imported = subprocess.run(
        [sys.executable, "-m", "knowmind", "import", str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert imported.returncode == 1, imported.stderr
    assert "4 created, 0 unchanged, 1 failed" in imported.stdout, imported.stdout
    assert "line 3: messages[0].role:" in imported.stderr, imported.stderr
    with Knowmind(base, token) as km:
        assert len(list(km.memories())) == 3 + 1 + 3


# -- the SDK covers the API ---------------------------------------------------------------------

#: Every REST operation a tenant token may call → the SDK methods that call it. The rule: the
#: operations under /v1/ except /v1/admin/ (the server admin's); health, readiness, metrics,
#: the console, the reference, MCP (its own protocol) and knowmind's compatible upload
#: (/api/documents, for knowmind's own clients) are not part of the SDK.
SDK_METHODS: dict[str, tuple[str, ...]] = {
    "GET /v1/capabilities": ("capabilities",),
    "GET /v1/stats": ("stats",),
    "POST /v1/memories": ("remember",),
    "POST /v1/memories/batch": ("remember_many",),
    "POST /v1/memories/conversation": ("remember_conversation",),
    "GET /v1/memories": ("memories",),
    "GET /v1/memories/{memory_id}": ("memory",),
    "DELETE /v1/memories/{memory_id}": ("delete_memory", "erase_memory"),
    "GET /v1/memories/{memory_id}/history": ("history",),
    "POST /v1/memories/{memory_id}/supersede": ("supersede", "update_fact"),
    "POST /v1/recall": ("recall", "recall_at_time"),
    "POST /v1/answer": ("answer", "answer_stream"),
    "POST /v1/documents": ("upload_document",),
    "DELETE /v1/documents/{document_id}": ("delete_document", "erase_document"),
    "GET /v1/jobs/{job_id}": ("job", "wait_for_job"),
    "POST /v1/entities": ("upsert_entity",),
    "GET /v1/entities": ("entities",),
    "GET /v1/entities/{entity_id}": ("entity",),
    "POST /v1/relations": ("link",),
    "DELETE /v1/relations": ("unlink",),
    "GET /v1/nodes/{node_id}/relations": ("relations",),
    "GET /v1/schema": ("schema",),
    "POST /v1/schema/predicates": ("add_predicate",),
    "GET /v1/settings": ("settings",),
    "PATCH /v1/settings": ("change_settings",),
    "POST /v1/tokens": ("create_token",),
    "DELETE /v1/users/{user_id}": ("erase_user",),
}


def tenant_operations(document: dict) -> set[str]:
    return {
        key
        for key, _ in operations(document)
        if key.split(" ")[1].startswith("/v1/") and not key.split(" ")[1].startswith("/v1/admin")
    }


def missing_sdk_methods(document: dict, clients: tuple[type, ...]) -> list[str]:
    """Tenant operations without an SDK entry or whose methods a client lacks, and entries
    for operations the API no longer has."""
    wanted = tenant_operations(document)
    found = [f"{key}: no SDK method" for key in sorted(wanted - SDK_METHODS.keys())]
    found += [f"{key}: not an operation any more" for key in sorted(SDK_METHODS.keys() - wanted)]
    for key, methods in SDK_METHODS.items():
        for client in clients:
            found += [f"{key}: {client.__name__}.{m}" for m in methods if not hasattr(client, m)]
    return found


def test_every_tenant_operation_has_a_method_in_both_clients():
    assert missing_sdk_methods(openapi(), (Knowmind, AsyncKnowmind)) == []
    assert len(tenant_operations(openapi())) == len(SDK_METHODS) >= 27


def test_the_clients_are_twins():
    """The same public methods; the async client's are coroutines or async iterators."""
    public = {n for n in dir(Knowmind) if not n.startswith("_")}
    assert public - {"close", "retry"} == {
        n for n in dir(AsyncKnowmind) if not n.startswith("_")
    } - {"aclose", "retry"}
    for name in public - {"close", "retry"}:
        method = getattr(AsyncKnowmind, name)
        assert inspect.iscoroutinefunction(method) or name in ("memories", "answer_stream"), name
    assert inspect.isasyncgenfunction(AsyncKnowmind.memories)


def test_the_coverage_check_can_fail():
    document = {"paths": {"/v1/things": {"get": {}}, "/v1/admin/things": {"get": {}}}}

    class Partial:
        capabilities = stats = None

    missing = missing_sdk_methods(document, (Partial,))
    assert "GET /v1/things: no SDK method" in missing
    assert "GET /v1/stats: not an operation any more" in missing
    assert "POST /v1/recall: Partial.recall" in missing
    assert not any("admin" in line for line in missing)


@pytest.fixture(scope="module")
def admin_token(server) -> str:
    base, _ = server
    return tenant_token(base, ADMIN_TOKEN, "sdk-admin", ["admin"])


def test_facts_over_time_history_and_erasure(server, admin_token):
    """supersede / update_fact, history, recall_at_time (as_of), delete and erase with their
    receipts, erase_user — against the server."""
    base, _ = server
    with Knowmind(base, admin_token) as km:
        old = km.remember("Bruno wohnt in Hamburg.", user_id="u-bruno")
        time.sleep(0.05)
        between = datetime.now(UTC)  # the old fact held then
        time.sleep(0.05)
        new = km.supersede(old.id, "Bruno wohnt in Leipzig.", update_reason="umgezogen")
        assert new.status == "created" and new.id != old.id
        assert km.memory(old.id).valid_to is not None and km.memory(new.id).valid_to is None
        events = km.history(old.id).events
        assert [(e.event, e.memory_id, e.reason) for e in events] == [
            ("superseded_by", new.id, "umgezogen")
        ]
        then = km.recall_at_time("Wo wohnt Bruno?", as_of=between, k=3)
        now = km.recall("Wo wohnt Bruno?", k=3)
        assert then.results[0].memory_id == old.id and now.results[0].memory_id == new.id
        again = km.update_fact(new.id, "Bruno wohnt in Dresden.")
        assert [(e.event, e.memory_id) for e in km.history(new.id).events] == [
            ("supersedes", old.id),
            ("superseded_by", again.id),
        ]
        doomed = km.remember("Der Schlüssel liegt unter der Matte.")
        assert km.delete_memory(doomed.id) is None
        with pytest.raises(KnowmindAPIError) as gone:
            km.memory(doomed.id)
        assert gone.value.status == 404
        erased = km.erase_memory(km.remember("Das Passwort ist Fischbrötchen.").id)
        assert erased.erased["memories"] == 1 and erased.erased["chunks"] >= 1
        assert erased.audit_id is not None
        receipt = km.erase_user("u-bruno")
        assert receipt.user_id == "u-bruno" and receipt.erased["memories"] == 3
        assert list(km.memories(user_id="u-bruno")) == []


def test_the_graph_through_the_client(server, admin_token):
    base, _ = server
    with Knowmind(base, admin_token) as km:
        anna = km.upsert_entity("Anna Schmidt", "Person", aliases=["A. Schmidt"])
        assert anna.created is True and km.upsert_entity("Anna Schmidt", "Person").created is False
        firm = km.upsert_entity("Nordwind GmbH", "Organization")
        predicate = km.add_predicate("SDK_ADVISES", ["Person"], ["Organization"])
        assert predicate["name"] == "SDK_ADVISES"
        assert "SDK_ADVISES" in {p["name"] for p in km.schema()["predicates"]}
        edge = km.link(anna.id, firm.id, "SDK_ADVISES", confidence=0.9)
        relations = km.relations(anna.id)
        assert [(r.predicate, r.direction, r.node.id, r.edge_id) for r in relations] == [
            ("SDK_ADVISES", "out", firm.id, edge.edge_id)
        ]
        assert [hit.id for hit in km.entities("Schmidt", entity_class="Person")] == [anna.id]
        assert km.entity(firm.id).name == "Nordwind GmbH"
        assert km.unlink(anna.id, firm.id, "SDK_ADVISES") >= 1
        assert km.relations(anna.id) == []


def test_documents_jobs_settings_tokens_and_capabilities(server, admin_token):
    base, _ = server
    with Knowmind(base, admin_token) as km:
        document = km.upload_document("# Handbuch\n\nDie Pumpe P-7 wird monatlich geprüft.")
        assert document.status == "created" and document.id is not None
        if document.job_id is not None:
            assert km.wait_for_job(document.job_id).status == "done"
        assert km.erase_document(document.id).erased["documents"] == 1
        other = km.upload_document("Zweites Dokument.", "Zweites", wait=True)
        assert other.id is not None and km.delete_document(other.id) is None
        assert km.settings().multi_query is True
        changed = km.change_settings(multi_query=False)
        assert changed.multi_query is False and km.settings().multi_query is False
        assert km.change_settings(multi_query=None).multi_query is True  # reset
        token = km.create_token(["read"], user_id="u-read")
        assert token.token.startswith("kmt_") and token.user_id == "u-read"
        with Knowmind(base, token.token) as reader, pytest.raises(KnowmindAPIError) as refused:
            reader.remember("Darf ich nicht.")
        assert refused.value.status == 403
        assert "embedder" in km.capabilities()


def test_answers_and_their_stream(server, admin_token):
    """``answer`` and ``answer_stream``: the stream is token events, then done with the same
    typed result (without a language model on the host: no tokens, the answer null)."""
    base, _ = server
    with Knowmind(base, admin_token) as km:
        km.remember("Die Kantine öffnet werktags um halb zwölf.", wait=True)
        answer = km.answer("Wann öffnet die Kantine?", max_tokens=16)
        assert answer.passages and answer.passages[0].content.startswith("Die Kantine")
        events = list(km.answer_stream("Wann öffnet die Kantine?", max_tokens=16))
        assert [e.event for e in events[:-1]] == ["token"] * (len(events) - 1)
        done = events[-1]
        assert done.event == "done" and done.result is not None
        assert done.result.passages[0].memory_id == answer.passages[0].memory_id
        if done.result.answer is not None:
            assert "".join(e.text for e in events[:-1]).strip()
        with pytest.raises(KnowmindAPIError) as refused:
            list(km.answer_stream(" "))
        assert refused.value.status == 422 and refused.value.field == "question"


async def test_the_async_client_covers_the_same_operations(server, admin_token):
    base, _ = server
    async with AsyncKnowmind(base, admin_token) as km:
        old = await km.remember("Clara leitet das Labor in Jena.", user_id="u-clara")
        new = await km.supersede(old.id, "Clara leitet das Labor in Erfurt.")
        assert (await km.history(new.id)).events[0].memory_id == old.id
        found = await km.recall_at_time("Wer leitet das Labor?", as_of=datetime.now(UTC))
        assert found.results[0].memory_id == new.id
        events = [e async for e in km.answer_stream("Wer leitet das Labor?", max_tokens=16)]
        assert events[-1].event == "done" and events[-1].result is not None
        assert (await km.answer("Wer leitet das Labor?", max_tokens=16)).passages
        lab = await km.upsert_entity("Zeta Labor SDK", "Organization")
        assert (await km.entity(lab.id)).id == lab.id
        assert lab.id in {hit.id for hit in await km.entities("Zeta Labor")}
        assert await km.relations(lab.id, closed=True) == []
        assert (await km.change_settings(multi_query=False)).multi_query is False
        assert (await km.change_settings(multi_query=None)).multi_query is True
        assert (await km.settings()).multi_query is True
        token = await km.create_token(["read"])
        assert token.user_id is None and "read" in token.scopes
        assert (await km.erase_user("u-clara")).erased["memories"] == 2
        assert "memories" in await km.stats() and await km.capabilities()


async def test_the_server_admin_exports_a_tenant(server):
    """export_tenant (sync and async): the tenant's archive records, filtered by end user."""
    import httpx

    base, _ = server
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    made = httpx.post(f"{base}/v1/admin/tenants", json={"name": "sdk-export"}, headers=admin)
    tenant_id = made.json()["id"]
    issued = httpx.post(
        f"{base}/v1/admin/tenants/{tenant_id}/tokens", json={"scopes": ["write"]}, headers=admin
    ).json()["token"]
    with Knowmind(base, issued) as km:
        km.remember("Carla leitet das Lager in Kassel.", user_id="u-carla")
        km.remember("Die Kantine öffnet um acht.")
    with Knowmind(base, ADMIN_TOKEN) as km:
        every = km.export_tenant(tenant_id)
        carla = km.export_tenant(tenant_id, user_id="u-carla")
    assert every[0]["type"] == "header" and every[-1]["type"] == "trailer"
    contents = sorted(r["content"] for r in every if r["type"] == "memory")
    assert contents == ["Carla leitet das Lager in Kassel.", "Die Kantine öffnet um acht."]
    assert [r["content"] for r in carla if r["type"] == "memory"] == [contents[0]]
    async with AsyncKnowmind(base, ADMIN_TOKEN) as km:
        again = await km.export_tenant(tenant_id)  # the same records; the header's time moves
    assert [r for r in again if r["type"] == "memory"] == [
        r for r in every if r["type"] == "memory"
    ]
    with pytest.raises(KnowmindAPIError) as refused, Knowmind(base, issued) as km:
        km.export_tenant(tenant_id)  # a tenant token is not the server admin
    assert refused.value.status in (401, 403)

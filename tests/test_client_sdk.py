"""The Python client (``knowmind.client``) against a real server over HTTP: typed results,
pagination, errors naming the field, retries on 429 (the server here allows 5 requests a second
per token), the async twin, and ``knowmind recall --url --token``."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from knowmind.client import AsyncKnowmind, Knowmind, KnowmindAPIError, RetryPolicy
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

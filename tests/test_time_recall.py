"""Time-aware recall on real conversation data (LoCoMo, read from ../shared/datasets like the
benchmark): a question with a relative time ("last week", "letzte Woche") at a given reference
time ranks a turn of that week first; explain shows the resolved window; without a time in the
question the stage makes no query."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import TenantAccess

DATASETS = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets"
LOCOMO = DATASETS / "locomo" / "locomo_conv2-9.json"
SESSIONS = ("session_1", "session_2", "session_3", "session_4", "session_5")


def _turns() -> list[dict]:
    if not LOCOMO.exists():
        pytest.skip(f"the LoCoMo file is not here ({LOCOMO}): see ../shared/datasets/README.md")
    talk = json.loads(LOCOMO.read_text())[0]["conversation"]
    turns = []
    for session in SESSIONS:
        when = datetime.strptime(talk[f"{session}_date_time"], "%I:%M %p on %d %B, %Y")
        for turn in talk[session]:
            turns.append(
                {
                    "content": turn["text"],
                    "speaker": turn["speaker"],
                    "occurred_at": when.replace(tzinfo=UTC).isoformat(),
                    "session_id": session,
                    "source": turn["dia_id"],
                }
            )
    return turns


async def _store(client, tenant: TenantAccess, turns: list[dict]) -> None:
    for start in range(0, len(turns), 50):
        done = await client.post(
            "/v1/memories/batch", json={"items": turns[start : start + 50]}, headers=tenant.write
        )
        assert done.status_code in (200, 201, 207), done.text


async def _explained(client, tenant: TenantAccess, question: str, k: int) -> dict:
    found = await client.post(
        "/v1/recall", json={"query": question, "k": k, "explain": True}, headers=tenant.read
    )
    assert found.status_code == 200, found.text
    return found.json()


async def test_a_relative_time_ranks_the_turns_of_that_week_first(client, tenant):
    turns = _turns()
    await _store(client, tenant, turns)
    # session 4 was on 9 January 2023 (a Monday); a week later "last week" is that week
    reference = datetime(2023, 1, 16, 12, 0, tzinfo=UTC)
    for question in ("What did Maria do last week?", "Was hat Maria letzte Woche gemacht?"):
        found = await client.post(
            "/v1/recall",
            json={
                "query": question,
                "k": 3,
                "reference_time": reference.isoformat(),
                "explain": True,
            },
            headers=tenant.read,
        )
        assert found.status_code == 200, found.text
        body = found.json()
        window = body["explain"]["time_window"]
        assert window["from"].startswith("2023-01-09") and window["to"].startswith("2023-01-16")
        top = body["results"][0]
        occurred = datetime.fromisoformat(top["occurred_at"])
        assert reference - timedelta(days=7) <= occurred < reference, (question, top)
        assert top["stages"]["time"] is not None


async def test_without_a_time_the_time_stage_stays_out(client, tenant):
    await _store(client, tenant, _turns()[:20])
    body = await _explained(client, tenant, "What does Maria volunteer for?", 3)
    assert body["explain"]["time_window"] is None
    assert all(hit["stages"]["time"] is None for hit in body["results"])


async def test_a_when_question_searches_what_states_a_time(client, tenant):
    """A "when" question names no time: the time stage searches only the memories whose text states
    one (``memories.states_time``, set on write)."""
    stating = ("I adopted a puppy named Toby last week.", "My sister visited me yesterday.")
    plain = ("Toby is a golden retriever who loves the park.", "The park has a big meadow.")
    await _store(client, tenant, [{"content": c, "speaker": "Andrew"} for c in stating + plain])
    body = await _explained(client, tenant, "When did Andrew adopt Toby?", 4)
    assert body["explain"]["time_window"] is None
    by_time = {hit["content"] for hit in body["results"] if hit["stages"]["time"] is not None}
    assert stating[0] in by_time
    assert by_time <= set(stating), by_time

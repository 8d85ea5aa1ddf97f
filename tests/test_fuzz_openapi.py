"""The schema-based fuzzer (schemathesis) against the real server over HTTP: every check it has
(no 5xx, every status documented, responses matching their schemas, schema-valid requests
accepted and schema-violating ones refused), with the exceptions tests/fuzz/schemathesis.toml
states and explains. Bounded for `make test`; `make fuzz` runs it with more examples.

Two passes: a tenant admin token (the tenant routes; the server-admin routes answer 403) and the
server admin token (the server-admin routes; the tenant routes answer 403). The server runs on
an embedded PostgreSQL of its own, so the tenants the fuzzer creates touch no other test.

It runs without a language model (``KNOWMIND_LLM_PROVIDER=none``): ``/v1/answer`` then retrieves
and answers ``answer: null`` with the reason — every status, schema and stream of it is fuzzed —
while generation itself (seconds per case on the CPU model, up to 2,048 tokens the fuzzer may
ask for) is tested in tests/test_answer.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_server_process import served, tenant_token

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).parent / "fuzz" / "schemathesis.toml"
HOOKS = Path(__file__).parent / "fuzz" / "hooks.py"  # integers spelled as integers
ADMIN_TOKEN = "kmadmin_fuzzer-admin-token-for-this-test-only"
EXAMPLES = int(os.environ.get("KNOWMIND_FUZZ_EXAMPLES", "15"))
SEED = os.environ.get("KNOWMIND_FUZZ_SEED", "20261203")


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fuzz")
    with served(root, ADMIN_TOKEN, llm_provider="none") as base:
        yield base
    log = (root / "log" / "stderr").read_text()
    assert "request.unhandled_error" not in log, "the server logged an unhandled error"


def _fuzz(base: str, token: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(Path(sys.executable).parent / "st"),
        "--config-file",
        str(CONFIG),
        "run",
        f"{base}/schema/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        SEED,
        "--phases",
        "examples,coverage,fuzzing",
        "--workers",
        "1",
        "--no-color",
        "--generation-database",
        "none",
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=900, check=False, env=env
    )


@pytest.mark.parametrize("who", ["tenant", "server-admin"])
def test_fuzzer_finds_no_server_error_and_no_undocumented_status(live_server: str, who: str):
    if who == "server-admin":
        token = ADMIN_TOKEN
    else:
        token = tenant_token(live_server, ADMIN_TOKEN, "fuzz", ["admin"])
    result = _fuzz(live_server, token)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-12000:]
    operations = re.search(r"Selected: (\d+)/(\d+)\s+Tested: (\d+)", report)
    assert operations is not None, report[-3000:]
    assert operations.group(1) == operations.group(2) == operations.group(3)  # every route
    assert int(operations.group(3)) >= 30
    cases = re.search(r"(\d+) generated, (\d+) passed", report)
    assert cases is not None and cases.group(1) == cases.group(2), report[-3000:]
    assert int(cases.group(1)) >= 20 * EXAMPLES

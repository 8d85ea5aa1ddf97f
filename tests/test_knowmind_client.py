"""The official knowmind command-line client (Node), unmodified, against the real server over
HTTP: login, health, stats, upload (German and English), search, sync of a folder (twice, then
after an edit) and its MCP stdio bridge (initialize, tools/list, tools/call), asserting on what
it prints. The client is used from ``../shared/clients/knowmind-cli`` (``KNOWMIND_CLIENT_DIR``
points elsewhere); it is never copied into this repository.

Its default is to embed on the client with Xenova/multilingual-e5-large through
``@huggingface/transformers``, which is not installed here: the client says so and falls back to
letting the server embed (its own documented fallback)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.test_server_process import served, tenant_token

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "kmadmin_client-test-admin-token-for-this-test"
GERMAN = """# Betriebshandbuch Kassel

Das Lager in Kassel ist werktags von sechs bis zweiundzwanzig Uhr besetzt. Die Leitung hat
Frau Petra Lang. Backups der Lagerdatenbank laufen jede Nacht um zwei Uhr.
"""
ENGLISH = """# Release checklist

Before every release the on-call engineer, Tom Becker, runs the smoke tests on the staging
cluster in Frankfurt and signs off in the release ticket.
"""


def _client_dir() -> Path | None:
    configured = os.environ.get("KNOWMIND_CLIENT_DIR")
    if configured:
        return Path(configured)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "clients" / "knowmind-cli"
        if (candidate / "bin" / "knowmind.js").exists():
            return candidate
    return None


CLIENT = _client_dir()
NODE = shutil.which("node")
if NODE is None:
    pytest.skip("node is not installed: the knowmind client needs it", allow_module_level=True)
if CLIENT is None:
    pytest.skip(
        "the knowmind client is not in ../shared/clients/knowmind-cli (set KNOWMIND_CLIENT_DIR)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("client")
    with served(root, ADMIN_TOKEN) as base:
        yield base, tenant_token(base, ADMIN_TOKEN, "client", ["write"]), root


def _env(root: Path) -> dict[str, str]:
    home = root / "home"
    home.mkdir(exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMIND_")}
    return {**keep, "HOME": str(home), "USERPROFILE": str(home)}


def run(
    root: Path, *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    assert NODE is not None and CLIENT is not None
    return subprocess.run(
        [NODE, str(CLIENT / "bin" / "knowmind.js"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(root),
        cwd=cwd or root,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Fehler:" not in result.stderr, result.stderr
    return result.stdout


def test_the_client_logs_in_uploads_searches_and_syncs(server):
    base, token, root = server
    assert token.startswith("kmt_")  # the only form the client accepts
    login = ok(run(root, "login", "--token", token, "--api", base))
    assert "verifiziert … ok" in login and "Token gespeichert" in login

    health = json.loads(ok(run(root, "health")))
    assert health["postgres"]["status"] == "ok"
    assert set(health["job_worker"]) >= {"pending_jobs", "failed_jobs"}

    (root / "handbuch.md").write_text(GERMAN)
    (root / "release.md").write_text(ENGLISH)
    for name, title in (("handbuch.md", "Handbuch Kassel"), ("release.md", "Release checklist")):
        uploaded = ok(run(root, "upload", name, "--title", title))
        chunks = re.search(r"Indexiert: (\d+) Chunks \(Provider server\)\.", uploaded)
        assert chunks is not None and int(chunks.group(1)) >= 1, uploaded
    again = ok(run(root, "upload", "handbuch.md", "--title", "Handbuch Kassel"))
    assert "Unverändert/Duplikat" in again

    stats = json.loads(ok(run(root, "stats")))
    assert stats["documents"] == 2

    found = ok(run(root, "search", "Wer leitet das Lager in Kassel?", "-k", "3"))
    assert re.search(r"#1  Handbuch Kassel  \(score [\d.]+\)", found), found
    assert "Petra Lang" in found and re.search(r"\d+ Treffer in [\d.]+ ms\.", found)
    english = ok(run(root, "search", "Who signs off a release?"))
    assert re.search(r"#1  Release checklist ", english), english

    notes = root / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Einkauf\n\nDer Einkauf bestellt Papier immer am Montag.\n")
    (notes / "b.txt").write_text("The canteen serves vegetarian lasagne on Tuesdays.\n")
    first = ok(run(root, "sync", str(notes)))
    assert "Fertig: 2 hochgeladen, 0 unverändert, 0 fehlerhaft." in first
    second = ok(run(root, "sync", str(notes)))
    assert "Fertig: 0 hochgeladen, 2 unverändert, 0 fehlerhaft." in second
    (notes / "a.md").write_text("# Einkauf\n\nDer Einkauf bestellt Papier jetzt am Freitag.\n")
    third = ok(run(root, "sync", str(notes)))
    assert "Fertig: 1 hochgeladen, 1 unverändert, 0 fehlerhaft." in third
    manifest = json.loads((notes / ".knowmind-manifest.json").read_text())
    edited = manifest["files"]["a.md"]["documentId"]
    after = ok(run(root, "search", "Wann bestellt der Einkauf Papier?", "-k", "1"))
    assert "Freitag" in after and "Montag" not in after  # replaced, not a second copy
    auth = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{base}/v1/stats", headers=auth).json()["documents"] == 4
    assert edited  # the manifest keeps the document id the server answered


def test_the_mcp_stdio_bridge(server):
    base, token, root = server
    ok(run(root, "login", "--token", token, "--api", base))
    frames = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "knowmind_store_memory",
                "arguments": {"content": "Die Kantine in Kassel öffnet um halb zwölf."},
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {
                "name": "knowmind_recall",
                "arguments": {"query": "Wann öffnet die Kantine?", "k": 2},
            },
        },
    ]
    stdin = "".join(json.dumps(frame) + "\n" for frame in frames)
    bridge = ok(run(root, "mcp", stdin=stdin))
    replies = {reply["id"]: reply for reply in map(json.loads, bridge.splitlines())}
    assert set(replies) == {1, 2, 3, 4}, bridge
    init = replies[1]["result"]
    assert init["serverInfo"]["name"] == "knowmind" and "knowmind_recall" in init["instructions"]
    names = {tool["name"] for tool in replies[2]["result"]["tools"]}
    assert {"knowmind_recall_memories", "knowmind_recall", "knowmind_store_memory"} <= names
    stored = json.loads(replies[3]["result"]["content"][0]["text"])
    assert stored["status"] == "created"
    recalled = json.loads(replies[4]["result"]["content"][0]["text"])
    assert recalled["hits"][0]["content"].startswith("Die Kantine in Kassel")
    assert recalled["hits"][0]["metadata"]["source_id"] == stored["id"]
    assert recalled["latency_ms"] > 0


def test_the_init_hook_injects_the_hits_as_text(server):
    """``knowmind init --client claude-code`` writes a UserPromptSubmit hook that asks
    ``knowmind_recall`` before each question and prints the hits as lines of text (before the
    server answered ``hits`` it printed the raw JSON)."""
    base, token, root = server
    fact = "Die Poststelle im Werk Göttingen leitet Frau Ilse Brandt seit dem Frühjahr."
    auth = {"Authorization": f"Bearer {token}"}
    stored = httpx.post(f"{base}/v1/memories?wait=true", json={"content": fact}, headers=auth)
    assert stored.status_code == 201, stored.text
    project = root / "project"
    project.mkdir()
    ok(run(root, "init", "--client", "claude-code", "--token", token, "--api", base, cwd=project))
    hook = project / ".claude" / "hooks" / "knowmind_recall.mjs"
    assert hook.exists() and "knowmind" in (project / "CLAUDE.md").read_text()
    assert NODE is not None
    prompt = json.dumps({"prompt": "Wer leitet die Poststelle in Göttingen?"})
    injected = subprocess.run(
        [NODE, str(hook)],
        input=prompt,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(root),
        cwd=project,
        check=False,
    )
    assert injected.returncode == 0, injected.stderr
    out = injected.stdout
    assert "knowmind RECALL (auto)" in out, out
    first = next(line for line in out.splitlines() if line.startswith("• "))
    assert re.match(r"• Die Poststelle im Werk .* \((1\.00|0\.\d\d)\): Die Poststelle im", first), (
        out
    )
    assert '"hits"' not in out and "{" not in out  # text, not the JSON it used to inject


def test_discovery_without_a_token(server):
    base, _, root = server
    public = httpx.get(f"{base}/api/mcp/v1", headers={"Accept": "application/json"})
    assert public.status_code == 200
    assert {"name", "version", "protocolVersion", "tools"} <= set(public.json())
    stream = httpx.get(f"{base}/api/mcp/v1", headers={"Accept": "text/event-stream"})
    assert stream.status_code == 405
    fresh = root / "fresh"
    fresh.mkdir()
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    assert NODE is not None and CLIENT is not None
    result = subprocess.run(  # no config and no token: the bridge's discovery mode
        [NODE, str(CLIENT / "bin" / "knowmind.js"), "mcp"],
        input="".join(json.dumps(f) + "\n" for f in frames),
        capture_output=True,
        text=True,
        timeout=60,
        env={**_env(fresh), "KNOWMIND_API_URL": base},
        check=False,
    )
    replies = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert "Discovery-Modus" in result.stderr
    assert replies[1]["result"]["serverInfo"]["name"] == "knowmind"
    assert any(t["name"] == "knowmind_recall" for t in replies[2]["result"]["tools"])

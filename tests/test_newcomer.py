"""A newcomer with the README against a real `knowmind serve`: the walkthrough pasted twice
(the same outcome: the tenant found again, every memory `unchanged`, the same answers), the
SDK snippet and the command-line block as written, and the MCP configurations pointing at the
real endpoint. The blocks are read from README.md, so these tests break when it drifts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.test_server_process import free_port, stop, wait_ready

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parent.parent / "README.md"
DOCUMENTED_BASE = "http://127.0.0.1:8080"
KNOWMIND = f"{sys.executable} -m knowmind"


def readme_block(section: str, language: str, index: int = 0) -> str:
    """The ``index``-th fenced ``language`` block of the README section ``## section``."""
    text = README.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) > index, f"README section {section!r}: no {language} block {index}"
    return blocks[index]


@dataclass(frozen=True)
class Newcomer:
    base: str
    env: dict[str, str]  # the shell's: KNOWMIND_DATA_DIR as the server's, no KNOWMIND_URL yet
    runs: tuple[list[dict], list[dict]]  # the walkthrough's JSON answers, pasted twice
    exported: dict[str, str]  # what the walkthrough exported for the SDK and the CLI


def as_pasted(block: str, base: str) -> str:
    return block.replace(DOCUMENTED_BASE, base).replace(".venv/bin/knowmind", KNOWMIND)


def bash(script: str, env: dict[str, str], cwd: Path | None = None) -> str:
    """A block as pasted into bash, stopping at the first failing command; its stdout."""
    ran = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    return ran.stdout


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory) -> Iterator[Newcomer]:
    root = tmp_path_factory.mktemp("newcomer")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMIND_")}
    env |= {"HOME": str(root / "home"), "KNOWMIND_DATA_DIR": str(root / "knowmind")}
    server_env = env | {"KNOWMIND_PORT": str(port), "KNOWMIND_RERANKER": "none"}
    with open(root / "out", "w") as out, open(root / "err", "w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "knowmind", "serve"], env=server_env, stdout=out, stderr=err
        )
    try:
        wait_ready(base, server)
        script = as_pasted(readme_block("Walkthrough", "sh"), base)
        script += '\necho "exported $KNOWMIND_URL $KNOWMIND_TOKEN"\n'
        outputs = [bash(script, env) for _ in range(2)]
        runs = tuple([json.loads(line) for line in out.splitlines() if line.startswith("{")]
                     for out in outputs)  # fmt: skip
        url, token = outputs[1].rsplit("exported ", 1)[1].split()
        yield Newcomer(
            base, env, (runs[0], runs[1]), {"KNOWMIND_URL": url, "KNOWMIND_TOKEN": token}
        )
    finally:
        stop(server)


def test_walkthrough_pasted_twice_has_the_same_outcome(newcomer):
    first, second = newcomer.runs
    assert len(first) == len(second) == 6, first  # 2 memories, a conversation, 2 recalls, answer
    memories, conversation, recalls, answer = first[:2], first[2], first[3:5], first[5]
    assert [m["status"] for m in memories] == ["created", "created"]
    assert conversation["created"] == 2 and len(conversation["speakers"]) == 2
    again = second[:3]
    assert [m["status"] for m in again[:2]] == ["unchanged", "unchanged"]
    assert [m["id"] for m in again[:2]] == [m["id"] for m in memories]
    assert again[2]["unchanged"] == 2 and again[2]["created"] == 0
    assert [t["id"] for t in again[2]["turns"]] == [t["id"] for t in conversation["turns"]]
    for run in (first, second):
        english, german = (r["results"] for r in run[3:5])
        assert english[0]["title"] == "Anna Schmidt", english  # the German memory, asked in English
        assert any("web-01" in hit["content"] for hit in german), german
        assert not any(r["degraded"] for r in run[3:5])
        reply = run[5]
        assert "answer" in reply and "citations" in reply
        assert any(p["title"] == "Anna Schmidt" for p in reply["passages"]), reply
    assert recalls[0]["results"][0]["memory_id"] == second[3]["results"][0]["memory_id"]
    assert answer["passages"][0]["memory_id"] == second[5]["passages"][0]["memory_id"]
    assert newcomer.exported["KNOWMIND_URL"] == newcomer.base
    assert newcomer.exported["KNOWMIND_TOKEN"].startswith("kmt_")


def test_sdk_snippet_runs_as_written(newcomer, tmp_path):
    snippet = tmp_path / "snippet.py"
    snippet.write_text(readme_block("Python SDK", "python"))
    assert len(snippet.read_text().splitlines()) <= 10
    ran = subprocess.run(
        [sys.executable, str(snippet)],
        env=newcomer.env | newcomer.exported,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    first = ran.stdout.splitlines()[0]
    assert re.fullmatch(r"[01]\.\d\d  .*Nordlicht.*", first), ran.stdout


def test_command_line_block_runs_as_written(newcomer, tmp_path):
    (tmp_path / "memories.jsonl").write_text(
        json.dumps({"title": "Nordlicht", "content": "Das Projekt Nordlicht startet im April."})
        + "\n"
    )
    out = bash(as_pasted(readme_block("Command line", "sh"), newcomer.base),
               newcomer.env | newcomer.exported, cwd=tmp_path)  # fmt: skip
    assert re.search(r"^1\. \[[01]\.\d\d\] ", out, flags=re.M), out  # the recall's first hit
    assert re.search(r"memories.jsonl: [01] created, [01] unchanged, 0 failed", out), out


def test_mcp_configurations_name_the_real_endpoint(newcomer):
    http_config = json.loads(readme_block("MCP clients", "json", 0))["mcpServers"]["knowmind"]
    assert http_config["type"] == "http"
    assert http_config["url"] == f"{DOCUMENTED_BASE}/api/mcp/v1"
    token = newcomer.exported["KNOWMIND_TOKEN"]
    headers = {k: v.replace("kmt_...", token) for k, v in http_config["headers"].items()}
    listed = httpx.post(
        http_config["url"].replace(DOCUMENTED_BASE, newcomer.base),
        headers=headers,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert listed.status_code == 200, listed.text
    tools = {tool["name"] for tool in listed.json()["result"]["tools"]}
    assert "knowmind_recall_memories" in tools
    bridge = json.loads(readme_block("MCP clients", "json", 1))["mcpServers"]["knowmind"]
    assert bridge["command"] == "npx" and bridge["args"][-2:] == ["knowmind", "mcp"]
    # the official client reads these two variables and posts to $KNOWMIND_API_URL/api/mcp/v1
    assert bridge["env"]["KNOWMIND_API_URL"] == DOCUMENTED_BASE
    assert bridge["env"]["KNOWMIND_TOKEN"] == "kmt_..."
